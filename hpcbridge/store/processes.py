"""Whether a process of this host still runs: a lock's owner, a sweep's feeder, the
mock scheduler's supervisor."""

from __future__ import annotations

import os
import socket
from typing import Optional


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs: signal 0 reaches it (one of another
    user counts: it exists); a zombie (ended, not yet reaped by its parent) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            # the state is the first field after the command's parenthesised name
            return handle.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def alive_here(host: str, pid: str) -> Optional[bool]:
    """Whether process ``pid`` of ``host`` runs, when ``host`` is this one and ``pid`` a
    number; ``None`` when this host cannot tell (another host: its lease or heartbeat
    says instead)."""
    if host != socket.gethostname() or not pid.isdigit():
        return None
    return pid_alive(int(pid))
