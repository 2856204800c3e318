"""Where a named pack stands, read from its record (pure): each allocation as the feeding
sees it, and each task ended, in an allocation, or waiting to be sent."""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from datetime import datetime
from typing import TYPE_CHECKING, Deque, Dict, List, Optional, Sequence, Set, Tuple

from ..engine.feeding import LOOK_AGAIN
from ..model import JobStatus
from ..store.packs import ENDED, SENDING, SENT, PackAllocation, PackTask

if TYPE_CHECKING:
    from .allocations import Instance


#: how often the cores up of an instance with a rank down are counted again (seconds)
COUNT_AGAIN = 2.0


@dataclasses.dataclass
class Held:
    """One allocation as the feeding sees it."""

    job_id: str
    asked_at: float  # monotonic
    #: its Flux instance, once reached
    instance: Optional[Instance] = None
    #: when it ends (monotonic), from its instance's expiration or its start + time
    ends_at: Optional[float] = None
    #: the cores of its instance's ranks that are up (0: none yet - a broker joins once
    #: it started); a rank whose broker is gone no longer counts: no task is queued for it
    cores: int = 0
    #: the cores of all its ranks (its R), when ``cores`` was read
    total: int = 0
    #: when ``cores`` was read (monotonic); -inf: to read at once (a task lost with a node)
    counted_at: float = float("-inf")
    #: the tasks in it: Flux job id -> task index
    in_flight: Dict[str, int] = dataclasses.field(default_factory=dict)
    #: tasks a feeder was sending into it when it stopped: token -> task indexes
    sending: Dict[str, List[int]] = dataclasses.field(default_factory=dict)
    #: a newer allocation was asked for to take over from this one
    renewed: bool = False
    released: bool = False

    def time_left(self) -> float:
        return (self.ends_at - time.monotonic()) if self.ends_at is not None else 0.0

    def capacity_due(self, now: float) -> bool:
        """Whether its instance's cores up are to be counted (again): while none is, every
        ``COUNT_AGAIN`` s while some rank is down (starting, lost), every ``LOOK_AGAIN``
        s once all are up (a broker lost with no task on it), and at once after a task
        was lost with its node."""
        whole = self.total > 0 and self.cores == self.total
        return not self.cores or now - self.counted_at >= (LOOK_AGAIN if whole else COUNT_AGAIN)

    def counted(self, capacity: Optional[Tuple[int, int]], now: float) -> str:
        """``capacity`` (cores up, cores in all; ``None``: not said) taken; what changed -
        or what stands after a task was lost with its node - said as a log line's end
        ("" when nothing did)."""
        after_a_loss = self.counted_at == float("-inf") and self.total > 0
        self.counted_at = now
        if capacity is None or (capacity == (self.cores, self.total) and not after_a_loss):
            return ""
        self.cores, self.total = capacity
        return f"{self.cores} of {self.total} core(s) up"


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
