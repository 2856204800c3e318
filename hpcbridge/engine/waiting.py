"""The one bounded wait loop: ticks, quick notice of ends, UNKNOWN streaks, outages.

Every ``notice_interval`` a full tick takes the exit-code files, then the status round
(the poller keeps its rate), spaced out for many jobs (``FULL_TICK_RATE``).  A waiter
that hears ends wakes the loop with their ids; while it hears every end, no file is
read and full ticks are a safety net (``HEARING_TICK_RATE``, ``HEARING_GAP``).
A round that raises ``OUTAGE_ERRORS``, or an answer ``Reach.OUT_FOR_NOW``, is an
outage, ridden out until the deadline (``TransportError.permanent`` is raised at
once); only new UNKNOWN answers count towards the streak.
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
from ..store.jobs import JobStore
from .driver import SchedulerDriver, Waiter
from .observation import Observation, Reach, Source
from .polling import PollBoard, Poller
from .tracking import JobTracker, ask

log = logging.getLogger("hpcbridge")

StatusCallback = Callable[[JobStatus], None]
ProgressCallback = Callable[[Dict[str, JobStatus]], None]
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
    #: return the final statuses of the first ``enough`` to end (``None``: wait for all)
    enough: Optional[int] = None
    #: whether an exit-code file may tell an end first (not for a sweep's feeder)
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
    #: when the last UNKNOWN answer counted was given, per job (``None``: not stamped)
    counted: Dict[str, Optional[float]] = field(default_factory=dict)


def wait_for_all(
    job_ids: List[str],
    status_round: StatusRound,
    file_round: StatusRound,
    make_waiter: Callable[[List[str]], Optional[Waiter]],
    plan: WaitPlan,
    heard_round: Optional[StatusRound] = None,
) -> Dict[str, JobStatus]:
    """Every job's final status; ``heard_round`` answers for the jobs a waiter heard
    end (else ``status_round``).  ``unknown_limit`` new UNKNOWN answers in a row raise
    ``JobNotFoundError``; past ``timeout``, ``JobTimeoutError``."""
    deadline = Deadline(plan.timeout)
    progress = _Progress(pending=dict.fromkeys(job_ids))
    outage = Outage(plan.scheduler_name, deadline)
    heard: Set[str] = set()
    next_full = 0.0
    # Before the first round: a driver's event stream may answer it (Flux's journal).
    waiter: Waiter = _made_waiter(make_waiter, list(progress.pending), outage)

    def take(round_: StatusRound, ids: List[str]) -> bool:
        return _guarded(progress, outage, round_, ids, plan, waiter)

    try:
        while True:
            took = True
            full = not heard or time.monotonic() >= next_full
            if heard:
                ended = [job_id for job_id in heard if job_id in progress.pending]
                if ended:
                    took = take(heard_round or status_round, ended)
            if took and full and progress.pending:
                hearing = waiter.listening()
                next_full = time.monotonic() + _full_gap(plan, len(progress.pending), hearing)
                if plan.files and not hearing:
                    # The files first: a job that ended is not asked about.
                    took = take(file_round, list(progress.pending))
                if took and progress.pending:
                    took = take(status_round, list(progress.pending))
            if took:
                outage.passed()
            else:
                next_full = time.monotonic() + outage.pause
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
                    + outage.said()
                )
            pause = deadline.cap(max(next_full - time.monotonic(), 0.0))
            try:
                heard = waiter.pause(pause)
            except OUTAGE_ERRORS as exc:
                # The events failed: the rest of the wait ticks without them.
                outage.failed(exc)
                _close_quietly(waiter)
                waiter = Sleeper()
                heard = waiter.pause(deadline.cap(max(next_full - time.monotonic(), 0.0)))
    finally:
        waiter.close()


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


def _guarded(
    progress: _Progress,
    outage: Outage,
    round_: StatusRound,
    job_ids: List[str],
    plan: WaitPlan,
    waiter: Waiter,
) -> bool:
    """Take one round; False when it could not be taken (an outage: noted)."""
    try:
        observed = round_(job_ids)
    except OUTAGE_ERRORS as exc:
        outage.failed(exc)
        return False
    _take(progress, observed, plan, waiter, outage)
    return True


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
    gap = max(plan.notice_interval, pending / FULL_TICK_RATE)
    if hearing:
        gap = max(gap, min(pending / HEARING_TICK_RATE, HEARING_GAP))
    return gap


def _take(
    progress: _Progress,
    observed: Dict[str, Observation],
    plan: WaitPlan,
    waiter: Waiter,
    outage: Outage,
) -> None:
    """Note what changed, call ``on_change``, tell the waiter the jobs that ended."""
    progress.latest.update((job_id, seen.status) for job_id, seen in observed.items())
    ended: List[str] = []
    for job_id in [job_id for job_id in observed if job_id in progress.pending]:
        seen = observed[job_id]
        status = seen.status
        if status.state is JobState.UNKNOWN:
            if seen.reach is Reach.OUT_FOR_NOW:
                outage.unreachable(seen)  # ridden out, not counted
            else:
                _count_unknown(progress, job_id, seen, plan)
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
    waiter.settled(ended)


def _count_unknown(progress: _Progress, job_id: str, seen: Observation, plan: WaitPlan) -> None:
    if seen.source is Source.KNOWN:
        return  # no answer yet (the poller has not asked about this job)
    answered = seen.answered_at  # None: not stamped, a new answer each time
    if answered is not None and progress.counted.get(job_id) == answered:
        return  # the same answer again, between two rounds
    progress.counted[job_id] = answered
    streak = progress.unknown_streak.get(job_id, 0) + 1
    progress.unknown_streak[job_id] = streak
    if streak >= plan.unknown_limit:
        reason = seen.status.reason or "not in queue, history or job folder"
        raise JobNotFoundError(
            f"{plan.scheduler_name} job {job_id} could not be observed {streak} times in a row "
            f"({reason}); check the id, or the scheduler's own history"
        )


class Following:
    """The status, wait, log and cancel paths of one adapter's jobs."""

    def __init__(
        self,
        driver: SchedulerDriver,
        tracker: JobTracker,
        store: JobStore,
        *,
        poll_interval: float,
        poll_floor: float,
        poll_target: str,
        unknown_limit: int,
    ) -> None:
        self.driver = driver
        self.tracker = tracker
        self.store = store
        self.scheduler_name = tracker.scheduler_name
        self.unknown_limit = unknown_limit
        # A driver woken by job events asks its own broker, cheaply: no shared poll.
        board = None if driver.capabilities.events else PollBoard(store)
        interval = 0.0 if driver.capabilities.events else poll_interval
        floor = 0.0 if driver.capabilities.events else poll_floor
        self.poller = Poller(self._ask, interval, board=board, target=poll_target, floor=floor)

    def statuses(self, ids: List[str]) -> Dict[str, Observation]:
        """Every id's status, a file's end confirmed: asked now where the floor allows,
        else the freshest known (``JobStatus.as_of``: since when) - only a wait waits."""
        return self.tracker.refresh(ids, self._ask_once, confirm=True)

    def _ask_once(self, job_ids: List[str]) -> Dict[str, Observation]:
        """One status question, never under the floor: an id left out keeps what is known
        (a job just submitted: its record, PENDING since its submission)."""
        found = self.poller.ask(job_ids, one_off=True)
        left = [job_id for job_id in job_ids if job_id not in found]
        if left:  # not asked now: an end its exit-code file tells is fresher than the record
            found.update(self.tracker.ended_by_files(left))
        # Nothing known (no record here, never answered): no state to answer with.
        unknown = [job_id for job_id in left if job_id not in found]
        unknown = [job_id for job_id in unknown if not self.tracker.knows(job_id)]
        if unknown:
            found.update(self.poller.next_answers(unknown))
        return found

    def _ask(self, job_ids: List[str]) -> Dict[str, Observation]:
        """The driver's answer for every id; an unreachable scheduler is UNKNOWN for all."""
        return ask(lambda: self.driver, self.scheduler_name, job_ids)

    def wait_all(
        self,
        ids: List[str],
        poll_interval: Optional[float],
        timeout: Optional[float],
        on_change: Optional[StatusCallback],
        on_poll: Optional[ProgressCallback],
        notice_interval: float,
        enough: Optional[int] = None,
        files: bool = True,
    ) -> Dict[str, JobStatus]:
        """Every job's final status (``waiting.wait_for_all``; ``enough``, ``files``: as
        ``WaitPlan``'s)."""
        if poll_interval is not None:
            notice_interval = min(notice_interval, poll_interval)
        plan = WaitPlan(
            self.scheduler_name,
            timeout=timeout,
            unknown_limit=self.unknown_limit,
            notice_interval=notice_interval,
            on_change=on_change,
            on_poll=on_poll,
            enough=enough,
            files=files,
        )

        def status_round(pending: List[str]) -> Dict[str, Observation]:
            return self.tracker.refresh(
                pending, lambda asked: self.poller.ask(asked, interval=poll_interval)
            )

        def file_round(pending: List[str]) -> Dict[str, Observation]:
            return self.tracker.ended_by_files(pending)

        def heard_round(ended: List[str]) -> Dict[str, Observation]:
            return self.tracker.refresh(ended, self._ask)

        try:
            return wait_for_all(
                ids, status_round, file_round, self.driver.waiter, plan, heard_round
            )
        finally:
            if enough is None:
                self.poller.release()  # the next process waiting here takes the poll at once

    def log_path(self, job_id: str) -> str:
        record = self.store.get(job_id, self.scheduler_name, self.tracker.host_label)
        if record is not None and record.log_path:
            return record.log_path
        found = self.driver.find_output(job_id)
        if found is None:
            raise JobNotFoundError(
                f"no record of {self.scheduler_name} job {job_id} and the scheduler does not "
                "know where it writes (check the id and the scheduler: hpcbridge jobs)"
            )
        return found

    def cancel(self, ids: List[str]) -> None:
        self.store.mark_cancel_requested(self.scheduler_name, self.tracker.host_label, ids)
        self.driver.cancel(ids)
        # What the poll holds of these jobs predates the cancel: a wait asks afresh.
        self.poller.forget(ids)
        log.info("cancel requested for %s job(s) %s", self.scheduler_name, ", ".join(ids))
