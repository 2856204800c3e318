"""SchedulerAdapter: every adapter's public calls - those of ``SubmissionService``
(``service.py``: one scheduler seen from here) and those built on more than it:
``submit_many`` (one submission, or a sweep fed through a cap) and the waits, whose
keywords become one ``WaitPlan`` here, passed down whole (``SubmissionService.wait_for``).

- ``submit_job`` / ``submit_many`` validate everything before anything is staged,
  and record every job that went in before returning or raising.
- ``get_job_status(es)``: one scheduler round for all unfinished jobs, at the polite
  rate shared here (``polling``), never waiting for it: under the floor, the freshest
  state known (``JobStatus.as_of``: since when); a state never goes backwards; a job
  the scheduler forgot is read from its exit-code file, else UNKNOWN.
- ``wait*`` return the final state; only a streak of UNKNOWN (``JobNotFoundError``)
  or the caller's ``timeout`` (``JobTimeoutError``) raise.
- ``cancel_job(s)`` records the request (a SIGTERM "failure" is then CANCELLED).
- ``future(s)``, ``on_change`` (and the asyncio forms, ``wait_async``, ``wait_all_async``,
  ``changes``): however many, one thread per adapter follows their jobs
  (``futures.Follower``) through the same wait as ``wait_all``: the shared poll and
  the site's floor hold, the scheduler is asked as by one waiter.  A future is running
  from the start: ``cancel()`` is False and cancels nothing - ``cancel_job`` cancels the
  job, and its future then resolves to the CANCELLED status.  ``close()`` ends the
  following: what is still followed fails with ``SchedulerAdapterError``.

A concrete adapter supplies ``_open_session`` (its driver: the session ``open()`` returns,
typed by the class parameter), ``normalize_job_id``, ``output_template``/
``output_placeholder`` and its own keywords (``own_keywords``, read by ``job_options``).
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
)

from ..model import JobStatus
from .service import S, SubmissionService
from .wait_plan import ProgressCallback, StatusCallback, WaitPlan

if TYPE_CHECKING:
    from .futures import Follower, JobFuture, Subscription
    from .parents import DependsOn
    from .submitting import JobInput
    from .sweeping import Announce


class SchedulerAdapter(SubmissionService[S]):
    """The scheduler-neutral interface; see the module docstring for the contract."""

    #: the one thread that follows futures and subscriptions (made by the first)
    _follower: Optional[Follower] = None

    def submit_many(
        self,
        jobs: Sequence[JobInput],
        resources: Optional[Mapping[str, Any]] = None,
        depends_on: DependsOn = None,
        remote_dir: Optional[str] = None,
        *,
        max_queued: Optional[int] = None,
        sweep: Optional[str] = None,
        on_sweep: Optional[Announce] = None,
        **options: Any,
    ) -> List[str]:
        """One id per input, in order (``PartialSubmissionError`` when only some went in).
        With ``max_queued``, a ``sweep`` name, or past the scheduler's cap, fed as a sweep
        (one made for a cap is told to ``on_sweep(name, why)``, else logged as a warning)."""
        from . import submitting, sweeping

        repo = self.settings.remote_repo
        tasks = lambda: [submitting.coerce_task(item, repo) for item in jobs]  # noqa: E731
        order = self.order(tasks, resources, depends_on, remote_dir, options)
        if not order.tasks:
            return []
        return sweeping.send_or_feed(self, order, options, max_queued, sweep, on_sweep)

    def wait_until_complete(self, job_id: Any, *args: Any, **kwargs: Any) -> str:
        """Wait (``wait``'s arguments) until the job ends, whatever its end; its log path."""
        self.wait(job_id, *args, **kwargs)
        return self.log_path(job_id)

    def wait(
        self,
        job_id: Any,
        poll_interval: Optional[float] = None,
        timeout: Optional[float] = None,
        on_change: Optional[StatusCallback] = None,
    ) -> JobStatus:
        """Wait until the job ends; return its final status (``wait_all`` of one)."""
        job_id = self.normalize_job_id(job_id)
        return self.wait_all([job_id], poll_interval, timeout, on_change)[job_id]

    def wait_all(
        self,
        job_ids: Iterable[Any],
        poll_interval: Optional[float] = None,
        timeout: Optional[float] = None,
        on_change: Optional[StatusCallback] = None,
        notice_interval: float = 1.0,
        on_poll: Optional[ProgressCallback] = None,
    ) -> Dict[str, JobStatus]:
        """Wait until every job ends: the scheduler asked at most once per ``poll_interval``
        (never under ``poll_floor``), the exit-code files every ``notice_interval``;
        ``on_poll`` gets every job's latest status after each tick."""
        plan = WaitPlan(poll_interval, timeout, notice_interval, on_change, on_poll)
        return self.wait_for(job_ids, plan)

    def future(self, job_id: Any) -> JobFuture:
        """A ``concurrent.futures.Future`` of the job's final ``JobStatus`` (or of the error
        ``wait`` would raise); ``future.job_id`` says whose.  For ``as_completed``,
        ``concurrent.futures.wait`` and ``asyncio.wrap_future``.  ``cancel()`` cancels
        nothing (the future is running): ``cancel_job`` does, then it resolves CANCELLED."""
        return self.futures([job_id])[0]

    def futures(self, job_ids: Iterable[Any]) -> List[JobFuture]:
        """A ``future`` per id, in order; one follower asks for all of them at once."""
        from .futures import FutureSubscriber, JobFuture

        made = [JobFuture(self.normalize_job_id(job_id)) for job_id in job_ids]
        if made:
            self._following_thread().add([FutureSubscriber(future) for future in made])
        return made

    def on_change(self, job_ids: Iterable[Any], callback: StatusCallback) -> Subscription:
        """Returns at once; ``callback(status)`` is then called for each state change of
        these jobs (the first state seen, the end), once and in order per job, from the
        follower's one thread - never two calls at once.  The handle's ``stop()`` ends
        it, ``wait(timeout)`` waits until every job ended, ``errors`` says what a job's
        wait raised (its calls end there)."""
        from .futures import Subscription

        ids = [self.normalize_job_id(job_id) for job_id in job_ids]
        follower = self._following_thread()
        subscription = Subscription(ids, callback, follower.remove)
        follower.add([subscription])
        return subscription

    async def wait_async(self, job_id: Any) -> JobStatus:
        """``wait`` in an event loop: the loop never blocks (``asyncio.wait_for`` for a
        deadline); cancelling the await stops following the job, not the job."""
        from . import awaiting

        return await awaiting.wait_one(self._following_thread(), self.future(job_id))

    async def wait_all_async(self, job_ids: Iterable[Any]) -> Dict[str, JobStatus]:
        """``wait_all`` in an event loop: every job's final status, by id, in order."""
        from . import awaiting

        return await awaiting.wait_many(self._following_thread(), self.futures(job_ids))

    def changes(self, job_ids: Iterable[Any]) -> AsyncIterator[JobStatus]:
        """``async for status in adapter.changes(ids)``: each state change of these jobs,
        once and in order per job (those ``--wait`` prints); the iteration ends when every
        job has ended, or raises the error a blocking wait would."""
        from . import awaiting

        ids = [self.normalize_job_id(job_id) for job_id in job_ids]
        return awaiting.changes(self._following_thread(), ids)

    async def submit_async(self, script_path: Any, *args: Any, **kwargs: Any) -> str:
        """``submit_job`` (same arguments) run off the event loop (its default executor)."""
        from . import awaiting

        return await awaiting.off_loop(self.submit_job, script_path, *args, **kwargs)

    async def submit_many_async(self, jobs: Sequence[JobInput], *args: Any, **kw: Any) -> List[str]:
        """``submit_many`` (same arguments) run off the event loop (its default executor)."""
        from . import awaiting

        return await awaiting.off_loop(self.submit_many, jobs, *args, **kw)

    def _following_thread(self) -> Follower:
        from .futures import Follower

        with self._session_lock:
            if self._follower is None:
                self._follower = Follower(self.wait_for, self.scheduler_name)
            return self._follower

    def close(self) -> None:
        if self._follower is not None:
            self._follower.close()
        super().close()

    def __enter__(self) -> SchedulerAdapter:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(executor={self.executor!r}, remote_workdir={self.remote_workdir!r})"


__all__ = ["SchedulerAdapter"]
