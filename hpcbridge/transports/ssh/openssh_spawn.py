"""One ``ssh`` process of the OpenSSH backend: its stdin (bytes, or a local file), its
output, its exit status; killed past its time budget."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ...errors import JobTimeoutError


@dataclass(frozen=True)
class Done:
    """What one ``ssh`` process gave: its exit status, output and time."""

    returncode: int
    stdout: bytes
    stderr: bytes
    duration: float

    def text(self) -> str:
        return (self.stderr or self.stdout).decode("utf-8", "replace").strip()[:2000]


def spawn(
    argv: Sequence[str],
    words: Sequence[str],
    budget: Optional[float],
    host: str,
    *,
    data: Optional[bytes],
    source: Optional[str],
) -> Done:
    """One ``ssh`` process; past ``budget`` it is killed (its channel closes)."""
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        stdin: Any = subprocess.DEVNULL if data is None else None
        if source is not None:
            stdin = stack.enter_context(open(source, "rb"))
        try:
            done = subprocess.run(
                list(argv), input=data, stdin=stdin, capture_output=True, timeout=budget
            )
        except subprocess.TimeoutExpired:
            raise timed_out(words, budget, host) from None
    return Done(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def timed_out(words: Sequence[str], budget: Optional[float], host: str) -> JobTimeoutError:
    """The error of a command past its time budget."""
    return JobTimeoutError(
        f"{words[0]} did not finish within {budget:g} s on {host} "
        f"(command: {' '.join(words)[:200]})"
    )


def killed_words(returncode: int) -> str:
    """The words for a local ``ssh`` a signal ended (``returncode`` < 0), else ""."""
    if returncode >= 0:
        return ""
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"the local ssh was killed by {name}"
