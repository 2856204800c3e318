"""Where a named pack stands, read from its record (pure): each allocation as the feeding
sees it, and each task ended, in an allocation, or waiting to be sent."""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from datetime import datetime
from typing import TYPE_CHECKING, Deque, Dict, List, Optional, Sequence, Set

from ..model import JobStatus
from ..store.packs import ENDED, SENDING, SENT, PackAllocation, PackTask

if TYPE_CHECKING:
    from .allocations import Instance


@dataclasses.dataclass
class Held:
    """One allocation as the feeding sees it."""

    job_id: str
    asked_at: float  # monotonic
    #: its Flux instance, once reached
    instance: Optional[Instance] = None
    #: when it ends (monotonic), from its instance's expiration or its start + time
    ends_at: Optional[float] = None
    #: the cores its instance schedules on (0: not read yet - its R is written once the
    #: instance has found its resources)
    cores: int = 0
    #: the tasks in it: Flux job id -> task index
    in_flight: Dict[str, int] = dataclasses.field(default_factory=dict)
    #: tasks a feeder was sending into it when it stopped: token -> task indexes
    sending: Dict[str, List[int]] = dataclasses.field(default_factory=dict)
    #: a newer allocation was asked for to take over from this one
    renewed: bool = False
    released: bool = False

    def time_left(self) -> float:
        return (self.ends_at - time.monotonic()) if self.ends_at is not None else 0.0


@dataclasses.dataclass
class Standing:
    """A pack's tasks and allocations, by where its record has them."""

    held: List[Held] = dataclasses.field(default_factory=list)
    #: the tasks to send, in order
    pending: Deque[int] = dataclasses.field(default_factory=deque)
    finals: Dict[int, JobStatus] = dataclasses.field(default_factory=dict)
    #: the tasks already sent again once (after a loss)
    sent_again: Set[int] = dataclasses.field(default_factory=set)
    #: when each token's order was first made (tasks left ``sending``)
    made: Dict[str, datetime] = dataclasses.field(default_factory=dict)


def standing(
    tasks: Sequence[PackTask], allocations: Sequence[PackAllocation], wall: float, now: float
) -> Standing:
    """The pack whose record holds ``tasks`` and ``allocations`` (``wall``: ``time.time()``
    and ``now``: ``time.monotonic()`` at once, to place when each was asked): ended tasks
    keep their end, sent ones are in flight in their allocation, those left ``sending``
    are in transit into it (looked up by their key once it is reached), the rest wait.  A
    released allocation keeps its tasks: they were lost with it."""
    held = {
        a.job_id: Held(a.job_id, now - (wall - a.asked), renewed=a.renewed, released=a.released)
        for a in allocations
    }
    stands = Standing(list(held.values()))
    for task in tasks:
        place = held.get(task.allocation or "")
        if task.again:
            stands.sent_again.add(task.index)
        if task.state == ENDED and task.final is not None:
            stands.finals[task.index] = task.final
        elif task.state == SENT and task.job_id and place is not None:
            place.in_flight[task.job_id] = task.index
        elif task.state in (SENT, SENDING) and place is not None:
            place.sending.setdefault(task.token or "", []).append(task.index)
            if task.token and task.made:
                stands.made[task.token] = datetime.fromisoformat(task.made)
        else:
            stands.pending.append(task.index)
    return stands
