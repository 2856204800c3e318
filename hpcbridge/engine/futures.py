"""Futures and subscriptions over one follower per adapter (issue 51).

However many futures, streams and callbacks follow an adapter's jobs, one thread (the
``Follower``'s, started by the first subscription, gone when none is left) waits on
all of them through the adapter's own wait (``SubmissionService.wait_for``: the shared
poll, the site's floor, the exit-code files, a driver's events); it tells each
``Subscriber`` every state change of its jobs, once and in order, and how each ended.
A subscription made while it waits wakes it (within ``waiting.WAKE_SLICE``, no round
asked for it): the jobs the wait already follows are told their latest state first; new
jobs make it wait again on the whole set (the poller keeps its rate across: no round
comes sooner for it).  ``close`` wakes it the same way.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

from ..errors import JobNotFoundError, SchedulerAdapterError
from ..model import JobStatus
from .wait_plan import WaitPlan
from .waiting import HEARING_GAP

log = logging.getLogger("hpcbridge")

#: the adapter's wait: every job's final status, waited for as the plan says
WaitFor = Callable[[List[str], WaitPlan], Dict[str, JobStatus]]
#: seconds ``close`` waits for the follower to notice, at its next tick (the longest gap
#: between two, while a driver's events hear every end, and a little more)
CLOSE_WAIT = HEARING_GAP + 5.0


class JobFuture(Future[JobStatus]):
    """A ``concurrent.futures.Future`` of one job's final ``JobStatus``.

    Running from the start, as a future handed to a worker is: ``cancel()`` returns False
    and cancels nothing (cancel the job with ``adapter.cancel_job(future.job_id)``; the
    future then resolves to its CANCELLED status)."""

    def __init__(self, job_id: str) -> None:
        super().__init__()
        self.job_id = job_id
        self.set_running_or_notify_cancel()


class Subscriber:
    """One subscription's jobs; told on the follower's thread, never two calls at once."""

    def __init__(self, job_ids: Iterable[str]) -> None:
        self.job_ids = list(dict.fromkeys(job_ids))
        #: the jobs not ended yet
        self.left: Set[str] = set(self.job_ids)
        self.stopped = False

    def deliver(self, status: JobStatus) -> None:
        if status.job_id not in self.left or self.stopped:
            return
        self.changed(status)
        if status.is_terminal:
            self._settle(status.job_id)

    def fail(self, job_id: str, error: BaseException) -> None:
        if job_id not in self.left or self.stopped:
            return
        self.failed(job_id, error)
        self._settle(job_id)

    def _settle(self, job_id: str) -> None:
        self.left.discard(job_id)
        if not self.left:
            self.finished()

    def changed(self, status: JobStatus) -> None:
        """A new state of one of its jobs (the end too)."""

    def failed(self, job_id: str, error: BaseException) -> None:
        """The wait for this job raised ``error`` (what a blocking wait would raise)."""

    def finished(self) -> None:
        """Every job ended (or failed)."""


class FutureSubscriber(Subscriber):
    """Resolves one ``JobFuture``."""

    def __init__(self, future: JobFuture) -> None:
        super().__init__([future.job_id])
        self.future = future

    def changed(self, status: JobStatus) -> None:
        if status.is_terminal:
            self.future.set_result(status)

    def failed(self, job_id: str, error: BaseException) -> None:
        self.future.set_exception(error)


class Subscription(Subscriber):
    """``adapter.on_change``'s handle: ``callback(status)`` for each change of its jobs,
    from the follower's thread; ``stop()`` ends it, ``wait()`` until every job ended;
    ``errors``: what the wait for a job raised (the job's callbacks end there)."""

    def __init__(
        self,
        job_ids: Iterable[str],
        callback: Callable[[JobStatus], None],
        remove: Callable[[Subscriber], None],
    ) -> None:
        super().__init__(job_ids)
        self.callback = callback
        self.errors: Dict[str, BaseException] = {}
        self._done = threading.Event()
        #: the follower's ``remove``: no more calls
        self._remove = remove

    def changed(self, status: JobStatus) -> None:
        try:
            self.callback(status)
        except Exception:  # noqa: BLE001 - a callback's fault must not stop the others
            log.exception("an on_change callback raised for job %s", status.job_id)

    def failed(self, job_id: str, error: BaseException) -> None:
        self.errors[job_id] = error
        log.warning("following job %s ended with an error: %s", job_id, error)

    def finished(self) -> None:
        self._done.set()

    @property
    def done(self) -> bool:
        """Every job ended (or failed), or ``stop()`` was called."""
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until ``done`` (or ``timeout`` seconds); whether it is."""
        return self._done.wait(timeout)

    def stop(self) -> None:
        """No more calls after this returns, except one already under way."""
        self._remove(self)
        self._done.set()


class _Regroup(Exception):
    """The set of jobs to follow changed (or the adapter closes): wait again."""


class Follower:
    """The one thread that waits on every subscribed job of one adapter."""

    def __init__(self, wait_for: WaitFor, scheduler_name: str) -> None:
        self._wait_for = wait_for
        self.scheduler_name = scheduler_name
        self._lock = threading.Lock()
        #: the subscribers of each followed job
        self._subs: Dict[str, List[Subscriber]] = {}
        #: subscribers not yet attached (the follower's thread attaches them)
        self._joining: List[Subscriber] = []
        #: the last state told of each followed job
        self._latest: Dict[str, JobStatus] = {}
        #: the jobs the current wait follows
        self._group: Set[str] = set()
        #: a job the wait follows lost its last subscriber
        self._stale = False
        self._closed = False
        self._thread: Optional[threading.Thread] = None
        #: set by a new subscriber or ``close``: the wait's pause ends, ``_check`` runs
        self._wake = threading.Event()

    def add(self, subscribers: List[Subscriber]) -> None:
        with self._lock:
            if self._closed:
                raise SchedulerAdapterError(
                    f"this {self.scheduler_name} adapter is closed: follow its jobs with a new one"
                )
            self._joining.extend(subscribers)
            self._wake.set()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"hpcbridge-follower-{self.scheduler_name}", daemon=True
                )
                self._thread.start()

    def remove(self, subscriber: Subscriber) -> None:
        with self._lock:
            subscriber.stopped = True
            if subscriber in self._joining:
                self._joining.remove(subscriber)
            for job_id in subscriber.job_ids:
                subs = self._subs.get(job_id)
                if subs and subscriber in subs:
                    subs.remove(subscriber)
                    if not subs:
                        del self._subs[job_id]
                        self._latest.pop(job_id, None)
                        self._stale = True

    def drop(self, future: JobFuture) -> None:
        """Stop following for a future nobody awaits any more (it stays pending)."""
        with self._lock:
            subs = [*self._subs.get(future.job_id, ()), *self._joining]
            found = [s for s in subs if isinstance(s, FutureSubscriber) and s.future is future]
        for subscriber in found:
            self.remove(subscriber)

    @property
    def running(self) -> bool:
        with self._lock:
            return self._thread is not None

    def close(self) -> None:
        """Stop following: what is still followed fails with ``SchedulerAdapterError``."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(CLOSE_WAIT)

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed or not (self._subs or self._joining):
                    self._thread = None
                    left = self._take_all()
                    break
            self._attach()
            with self._lock:
                ids = list(self._subs)
                self._group, self._stale = set(ids), False
            if ids:
                self._wait(ids)
        for job_id, subscriber in left:
            subscriber.fail(job_id, self._closed_error(job_id))

    def _wait(self, ids: List[str]) -> None:
        plan = WaitPlan(on_change=self._changed, on_poll=self._check, wake=self._wake)
        try:
            finals = self._wait_for(ids, plan)
        except _Regroup:
            return
        except JobNotFoundError as exc:
            self._fail([exc.job_id] if exc.job_id in ids else ids, exc)
            return
        except Exception as exc:  # noqa: BLE001 - every waiter of these jobs is told
            self._fail(ids, exc)
            return
        for status in finals.values():
            self._changed(status)

    def _attach(self) -> List[str]:
        """Attach the subscribers who joined, telling each its jobs' latest state; the
        jobs the current wait does not follow."""
        replay = []
        new: List[str] = []
        with self._lock:
            self._wake.clear()
            joining, self._joining = self._joining, []
            for subscriber in joining:
                for job_id in subscriber.job_ids:
                    self._subs.setdefault(job_id, []).append(subscriber)
                    if job_id in self._latest:
                        replay.append((subscriber, self._latest[job_id]))
                    elif job_id not in self._group:
                        new.append(job_id)
        for subscriber, status in replay:
            subscriber.deliver(status)
        return new

    def _check(self, latest: Dict[str, JobStatus]) -> None:
        """After each tick of the wait: wait again when the jobs to follow changed."""
        new = self._attach()
        with self._lock:
            if new or self._stale or self._closed:
                raise _Regroup()

    def _changed(self, status: JobStatus) -> None:
        """A job's state as the wait saw it change: told to its subscribers, once."""
        job_id = status.job_id
        with self._lock:
            known = self._latest.get(job_id)
            if known is not None and known.state is status.state:
                return
            subs = list(self._subs.get(job_id, ()))
            if status.is_terminal:
                self._subs.pop(job_id, None)
                self._latest.pop(job_id, None)
                self._group.discard(job_id)  # a later subscriber's wait asks again
            else:
                self._latest[job_id] = status
        for subscriber in subs:
            subscriber.deliver(status)

    def _fail(self, ids: List[str], error: BaseException) -> None:
        with self._lock:
            told = [(job_id, sub) for job_id in ids for sub in self._subs.pop(job_id, ())]
            for job_id in ids:
                self._latest.pop(job_id, None)
                self._group.discard(job_id)
        for job_id, subscriber in told:
            subscriber.fail(job_id, self._closed_error(job_id) if self._closed else error)

    def _take_all(self) -> List[Tuple[str, Subscriber]]:
        """Every subscriber's unfinished jobs, forgotten (called under the lock)."""
        left = [(job_id, sub) for job_id, subs in self._subs.items() for sub in subs]
        left += [(job_id, sub) for sub in self._joining for job_id in sub.job_ids]
        self._subs, self._joining, self._latest = {}, [], {}
        return left

    def _closed_error(self, job_id: str) -> SchedulerAdapterError:
        return SchedulerAdapterError(
            f"the {self.scheduler_name} adapter was closed before job {job_id} ended "
            "(it goes on): wait for it with a new adapter"
        )
