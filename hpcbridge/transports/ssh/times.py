"""Files' modification times to the nanosecond over SSH: SFTP (version 3, paramiko's)
carries times in whole seconds, so the paths a listing found are asked again with one
GNU ``stat`` command.  The builder and the parser, pure; ``ssh.py`` runs the command."""

from __future__ import annotations

from typing import Dict, List, Sequence

#: paths per ``stat`` command: far below any ARG_MAX
PATHS_PER_COMMAND = 500


def exact_mtime_commands(paths: Sequence[str]) -> List[List[str]]:
    """The argvs that print ``<mtime to the nanosecond> <path>`` for each of ``paths``."""
    ordered = sorted(set(paths))
    return [
        ["stat", "-c", "%.9Y %n", "--", *ordered[start : start + PATHS_PER_COMMAND]]
        for start in range(0, len(ordered), PATHS_PER_COMMAND)
    ]


def parse_exact_mtimes(text: str, wanted: Sequence[str]) -> Dict[str, float]:
    """The times in ``stat``'s output for the paths of ``wanted``; a line that is not
    ``<seconds>.<fraction> <path>`` (a ``stat`` without ``%.9Y``: BSD, busybox, coreutils
    before 8.25 print something else) is left out."""
    asked = set(wanted)
    found: Dict[str, float] = {}
    for line in text.splitlines():
        stamp, _, path = line.partition(" ")
        if path not in asked or "." not in stamp:
            continue
        try:
            found[path] = float(stamp)
        except ValueError:
            continue
    return found
