"""Slurm's job states, exit codes and timestamps in our terms: pure, no I/O."""

from __future__ import annotations

import functools
import re
from datetime import datetime, tzinfo
from typing import Dict, Optional

from ...model import CANCELLED_WHILE_PENDING, JobState, JobStatus

#: Every Slurm job state (long form, as squeue %T / sacct State print it).
STATE_MAP: Dict[str, JobState] = {
    "PENDING": JobState.PENDING,
    "CONFIGURING": JobState.PENDING,
    "REQUEUED": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "NODE_FAIL": JobState.FAILED,
    "BOOT_FAIL": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    "LAUNCH_FAILED": JobState.FAILED,
    # A preempted job that is requeued shows REQUEUED instead, so PREEMPTED
    # as a final state means the job was killed and will not come back.
    "PREEMPTED": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    # Federation: the sibling that did not run the job.
    "REVOKED": JobState.CANCELLED,
    "TIMEOUT": JobState.TIMEOUT,
    "DEADLINE": JobState.TIMEOUT,
}

#: The compact codes (squeue %t), accepted too: some sites set SQUEUE_FORMAT.
COMPACT_STATES: Dict[str, str] = {
    "PD": "PENDING",
    "CF": "CONFIGURING",
    "RQ": "REQUEUED",
    "RF": "REQUEUE_FED",
    "RH": "REQUEUE_HOLD",
    "RD": "RESV_DEL_HOLD",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "SO": "STAGE_OUT",
    "SI": "SIGNALING",
    "S": "SUSPENDED",
    "ST": "STOPPED",
    "RS": "RESIZING",
    "CD": "COMPLETED",
    "F": "FAILED",
    "NF": "NODE_FAIL",
    "BF": "BOOT_FAIL",
    "OOM": "OUT_OF_MEMORY",
    "SE": "SPECIAL_EXIT",
    "LF": "LAUNCH_FAILED",
    "PR": "PREEMPTED",
    "CA": "CANCELLED",
    "RV": "REVOKED",
    "TO": "TIMEOUT",
    "DL": "DEADLINE",
}


@functools.lru_cache(maxsize=256)  # a few dozen words, met on every row
def map_state(native: str) -> JobState:
    """Our state for Slurm's words; UNKNOWN (never a guess) for anything new.

    sacct prints ``CANCELLED by 0`` (the uid that cancelled), and its default
    column width truncates to ``CANCELLED+``: only the first word counts.
    """
    words = native.strip().split()
    if not words:
        return JobState.UNKNOWN
    word = words[0].rstrip("+").upper()
    word = COMPACT_STATES.get(word, word)
    if word in STATE_MAP:
        return STATE_MAP[word]
    if word.startswith("REQUEUE"):  # REQUEUED, REQUEUE_FED, REQUEUE_HOLD and any later one
        return JobState.PENDING
    return JobState.UNKNOWN


def parse_exit_code(text: str) -> Optional[int]:
    """``N:S`` (sacct ExitCode, scontrol ExitCode) -> N, or 128+S when signalled."""
    text = text.strip()
    match = re.fullmatch(r"(\d+)(?::(\d+))?", text)
    if not match:
        return None
    code = int(match.group(1))
    signal = int(match.group(2) or 0)
    return 128 + signal if signal else code


def parse_wait_status(text: str) -> Optional[int]:
    """squeue's ``exit_code`` field: the raw wait(2) status, not ``N:S``.

    ``squeue -O exit_code`` prints ``768`` for ``exit 3`` (3 << 8) and ``9``
    for a job killed by SIGKILL, where sacct prints ``3:0`` and ``0:9``.
    """
    text = text.strip()
    if ":" in text:
        return parse_exit_code(text)
    if not text.isdigit():
        return None
    status = int(text)
    signal = status & 0x7F
    if signal:
        return 128 + signal
    return (status >> 8) & 0xFF


_NO_TIME = {"", "unknown", "none", "n/a", "(null)", "0"}


def parse_time(text: str, zone: Optional[tzinfo] = None) -> Optional[datetime]:
    """A Slurm timestamp as an aware datetime; ``None`` for Unknown/None/N/A.

    Slurm prints local time without a zone (``2026-11-29T15:32:57``): it is
    read in ``zone``, by default this machine's local zone.
    """
    text = text.strip()
    if text.lower() in _NO_TIME:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is not None:
        return moment
    if zone is not None:
        return moment.replace(tzinfo=zone)
    return moment.astimezone()  # a naive time is local time: attach the local zone


#: the reason of a job cancelled once started, whose script's end Slurm does not record
CANCELLED = "cancelled"

#: Slurm's reason for a job whose parent did not complete (``--kill-on-invalid-dep``)
NEVER_SATISFIED = "DependencyNeverSatisfied"


def settled(status: JobStatus) -> JobStatus:
    """A status in the words every scheduler uses, where Slurm's own would mislead.

    - A running job (RUNNING, COMPLETING...) has no reason: Slurm keeps the one
      it will end with (a failing script shows ``COMPLETING``, ``NonZeroExitCode``).
    - A job cancelled before it ran has no exit code and no start: Slurm reports
      ``0:0``, sacct no start, squeue start = end = the cancel, and both keep its
      pending reason (``BeginTime``, ``Dependency``) where a job that ran has
      ``None``; its reason is ``cancelled while pending`` (with Slurm's).
    - A job cancelled once started has no exit code either (its reason: ``cancelled``):
      the allocation's ``0:0`` is not its script's (a job cancelled as it starts is
      recorded as started and ended in the same second with ``0:0``, before its script
      returned); a script killed by the signal keeps ``0:15`` (143).
    """
    if status.state is JobState.RUNNING and status.reason:
        return status.with_(reason="")
    if status.state is not JobState.CANCELLED or status.exit_code not in (0, None):
        return status
    if status.start_time is not None and not status.reason:
        # Slurm: a cancelled job's allocation ends 0:0 whatever its script did
        return status.with_(exit_code=None, reason=CANCELLED)
    reason = status.reason
    if not reason.startswith(NEVER_SATISFIED):  # that one already says why, everywhere
        reason = CANCELLED_WHILE_PENDING + (f" ({reason})" if reason else "")
    return status.with_(exit_code=None, start_time=None, reason=reason)
