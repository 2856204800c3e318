"""What Slurm's error messages mean: pure, no I/O."""

from __future__ import annotations

import re
from typing import Type

from ...errors import JobSubmissionError, LimitRefusedError, SubmissionUncertainError

_PREFIX = re.compile(
    r"^(?:sbatch|squeue|sacct|scancel|scontrol|srun|salloc):\s*(?:error|fatal):\s*"
)

#: sbatch messages after which the job may exist although sbatch failed
UNCERTAIN_SUBMISSION = ("Socket timed out on send/recv operation",)
#: the controller is busy, restarting or rate-limiting: worth asking again soon
TRANSIENT = (
    "Socket timed out on send/recv operation",
    "Unable to contact slurm controller",
    "Resource temporarily unavailable",
    "Rate limit exceeded",
    "Zero Bytes were transmitted or received",
    "Transport endpoint is not connected",
)
#: ... of which these mean that a request never reached it (so sending it again is safe)
NEVER_REACHED = (
    "Unable to contact slurm controller (connect failure)",
    "Rate limit exceeded",
)


def scheduler_message(text: str) -> str:
    """Slurm's own words: ``sbatch: error: `` prefixes stripped, the text kept.

    Warnings (``sbatch: warning: ...``) are dropped when errors are present.
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [_PREFIX.sub("", line) for line in lines if _PREFIX.match(line)]
    chosen = errors or lines
    return "; ".join(chosen)


def transient(message: str) -> bool:
    """A failure of the controller (busy, restarting, rate limiting), not of the request."""
    return any(text in message for text in TRANSIENT)


def never_reached(message: str) -> bool:
    """sbatch failed before its request reached the controller (no job exists)."""
    return any(text in message for text in NEVER_REACHED)


def submission_uncertain(message: str) -> bool:
    """sbatch failed, yet the job may have been created."""
    return any(text in message for text in UNCERTAIN_SUBMISSION)


def arrays_refused(message: str) -> bool:
    """sbatch's answer where job arrays are not allowed.

    "Invalid job array specification" where MaxArraySize is 0 or the range is
    over it; site submit filters that forbid arrays also name them.
    """
    return "array" in message.lower()


def is_invalid_job_id(message: str) -> bool:
    """squeue's and scontrol's answer for a single purged or unknown id."""
    return "Invalid job id specified" in message


def job_already_ended(message: str) -> bool:
    """scancel's (or pyslurm's) words for a job that is unknown or has ended."""
    return all(
        is_invalid_job_id(line) or "completed" in line.lower() or "already" in line.lower()
        for line in message.split("; ")
    )


def accounting_disabled(message: str) -> bool:
    """sacct's answer on a cluster without slurmdbd (exit 1)."""
    lowered = message.lower()
    return "accounting storage is disabled" in lowered or "accounting_storage/none" in lowered


#: sbatch's words for a job refused by a cap on queued jobs (the reason codes, and the
#: message Slurm prints for ESLURM_ACCOUNTING_POLICY when it names no code)
LIMIT_REFUSED = (
    "MaxSubmitJob",
    "GrpSubmitJob",
    "job submit limit",
)


def limit_refused(message: str) -> bool:
    """sbatch was refused because this user has as many jobs queued as allowed."""
    return any(text in message for text in LIMIT_REFUSED)


def refusal_error(message: str) -> Type[JobSubmissionError]:
    """The error a refused submission raises: uncertain (the job may exist: look for its
    key before sending it again), a cap on queued jobs met (a sweep waits and feeds the
    rest), else refused."""
    if submission_uncertain(message):
        return SubmissionUncertainError
    if limit_refused(message):
        return LimitRefusedError
    return JobSubmissionError
