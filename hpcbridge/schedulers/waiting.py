"""The one bounded wait loop: ticks, quick notice of ends, UNKNOWN streaks, deadline.

It knows nothing of schedulers.  It is handed two functions over many jobs -
``status_round`` (the scheduler's answers, through the ``polling.Poller``
that keeps its polite rate: most ticks it only repeats the last answers) and
``file_round`` (the jobs whose wrapper wrote its exit-code file: a ``stat``,
no scheduler asked) - and a ``Waiter`` that pauses between ticks (a plain
sleep, or a pause a driver ends early when a job ends).

Every ``notice_interval`` seconds (1 s) it takes both rounds - a *full tick* -
so a job's end is known within about a second while the scheduler is asked no
more often than the poller allows.  With many jobs the full ticks are spaced so
that at most ``FULL_TICK_RATE`` jobs a second are looked at: the client's cost
stays linear in the number of jobs, whatever their number.  A waiter that hears
ends (Flux's bindings) wakes the loop with the ids that ended: they are taken
from its events (on a full tick too: the poller may repeat an answer from
before they ended), that tick looks at those alone, and while it hears, no
exit-code file is looked at and a full tick is only the safety net (and the
running jobs' states for ``on_poll``): at most ``HEARING_TICK_RATE`` jobs a
second, at least every ``HEARING_GAP`` seconds.  Every end the loop learns,
heard, listed or read from a file, is told to the waiter (``Waiter.settled``):
one that could not hear a job stops waiting for it.  An UNKNOWN answer counts
towards the streak only when it is a new answer (``ANSWERED_AT``), not a repeat
of the last one.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Collection, Dict, List, Optional, Set

from ..errors import JobNotFoundError, JobTimeoutError, TransportError
from ..model import JobState, JobStatus
from ..retrying import Deadline
from .driver import Waiter

log = logging.getLogger("hpcbridge")

StatusCallback = Callable[[JobStatus], None]
ProgressCallback = Callable[[Dict[str, JobStatus]], None]
StatusRound = Callable[[List[str]], Dict[str, JobStatus]]

#: ``JobStatus.extra`` key: when the scheduler gave this answer (epoch seconds)
ANSWERED_AT = "answered_at"
#: the most jobs a second the full ticks look at (3,000 unfinished: a full tick every 1.5 s)
FULL_TICK_RATE = 2000.0
#: the same while the waiter hears every end (1,000 unfinished: a full tick every 10 s)
HEARING_TICK_RATE = 100.0
#: the longest gap between two full ticks while the waiter hears every end
HEARING_GAP = 30.0


class Sleeper:
    """The default pause: sleep, never woken early."""

    def pause(self, seconds: float) -> Set[str]:
        Deadline(seconds).sleep(seconds)
        return set()

    def listening(self) -> bool:
        return False

    def settled(self, job_ids: Collection[str]) -> None:
        """Nothing to note."""

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class WaitPlan:
    """How to wait: the tick, limits and callbacks."""

    scheduler_name: str
    timeout: Optional[float] = None
    unknown_limit: int = 6
    #: seconds between two looks at the exit-code files (and at the poller's answers)
    notice_interval: float = 1.0
    on_change: Optional[StatusCallback] = None
    on_poll: Optional[ProgressCallback] = None
    #: return as soon as this many have ended (a sweep's feeder: room for more), with
    #: the final statuses of those alone; ``None``: wait for all
    enough: Optional[int] = None
    #: whether an exit-code file may tell an end first; a sweep's feeder waits for the
    #: scheduler's word: a job whose file is written still holds its place in the queue
    files: bool = True


@dataclass
class _Progress:
    """What the loop has seen so far."""

    #: the unfinished jobs, in the order given (a dict: each end removed in O(1))
    pending: Dict[str, None]
    final: Dict[str, JobStatus] = field(default_factory=dict)
    latest: Dict[str, JobStatus] = field(default_factory=dict)
    last_seen: Dict[str, JobState] = field(default_factory=dict)
    unknown_streak: Dict[str, int] = field(default_factory=dict)
    #: the ANSWERED_AT of the last UNKNOWN answer counted, per job
    counted: Dict[str, object] = field(default_factory=dict)


def wait_for_all(
    job_ids: List[str],
    status_round: StatusRound,
    file_round: StatusRound,
    make_waiter: Callable[[List[str]], Optional[Waiter]],
    plan: WaitPlan,
    heard_round: Optional[StatusRound] = None,
) -> Dict[str, JobStatus]:
    """Every job's final status; ``heard_round`` answers for the jobs a waiter heard
    end (from its events, at once: not through the polite poll), else ``status_round``.

    A job UNKNOWN for ``unknown_limit`` new answers in a row raises
    ``JobNotFoundError``; past ``timeout`` seconds, ``JobTimeoutError``.
    """
    deadline = Deadline(plan.timeout)
    progress = _Progress(pending=dict.fromkeys(job_ids))
    heard: Set[str] = set()
    next_full = 0.0
    # Before the first round: a driver's event stream may answer it (Flux's journal).
    waiter: Waiter = make_waiter(list(progress.pending)) or Sleeper()
    try:
        while True:
            full = not heard or time.monotonic() >= next_full
            if heard:
                # The waiter heard these end: asked from its events, on a full tick too
                # (the poller may repeat an answer from before these ends).
                ended = [job_id for job_id in heard if job_id in progress.pending]
                if ended:
                    _take(progress, _asked(heard_round or status_round, ended), plan, waiter)
            if full and progress.pending:
                hearing = waiter.listening()
                next_full = time.monotonic() + _full_gap(plan, len(progress.pending), hearing)
                if plan.files and not hearing:
                    # The files first: a job that ended is not asked about.
                    _take(progress, file_round(list(progress.pending)), plan, waiter)
                if progress.pending:
                    _take(progress, _asked(status_round, list(progress.pending)), plan, waiter)
            if plan.on_poll is not None:
                plan.on_poll(progress.latest)
            if not progress.pending:
                return {job_id: progress.final[job_id] for job_id in job_ids}
            if plan.enough is not None and len(progress.final) >= plan.enough:
                return dict(progress.final)
            if deadline.expired:
                raise JobTimeoutError(
                    f"{len(progress.pending)} job(s) still unfinished after {plan.timeout:g} s: "
                    + ", ".join(list(progress.pending)[:10])
                    + " (they keep running; wait again or cancel them)"
                )
            heard = waiter.pause(deadline.cap(max(next_full - time.monotonic(), 0.0)))
    finally:
        waiter.close()


def _full_gap(plan: WaitPlan, pending: int, hearing: bool) -> float:
    """Seconds to the next full tick: ``notice_interval``, more for many jobs, more
    again while the waiter hears every end."""
    gap = max(plan.notice_interval, pending / FULL_TICK_RATE)
    if hearing:
        gap = max(gap, min(pending / HEARING_TICK_RATE, HEARING_GAP))
    return gap


def _asked(status_round: StatusRound, pending: List[str]) -> Dict[str, JobStatus]:
    """One status round; a failed one (a dropped connection, a command past its time)
    makes every job UNKNOWN this time: a restarting controller is ridden out."""
    try:
        return status_round(pending)
    except (TransportError, JobTimeoutError) as exc:
        log.warning("status query failed (will retry): %s", exc)
        reason = f"query failed: {exc}"
        return {job_id: JobStatus(job_id, JobState.UNKNOWN, reason=reason) for job_id in pending}


def _take(
    progress: _Progress, statuses: Dict[str, JobStatus], plan: WaitPlan, waiter: Waiter
) -> None:
    """Note what changed; call ``on_change`` for each job whose state changed; tell the
    waiter the jobs that ended (it may not hear them: ``Waiter.settled``)."""
    progress.latest.update(statuses)
    ended: List[str] = []
    for job_id in [job_id for job_id in statuses if job_id in progress.pending]:
        status = statuses[job_id]
        if status.state is JobState.UNKNOWN:
            _count_unknown(progress, job_id, status, plan)
            continue
        progress.unknown_streak[job_id] = 0
        if progress.last_seen.get(job_id) is not status.state:
            progress.last_seen[job_id] = status.state
            if plan.on_change is not None:
                plan.on_change(status)
        if status.is_terminal:
            progress.final[job_id] = status
            del progress.pending[job_id]
            ended.append(job_id)
    waiter.settled(ended)


def _count_unknown(progress: _Progress, job_id: str, status: JobStatus, plan: WaitPlan) -> None:
    answered = status.extra.get(ANSWERED_AT, object())  # no stamp: a new answer each time
    if answered is None:
        return  # no answer yet (the poller has not asked about this job)
    if job_id in progress.counted and progress.counted[job_id] == answered:
        return  # the same answer again, between two rounds
    progress.counted[job_id] = answered
    streak = progress.unknown_streak.get(job_id, 0) + 1
    progress.unknown_streak[job_id] = streak
    if streak >= plan.unknown_limit:
        raise JobNotFoundError(
            f"{plan.scheduler_name} job {job_id} could not be observed {streak} times in a row "
            f"({status.reason or 'not in queue, history or job folder'}); check the id, "
            "or the scheduler's own history"
        )
