"""The table of a many-task wrapper: which task job ``$hpcb_index`` runs, inline or in
parts sourced by their jobs, with the scripts that travel in it (shell text for
``jobscript.build_wrapper``, pure)."""

from __future__ import annotations

import shlex
from typing import List, Optional, Sequence, Tuple

#: tasks per part of a many-task wrapper's table (``<wrapper>.<k>``, sourced by its jobs)
TASKS_PER_PART = 100
#: the largest script that travels in a wrapper's table (``build_wrapper``'s ``bundled``)
BUNDLED_SCRIPT_MAX = 64 * 1024
#: what a wrapper asked for a task it does not have says, and its exit code
NO_TASK = "echo \"hpcbridge: no task '$hpcb_index'\" >&2; exit 98"

#: one task of the table: its index, the line that sets it, the text of its script when
#: that travels in the table (else ``None``)
Entry = Tuple[int, str, Optional[str]]


def can_bundle(text: str) -> bool:
    """Whether a script's text can travel in a wrapper's table (a here-document)."""
    return (
        len(text) <= BUNDLED_SCRIPT_MAX and "\0" not in text and (not text or text.endswith("\n"))
    )


def table_lines(entries: Sequence[Entry]) -> List[str]:
    """The ``case`` that sets task ``$hpcb_index`` (a bundled script's text after it)."""
    lines = ['case "$hpcb_index" in']
    for index, sets, text in entries:
        if text is None:
            lines.append(f"  {index}) {sets} ;;")
            continue
        end = _here_document_end(text)
        lines.append(f"  {index}) {sets}; hpcb_unpack <<'{end}'")
        lines.append(f"{text}{end}")
        lines.append("  ;;")
    lines.append(f"  *) {NO_TASK} ;;")
    lines.append("esac")
    return lines


def part_files(entries: Sequence[Entry], parts_path: str) -> List[Tuple[str, str]]:
    """``(path, text)`` of each part of the table: ``TASKS_PER_PART`` tasks a part."""
    parts = []
    for first in range(0, len(entries), TASKS_PER_PART):
        lines = table_lines(entries[first : first + TASKS_PER_PART])
        parts.append((f"{parts_path}.{first // TASKS_PER_PART}", "\n".join(lines) + "\n"))
    return parts


#: writes a bundled script to ``$hpcb_script`` unless there: renamed into place, as the
#: tasks of one Flux job run this at once
UNPACK_FUNCTION = (
    'hpcb_unpack() { [ -x "$hpcb_script" ] && return 0; '
    'hpcb_new="$hpcb_script.tmp.${FLUX_TASK_RANK:-0}.$$"; '
    'cat > "$hpcb_new" && chmod 700 "$hpcb_new" && mv -f "$hpcb_new" "$hpcb_script" '
    '|| echo "hpcbridge: cannot write $hpcb_script" >&2; }'
)


def _here_document_end(text: str) -> str:
    """A here-document delimiter that is no line of ``text``."""
    lines = set(text.split("\n"))
    end, counter = "HPCB_SCRIPT_END", 0
    while end in lines:
        counter += 1
        end = f"HPCB_SCRIPT_END_{counter}"
    return end


def index_check_lines() -> List[str]:
    # Digits only, no leading zero: dash's arithmetic would abort, or read octal.
    return ['case "$hpcb_index" in', f"  '' | *[!0-9]* | 0?*) {NO_TASK} ;;", "esac"]


def part_lines(parts_path: str) -> List[str]:
    """Source the part of the table that holds task ``$hpcb_index`` (``.``: no process)."""
    return [
        *index_check_lines(),
        f'hpcb_part={shlex.quote(parts_path)}."$((hpcb_index / {TASKS_PER_PART}))"',
        f'[ -r "$hpcb_part" ] || {{ {NO_TASK}; }}',
        '. "$hpcb_part"',
    ]
