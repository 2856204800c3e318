"""What one look at a job found: its status, its source, when the scheduler gave it and
whether the scheduler could be asked; callers outside get the ``JobStatus`` alone."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from ..model import JobState, JobStatus


class Source(enum.Enum):
    """Where an observation's status came from."""

    SCHEDULER = "scheduler"
    EXIT_FILE = "exit file"
    #: nothing new: what was known before
    KNOWN = "known"


class Reach(enum.Enum):
    """Whether the scheduler could be asked."""

    ANSWERED = "answered"
    #: not right now: a wait rides it out, and no exit-code file stands in for its word
    OUT_FOR_NOW = "out for now"
    #: not from here until something changes (no command, a bad setting)
    UNUSABLE = "unusable"


@dataclass(frozen=True)
class Observation:
    """One job's status as seen, and how it was seen."""

    status: JobStatus
    source: Source = Source.SCHEDULER
    #: when the scheduler gave this answer (epoch seconds, stamped by the poller)
    answered_at: Optional[float] = None
    reach: Reach = Reach.ANSWERED

    @property
    def out_of_reach(self) -> bool:
        """The scheduler could not be asked (now or at all): the status is UNKNOWN."""
        return self.reach is not Reach.ANSWERED

    def with_status(self, status: JobStatus) -> Observation:
        return self._with(status=status)

    def stamped(self, answered_at: float) -> Observation:
        """The same, given by the scheduler at ``answered_at``."""
        return self._with(answered_at=answered_at)

    def _with(self, **changes: Any) -> Observation:
        # A copy without ``__init__`` (a frozen one's costs twice): one per job and round.
        copy = object.__new__(Observation)
        copy.__dict__.update(self.__dict__, **changes)
        return copy


def out_of_reach(job_id: str, reason: str, lasting: bool = False) -> Observation:
    """UNKNOWN: the scheduler could not be asked (``lasting``: nor will be)."""
    status = JobStatus(job_id, JobState.UNKNOWN, reason=reason)
    return Observation(status, reach=Reach.UNUSABLE if lasting else Reach.OUT_FOR_NOW)


def statuses_of(observed: Mapping[str, Observation]) -> Dict[str, JobStatus]:
    """The statuses alone, as callers outside see them."""
    return {job_id: observation.status for job_id, observation in observed.items()}
