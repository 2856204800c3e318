"""What the futures and ``async for`` tests of every scheduler check: a job's changes
told once each and in order, and how many follower threads run."""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Sequence, Tuple

from hpcbridge.model import JobState, JobStatus

#: the order of the unfinished states (every end ranks after them)
ORDER = {JobState.PENDING: 0, JobState.RUNNING: 1}


def in_order(changes: List[JobStatus]) -> bool:
    """Each state once, never backwards, the last one an end."""
    ranks = [ORDER.get(status.state, 2) for status in changes]
    return ranks == sorted(set(ranks)) and changes[-1].is_terminal


def followers() -> int:
    """The follower threads alive now."""
    return sum(t.name.startswith("hpcbridge-follower") for t in threading.enumerate())


async def streamed(adapter: Any, ids: Sequence[str]) -> Tuple[Dict[str, List[JobStatus]], int]:
    """Every change ``adapter.changes(ids)`` tells, by job, and the follower threads that
    ran while it told them."""
    told: Dict[str, List[JobStatus]] = {}
    async for change in adapter.changes(ids):
        told.setdefault(change.job_id, []).append(change)
    return told, followers()
