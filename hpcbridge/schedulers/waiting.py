"""The one bounded wait loop: status rounds, back-off, UNKNOWN streaks, deadline.

It knows nothing of schedulers: it is handed a function doing one status
round for many jobs, and a ``Waiter`` that pauses between rounds (a plain
sleep, or a pause a driver ends early when a job ends).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from ..errors import JobNotFoundError, JobTimeoutError, TransportError
from ..model import JobState, JobStatus
from .driver import Waiter

log = logging.getLogger("hpcbridge")

StatusCallback = Callable[[JobStatus], None]
ProgressCallback = Callable[[Dict[str, JobStatus]], None]
StatusRound = Callable[[List[str]], Dict[str, JobStatus]]


class Sleeper:
    """The default pause: sleep, never woken early."""

    def pause(self, seconds: float) -> bool:
        time.sleep(seconds)
        return False

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class WaitPlan:
    """How to wait: intervals, limits and callbacks."""

    scheduler_name: str
    poll_interval: float = 10.0
    timeout: Optional[float] = None
    unknown_limit: int = 6
    first_interval: float = 0.25
    on_change: Optional[StatusCallback] = None
    on_poll: Optional[ProgressCallback] = None


@dataclass
class _Progress:
    """What the loop has seen so far."""

    pending: List[str]
    final: Dict[str, JobStatus] = field(default_factory=dict)
    latest: Dict[str, JobStatus] = field(default_factory=dict)
    last_seen: Dict[str, JobState] = field(default_factory=dict)
    unknown_streak: Dict[str, int] = field(default_factory=dict)


def wait_for_all(
    job_ids: List[str],
    status_round: StatusRound,
    make_waiter: Callable[[List[str]], Optional[Waiter]],
    plan: WaitPlan,
) -> Dict[str, JobStatus]:
    """Every job's final status; one ``status_round`` per poll for all pending ones.

    The interval starts short and backs off to ``poll_interval`` while nothing
    changes.  A job UNKNOWN for ``unknown_limit`` rounds in a row raises
    ``JobNotFoundError``; past ``timeout`` seconds, ``JobTimeoutError``.
    """
    deadline = None if plan.timeout is None else time.monotonic() + plan.timeout
    progress = _Progress(pending=list(job_ids))
    interval = min(plan.first_interval, plan.poll_interval)
    waiter: Optional[Waiter] = None
    try:
        while True:
            changed = _one_round(progress, status_round, plan)
            if not progress.pending:
                return {job_id: progress.final[job_id] for job_id in job_ids}
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise JobTimeoutError(
                    f"{len(progress.pending)} job(s) still unfinished after {plan.timeout:g} s: "
                    + ", ".join(progress.pending[:10])
                    + " (they keep running; wait again or cancel them)"
                )
            interval = plan.first_interval if changed else min(interval * 1.5, plan.poll_interval)
            pause = interval if deadline is None else min(interval, max(deadline - now, 0))
            if waiter is None:
                waiter = make_waiter(progress.pending) or Sleeper()
            if waiter.pause(pause):
                interval = plan.first_interval  # a job ended: look again soon
    finally:
        if waiter is not None:
            waiter.close()


def _one_round(progress: _Progress, status_round: StatusRound, plan: WaitPlan) -> bool:
    """Ask once, note what changed; True when any job changed state.

    A failed round (a dropped connection, a command past its time) makes every
    job UNKNOWN this time: a restarting controller is ridden out.
    """
    try:
        statuses = status_round(progress.pending)
    except (TransportError, JobTimeoutError) as exc:
        log.warning("status query failed (will retry): %s", exc)
        reason = f"query failed: {exc}"
        statuses = {
            job_id: JobStatus(job_id, JobState.UNKNOWN, reason=reason)
            for job_id in progress.pending
        }
    progress.latest.update(statuses)
    if plan.on_poll is not None:
        plan.on_poll(progress.latest)
    changed = False
    for job_id in list(progress.pending):
        status = statuses[job_id]
        if status.state is JobState.UNKNOWN:
            _count_unknown(progress, job_id, status, plan)
            continue
        progress.unknown_streak[job_id] = 0
        if progress.last_seen.get(job_id) is not status.state:
            progress.last_seen[job_id] = status.state
            changed = True
            if plan.on_change is not None:
                plan.on_change(status)
        if status.is_terminal:
            progress.final[job_id] = status
            progress.pending.remove(job_id)
    return changed


def _count_unknown(progress: _Progress, job_id: str, status: JobStatus, plan: WaitPlan) -> None:
    streak = progress.unknown_streak.get(job_id, 0) + 1
    progress.unknown_streak[job_id] = streak
    if streak >= plan.unknown_limit:
        raise JobNotFoundError(
            f"{plan.scheduler_name} job {job_id} could not be observed {streak} times in a row "
            f"({status.reason or 'not in queue, history or job folder'}); check the id, "
            "or the scheduler's own history"
        )
