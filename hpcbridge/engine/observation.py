"""What one look at a job found: its status, its source, when the scheduler gave it and
whether the scheduler could be asked; callers outside get the ``JobStatus`` alone."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
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


@dataclass(frozen=True, init=False)
class Observation:
    """One job's status as seen, and how it was seen."""

    # Slots and an __init__ of its own (a frozen dataclass's sets each field through
    # object.__setattr__): a round makes a few per job, and these cost half as much.
    __slots__ = ("status", "source", "answered_at", "reach")

    status: JobStatus
    source: Source
    #: when the scheduler gave this answer (epoch seconds, stamped by the poller)
    answered_at: Optional[float]
    reach: Reach

    def __init__(
        self,
        status: JobStatus,
        source: Source = Source.SCHEDULER,
        answered_at: Optional[float] = None,
        reach: Reach = Reach.ANSWERED,
    ) -> None:
        _SET_STATUS(self, status)
        _SET_SOURCE(self, source)
        _SET_ANSWERED_AT(self, answered_at)
        _SET_REACH(self, reach)

    @property
    def out_of_reach(self) -> bool:
        """The scheduler could not be asked (now or at all): the status is UNKNOWN."""
        return self.reach is not Reach.ANSWERED

    def with_status(self, status: JobStatus) -> Observation:
        return Observation(status, self.source, self.answered_at, self.reach)

    def stamped(self, answered_at: float, as_of: Optional[datetime] = None) -> Observation:
        """The same, given by the scheduler at ``answered_at`` (``as_of``: that time, for
        a status not dated yet)."""
        status = self.status
        if as_of is not None and status.as_of is None:
            status = status.with_(as_of=as_of)
        return Observation(status, self.source, answered_at, self.reach)


_SLOTS: Any = Observation  # each slot's own setter: past the frozen __setattr__
_SET_STATUS = _SLOTS.status.__set__
_SET_SOURCE = _SLOTS.source.__set__
_SET_ANSWERED_AT = _SLOTS.answered_at.__set__
_SET_REACH = _SLOTS.reach.__set__


def out_of_reach(job_id: str, reason: str, lasting: bool = False) -> Observation:
    """UNKNOWN: the scheduler could not be asked (``lasting``: nor will be)."""
    status = JobStatus(job_id, JobState.UNKNOWN, reason=reason)
    return Observation(status, reach=Reach.UNUSABLE if lasting else Reach.OUT_FOR_NOW)


def statuses_of(observed: Mapping[str, Observation]) -> Dict[str, JobStatus]:
    """The statuses alone, as callers outside see them."""
    return {job_id: observation.status for job_id, observation in observed.items()}
