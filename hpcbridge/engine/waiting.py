"""The one bounded wait loop: ticks, quick notice of ends, UNKNOWN streaks, outages.

Every ``WaitPlan.tick`` a full tick takes the exit-code files, then the status round
(the poller keeps its rate), spaced out for many jobs (``FULL_TICK_RATE``).  A waiter
that hears ends wakes the loop with their ids; while it hears every end, no file is
read and full ticks are a safety net (``HEARING_TICK_RATE``, ``HEARING_GAP``).
A round that raises ``OUTAGE_ERRORS``, or an answer ``Reach.OUT_FOR_NOW``, is an
outage, ridden out until the deadline (``TransportError.permanent`` is raised at
once); only new UNKNOWN answers count towards the streak.  What is asked comes from
the adapter (``Rounds``), how to wait from the caller (``WaitPlan``).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Collection, Dict, List, Optional, Set

from ..errors import JobNotFoundError, JobTimeoutError, SchedulerUnavailableError, TransportError
from ..model import JobState, JobStatus
from ..retrying import Deadline
from .driver import Waiter
from .observation import Observation, Reach, Source
from .wait_plan import WaitPlan

log = logging.getLogger("hpcbridge")

StatusRound = Callable[[List[str]], Dict[str, Observation]]

#: the most jobs a second the full ticks look at (3,000 unfinished: a full tick every 1.5 s)
FULL_TICK_RATE = 2000.0
#: the same while the waiter hears every end (1,000 unfinished: a full tick every 10 s)
HEARING_TICK_RATE = 100.0
#: the longest gap between two full ticks while the waiter hears every end
HEARING_GAP = 30.0
#: the pause before a round is tried again after an outage began (seconds) ...
OUTAGE_FIRST_PAUSE = 1.0
#: ... doubled at each failed try up to this: the longest pause between two tries
OUTAGE_MAX_PAUSE = 30.0
#: the longest slice of a pause that ``WaitPlan.wake`` can end (a driver's event stream
#: cannot be woken from another thread: it is listened to a slice at a time)
WAKE_SLICE = 1.0
#: what a round raises when the scheduler, or the way to it, is out of reach for now
OUTAGE_ERRORS = (TransportError, JobTimeoutError, SchedulerUnavailableError)


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


@dataclass(frozen=True)
class Rounds:
    """The adapter's side of a wait: what is asked, and of which scheduler."""

    scheduler_name: str
    #: the scheduler's answers (through the shared poll), merged with what is known
    status: StatusRound
    #: the ends the exit-code files tell
    files: StatusRound
    #: the driver's waiter for these jobs (``None``: it has none)
    waiter: Callable[[List[str]], Optional[Waiter]]
    #: answers for the jobs a waiter heard end (``None``: the status round)
    heard: Optional[StatusRound] = None
    #: new UNKNOWN answers in a row that make a job not found
    unknown_limit: int = 6


@dataclass
class _Progress:
    """What the loop has seen so far."""

    #: the unfinished jobs, in the order given (a dict: each end removed in O(1))
    pending: Dict[str, None]
    final: Dict[str, JobStatus] = field(default_factory=dict)
    latest: Dict[str, JobStatus] = field(default_factory=dict)
    last_seen: Dict[str, JobState] = field(default_factory=dict)
    unknown_streak: Dict[str, int] = field(default_factory=dict)
    #: when the last UNKNOWN answer counted was given, per job (``None``: not stamped)
    counted: Dict[str, Optional[float]] = field(default_factory=dict)


def wait_for_all(job_ids: List[str], rounds: Rounds, plan: WaitPlan) -> Dict[str, JobStatus]:
    """Every job's final status (the first ``plan.enough`` to end: theirs).
    ``rounds.unknown_limit`` new UNKNOWN answers in a row raise ``JobNotFoundError``;
    past ``plan.timeout``, ``JobTimeoutError``."""
    deadline = Deadline(plan.timeout)
    progress = _Progress(pending=dict.fromkeys(job_ids))
    loop = _Loop(rounds, plan, progress, Outage(rounds.scheduler_name, deadline))
    try:
        while True:
            loop.tick()
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
                    + loop.outage.said()
                )
            loop.pause(deadline)
    finally:
        loop.waiter.close()


class _Loop:
    """One wait's ticks: which rounds are due, what they tell, the pause to the next."""

    def __init__(self, rounds: Rounds, plan: WaitPlan, progress: _Progress, outage: Outage):
        self.rounds, self.plan, self.progress, self.outage = rounds, plan, progress, outage
        #: the jobs the waiter heard end during the last pause
        self.heard: Set[str] = set()
        #: the last pause was ended by ``plan.wake``
        self.woken = False
        self.next_full = 0.0
        # Before the first round: a driver's event stream may answer it (Flux's journal).
        self.waiter: Waiter = _made_waiter(rounds.waiter, list(progress.pending), outage)

    def tick(self) -> None:
        """The jobs heard ending asked alone; when due, the files, then the status round."""
        pending = self.progress.pending
        took = True
        if self.woken and not self.heard and time.monotonic() < self.next_full:
            return  # woken for ``on_poll`` alone: no round is due
        full = not self.heard or time.monotonic() >= self.next_full
        ended = [job_id for job_id in self.heard if job_id in pending]
        if ended:
            took = self.take(self.rounds.heard or self.rounds.status, ended)
        if took and full and pending:
            hearing = self.waiter.listening()
            self.next_full = time.monotonic() + _full_gap(self.plan, len(pending), hearing)
            if self.plan.files and not hearing:
                # The files first: a job that ended is not asked about.
                took = self.take(self.rounds.files, list(pending))
            if took and pending:
                took = self.take(self.rounds.status, list(pending))
        if took:
            self.outage.passed()
        else:
            self.next_full = time.monotonic() + self.outage.pause

    def pause(self, deadline: Deadline) -> None:
        """Until the next full tick (or the deadline), unless the waiter hears an end."""
        try:
            self.heard = self._listen(deadline)
        except OUTAGE_ERRORS as exc:
            # The events failed: the rest of the wait ticks without them.
            self.outage.failed(exc)
            _close_quietly(self.waiter)
            self.waiter = Sleeper()
            self.heard = self.waiter.pause(self._until_next(deadline))

    def _listen(self, deadline: Deadline) -> Set[str]:
        """The waiter's pause, a ``WAKE_SLICE`` at a time when the plan can be woken."""
        wake = self.plan.wake
        if wake is None:
            return self.waiter.pause(self._until_next(deadline))
        while True:
            left = self._until_next(deadline)
            heard = self.waiter.pause(min(left, WAKE_SLICE))
            self.woken = wake.is_set()
            if heard or self.woken or left <= WAKE_SLICE:
                return heard

    def _until_next(self, deadline: Deadline) -> float:
        return deadline.cap(max(self.next_full - time.monotonic(), 0.0))

    def take(self, round_: StatusRound, job_ids: List[str]) -> bool:
        """Take one round; False when it could not be taken (an outage: noted)."""
        try:
            observed = round_(job_ids)
        except OUTAGE_ERRORS as exc:
            self.outage.failed(exc)
            return False
        self.waiter.settled(_take(self.progress, observed, self.rounds, self.plan, self.outage))
        return True


class Outage:
    """The outage a wait rides out: a warning when it begins and when it is over, and
    the pause before the next try.  Rounds that raise (``failed`` until ``passed``) or
    answers that the scheduler cannot be asked now (``unreachable`` until ``answered``)."""

    def __init__(self, scheduler_name: str, deadline: Deadline) -> None:
        self.scheduler_name = scheduler_name
        self.deadline = deadline
        #: when the outage began (monotonic), ``None`` while there is none
        self.began: Optional[float] = None
        #: "transport" (rounds raise) or "scheduler" (it answers that it cannot be asked)
        self.kind = ""
        self.cause = ""
        #: seconds before the next try after a failed round
        self.pause = 0.0
        #: when the last "cannot be asked" answer was given: a later answer ends it
        self._unreachable_at: Optional[float] = None

    def failed(self, exc: BaseException) -> None:
        """A round raised ``exc``: an outage (raised again when retrying cannot fix it)."""
        if getattr(exc, "permanent", False):
            raise exc
        self.pause = min(max(2 * self.pause, OUTAGE_FIRST_PAUSE), OUTAGE_MAX_PAUSE)
        self._begin("transport", f"{type(exc).__name__}: {exc}")

    def unreachable(self, seen: Observation) -> None:
        """The scheduler answered that it cannot be asked right now."""
        self._unreachable_at = seen.answered_at
        reason = seen.status.reason or "the scheduler cannot be asked right now"
        self._begin("scheduler", reason)

    def answered(self, seen: Observation) -> None:
        """A scheduler's answer: after a "cannot be asked" one, the outage is over."""
        at, last = seen.answered_at, self._unreachable_at
        if self.kind != "scheduler" or at is None:
            return  # no round's stamp: what was known, a file, a direct question
        if last is None or at > last:
            self._over()

    def passed(self) -> None:
        """Every round of a tick went through: the way to the scheduler works again."""
        self.pause = 0.0
        if self.kind == "transport":
            self._over()

    def said(self) -> str:
        """For the timeout's message: how long the scheduler was out of reach, and why."""
        if self.began is None:
            return ""
        return (
            f"; {self.scheduler_name} could not be reached for the last "
            f"{time.monotonic() - self.began:.0f} s ({self.cause}): check the login node "
            "and the scheduler"
        )

    def _begin(self, kind: str, cause: str) -> None:
        self.cause = cause.splitlines()[0][:300] if cause else kind
        if self.began is None:
            self.began = time.monotonic()
            left = self.deadline.remaining()
            until = (
                "until it is back" if left == math.inf else f"until its deadline, {left:.0f} s away"
            )
            log.warning(
                "%s: out of reach (%s); the wait goes on, trying again %s",
                self.scheduler_name,
                self.cause,
                until,
            )
        self.kind = kind

    def _over(self) -> None:
        if self.began is not None:
            log.warning(
                "%s: reachable again after %.0f s; the wait goes on",
                self.scheduler_name,
                time.monotonic() - self.began,
            )
        self.began, self.kind, self.cause, self._unreachable_at = None, "", "", None


def _made_waiter(
    make_waiter: Callable[[List[str]], Optional[Waiter]], job_ids: List[str], outage: Outage
) -> Waiter:
    """The driver's waiter; a plain sleep when it has none, or cannot make one now."""
    try:
        return make_waiter(job_ids) or Sleeper()
    except OUTAGE_ERRORS as exc:
        outage.failed(exc)
        return Sleeper()


def _close_quietly(waiter: Waiter) -> None:
    try:
        waiter.close()
    except Exception as exc:  # noqa: BLE001 - a waiter whose link is down may not close
        log.debug("closing the waiter failed: %s", exc)


def _full_gap(plan: WaitPlan, pending: int, hearing: bool) -> float:
    """Seconds to the next full tick (more for many jobs, more while the waiter hears)."""
    gap = max(plan.tick, pending / FULL_TICK_RATE)
    if hearing:
        gap = max(gap, min(pending / HEARING_TICK_RATE, HEARING_GAP))
    return gap


def _take(
    progress: _Progress,
    observed: Dict[str, Observation],
    rounds: Rounds,
    plan: WaitPlan,
    outage: Outage,
) -> List[str]:
    """Note what changed, call ``on_change``; the jobs that ended."""
    progress.latest.update((job_id, seen.status) for job_id, seen in observed.items())
    ended: List[str] = []
    for job_id in [job_id for job_id in observed if job_id in progress.pending]:
        seen = observed[job_id]
        status = seen.status
        if status.state is JobState.UNKNOWN:
            if seen.reach is Reach.OUT_FOR_NOW:
                outage.unreachable(seen)  # ridden out, not counted
            else:
                _count_unknown(progress, job_id, seen, rounds)
            continue
        outage.answered(seen)
        progress.unknown_streak[job_id] = 0
        if progress.last_seen.get(job_id) is not status.state:
            progress.last_seen[job_id] = status.state
            if plan.on_change is not None:
                plan.on_change(status)
        if status.is_terminal:
            progress.final[job_id] = status
            del progress.pending[job_id]
            ended.append(job_id)
    return ended


def _count_unknown(progress: _Progress, job_id: str, seen: Observation, rounds: Rounds) -> None:
    if seen.source is Source.KNOWN:
        return  # no answer yet (the poller has not asked about this job)
    answered = seen.answered_at  # None: not stamped, a new answer each time
    if answered is not None and progress.counted.get(job_id) == answered:
        return  # the same answer again, between two rounds
    progress.counted[job_id] = answered
    streak = progress.unknown_streak.get(job_id, 0) + 1
    progress.unknown_streak[job_id] = streak
    if streak >= rounds.unknown_limit:
        reason = seen.status.reason or "not in queue, history or job folder"
        raise JobNotFoundError(
            f"{rounds.scheduler_name} job {job_id} could not be observed {streak} times in a row "
            f"({reason}); check the id, or the scheduler's own history",
            job_id=job_id,
        )
