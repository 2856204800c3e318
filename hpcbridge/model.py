"""Job states and job status records: plain data, no I/O."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any, Dict, Optional, Tuple


class JobState(str, enum.Enum):
    """The states every scheduler is mapped onto; UNKNOWN: "cannot tell right now"."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    UNKNOWN = "UNKNOWN"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def rank(self) -> int:
        """PENDING < RUNNING < any terminal state; UNKNOWN: -1."""
        return _RANKS.get(self, 2)

    def __str__(self) -> str:  # "COMPLETED", not "JobState.COMPLETED"
        return self.value


_RANKS = {JobState.UNKNOWN: -1, JobState.PENDING: 0, JobState.RUNNING: 1}

#: the reason of a job cancelled before it ran, on every scheduler
CANCELLED_WHILE_PENDING = "cancelled while pending"
#: the native state of an end read from the wrapper's exit-code file, not the scheduler
FROM_FILE = "(exit-code file)"
#: the native state of a job whose Flux instance is gone (its allocation released or
#: ended) before it was seen to end: recorded so, never asked again
INSTANCE_GONE = "(instance gone)"
#: the native state of a pack's allocation released once its work was done
RELEASED = "(released by its pack)"

TERMINAL_STATES = frozenset(
    {JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT}
)


@dataclass(frozen=True)
class JobStatus:
    """What is known about one job at one moment."""

    job_id: str
    state: JobState
    exit_code: Optional[int] = None
    start_time: Optional[datetime] = None
    end_time: Optional[datetime] = None
    native_state: str = ""
    reason: str = ""
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    #: when this state was known to hold: the scheduler's answer, the exit-code file's
    #: reading, or the record (a job just submitted: its submission); ``None``: not said
    as_of: Optional[datetime] = field(default=None, compare=False)

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal

    def age(self, now: Optional[datetime] = None) -> Optional[float]:
        """Seconds since ``as_of`` (``None`` when it is not known)."""
        if self.as_of is None:
            return None
        return ((now or datetime.now(timezone.utc)) - self.as_of).total_seconds()

    def to_dict(self) -> Dict[str, Any]:
        """The source system's shape: ``{state, exit_code, start_time, end_time}``."""
        return {
            "state": self.state.value,
            "exit_code": self.exit_code,
            "start_time": self.start_time,
            "end_time": self.end_time,
        }

    def to_json(self) -> Dict[str, Any]:
        """The stable JSON shape of the command line (times as ISO 8601)."""
        return {
            "job_id": self.job_id,
            "state": self.state.value,
            "exit_code": self.exit_code,
            "start_time": _iso(self.start_time),
            "end_time": _iso(self.end_time),
            "native_state": self.native_state,
            "reason": self.reason,
            "as_of": _iso(self.as_of),
        }

    def with_(self, **changes: Any) -> JobStatus:
        """A copy with ``changes`` - its fields copied as they are (no ``__init__``: a
        status refresh makes one or two per job)."""
        if not _STATUS_FIELDS.issuperset(changes):
            unknown = sorted(changes.keys() - _STATUS_FIELDS)
            raise TypeError(f"JobStatus has no field {unknown[0]!r}")
        copy = object.__new__(JobStatus)
        copy.__dict__.update(self.__dict__, **changes)
        return copy


_STATUS_FIELDS = frozenset(item.name for item in fields(JobStatus))


def _iso(moment: Optional[datetime]) -> Optional[str]:
    return moment.isoformat() if moment is not None else None


def advance(previous: Optional[JobStatus], observed: JobStatus) -> JobStatus:
    """Merge an observation into what was known: a terminal state is final, UNKNOWN
    replaces nothing, a lower rank keeps the state but takes new times or reason."""
    if previous is None or previous.state is JobState.UNKNOWN:
        return observed
    if previous.is_terminal:
        return previous
    if observed.state is JobState.UNKNOWN:
        return previous
    if observed.state.rank < previous.state.rank:
        return previous.with_(
            start_time=previous.start_time or observed.start_time,
            reason=observed.reason or previous.reason,
        )
    if observed.start_time is not None or previous.start_time is None:
        return observed
    return observed.with_(start_time=previous.start_time)


@dataclass(frozen=True)
class Charge:
    """What a scheduler charged one job: CPU-seconds (Slurm's ``CPUTimeRAW``; Flux: the
    cores of its R x its run time), GPU-seconds (``None``: not told - Flux's listing has
    no GPU count - so the GPUs asked for x elapsed), and Slurm's billing units x seconds
    (``None`` where the scheduler has no billing)."""

    cpu_seconds: float
    gpu_seconds: Optional[float] = 0.0
    billing_seconds: Optional[float] = None
    #: the scheduler's accounting says the job ended: the figures will not change (kept)
    final: bool = True

    def as_row(self) -> Tuple[float, Optional[float], Optional[float]]:
        return (self.cpu_seconds, self.gpu_seconds, self.billing_seconds)
