"""How the ``hpcbridge`` command prints: status lines, JSON, tables, progress."""

from __future__ import annotations

import json
import sys
from collections import Counter
from datetime import datetime
from typing import Any, Dict, Sequence

from ..errors import one_line
from ..model import FROM_FILE, JobStatus


def notice(text: str) -> None:
    """A line of the command's own on stderr (apart from what stdout prints)."""
    print(f"hpcbridge: {text}", file=sys.stderr)


def say_errors(errors: Sequence[BaseException]) -> None:
    """Each error's line on stderr but the last, which is raised (the command's exit code)."""
    for error in errors[:-1]:
        print(f"hpcbridge: error: {one_line(error)}", file=sys.stderr)
    if errors:
        raise errors[-1]


#: a longer list is printed one compact entry per line: json's C encoder, ~5x faster
#: than an indented dump (100,000 jobs in a second, not five)
LONG_LIST = 100


def print_json(data: Any) -> None:
    # ids as the scheduler writes them: a Flux id is "ƒ…", not "\u0192…"
    if isinstance(data, list) and len(data) > LONG_LIST:
        write = sys.stdout.write
        write("[\n")
        last = len(data) - 1
        for index, entry in enumerate(data):
            text = json.dumps(entry, default=str, ensure_ascii=False)
            write(f"  {text},\n" if index < last else f"  {text}\n")
        write("]\n")
        return
    print(json.dumps(data, indent=2, default=str, ensure_ascii=False))


def status_line(status: JobStatus) -> str:
    parts = [f"{status.job_id}", status.state.value]
    if status.exit_code is not None:
        parts.append(f"exit={status.exit_code}")
    if status.native_state == FROM_FILE:  # the wrapper's own record: the exit code says it
        return "  ".join(parts)
    if status.reason:
        parts.append(f"reason={status.reason}")
    if status.native_state and status.native_state != status.state.value:
        parts.append(f"native={status.native_state}")
    return "  ".join(parts)


def announce(status: JobStatus) -> None:
    """One time-stamped line on stderr for a state change."""
    stamp = datetime.now().strftime("%H:%M:%S")
    print(f"{stamp}  {status_line(status)}", file=sys.stderr, flush=True)


class TerminalLine:
    """One stderr line rewritten in place (a terminal's), ended by ``finish``."""

    shown = False

    def write(self, line: str) -> None:
        sys.stderr.write(f"\r\033[K{line}")
        sys.stderr.flush()
        self.shown = True

    def finish(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


class Progress(TerminalLine):
    """Counts per state (used only on a TTY)."""

    def __call__(self, statuses: Dict[str, JobStatus]) -> None:
        counts = Counter(status.state.value for status in statuses.values())
        self.write("  ".join(f"{count} {state}" for state, count in sorted(counts.items())))


def format_seconds(seconds: float) -> str:
    """``3725`` -> ``1:02:05``."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def print_table(rows: Sequence[Sequence[str]]) -> None:
    """Left-aligned columns, two spaces apart; the first row is the header."""
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())
