"""What a client costs Slurm's daemons, as they count it themselves.

``sdiag`` prints slurmctld's RPC counts by message type; ``sacctmgr show stats``
prints slurmdbd's (``sacct`` asks slurmdbd, never slurmctld).  Both reset on
request (``sdiag --reset``, ``sacctmgr -i clear stats``: root or SlurmUser).
The parsers are pure; ``reset`` and ``snapshot`` run the commands.
"""

from __future__ import annotations

import os
import subprocess
from typing import Dict, Mapping, Optional

#: slurmctld RPCs a status round costs: squeue of a list or of one id, the light
#: ``squeue --only-job-state`` (24.05+), scontrol show job
JOB_INFO = ("REQUEST_JOB_INFO", "REQUEST_JOB_INFO_SINGLE", "REQUEST_JOB_STATE")
#: slurmdbd RPCs a status round costs: sacct
DBD_JOB_QUERIES = ("DBD_GET_JOBS_COND",)
#: the counters' own RPCs, left out of the totals
OWN = ("REQUEST_STATS_INFO", "DBD_CLEAR_STATS", "DBD_GET_STATS", "SLURM_PERSIST_INIT", "DBD_FINI")


def parse_counts(text: str) -> Dict[str, int]:
    """``NAME (number) count:N ...`` lines of the "by message type" block, of either
    command's output."""
    counts: Dict[str, int] = {}
    in_types = False
    for line in text.splitlines():
        if line.startswith("Remote Procedure Call statistics by message type"):
            in_types = True
            continue
        if line.startswith("Remote Procedure Call statistics by user"):
            break
        words = line.split()
        if not in_types or not words:
            continue
        count = next((word for word in words if word.startswith("count:")), None)
        if count is not None:
            counts[words[0]] = int(count.split(":", 1)[1])
    return counts


def _run(argv: list, env: Optional[Mapping[str, str]]) -> str:
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()[:200]}")
    return done.stdout


def reset(env: Optional[Mapping[str, str]] = None, dbd: bool = True) -> None:
    """Zero slurmctld's counters (and slurmdbd's unless ``dbd=False``)."""
    _run(["sdiag", "--reset"], env)
    if dbd:
        _run(["sacctmgr", "-i", "clear", "stats"], env)


def controller_counts(env: Optional[Mapping[str, str]] = None) -> Dict[str, int]:
    return parse_counts(_run(["sdiag"], env))


def dbd_counts(env: Optional[Mapping[str, str]] = None) -> Dict[str, int]:
    return parse_counts(_run(["sacctmgr", "show", "stats"], env))


def total(counts: Mapping[str, int], names: tuple = ()) -> int:
    """The sum over ``names`` (all but the counters' own when empty)."""
    if names:
        return sum(counts.get(name, 0) for name in names)
    return sum(count for name, count in counts.items() if name not in OWN)
