"""SchedulerAdapter: the public calls of every adapter, over the engine's
``SubmissionService`` (``service.py``); each call's arguments are checked and shaped
here, at the edge - an ``Order`` to submit, a ``WaitPlan`` to wait - and passed down whole.

- ``submit_job`` / ``submit_many`` validate everything before anything is staged,
  and record every job that went in before returning or raising.
- ``get_job_status(es)``: one scheduler round for all unfinished jobs, at the polite
  rate shared here (``polling``), never waiting for it: under the floor, the freshest
  state known (``JobStatus.as_of``: since when); a state never goes backwards; a job
  the scheduler forgot is read from its exit-code file, else UNKNOWN.
- ``wait*`` return the final state; only a streak of UNKNOWN (``JobNotFoundError``)
  or the caller's ``timeout`` (``JobTimeoutError``) raise.
- ``cancel_job(s)`` records the request (a SIGTERM "failure" is then CANCELLED).

A concrete adapter supplies ``_open_session`` (its driver), ``normalize_job_id``,
``output_template``/``output_placeholder`` and its own keywords (``job_options``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from ..model import JobStatus
from .service import SubmissionService
from .wait_plan import ProgressCallback, StatusCallback, WaitPlan

if TYPE_CHECKING:
    from ..cost import Charge
    from .submitting import DependsOn, JobInput, Order
    from .sweeping import Announce


class SchedulerAdapter(SubmissionService):
    """The scheduler-neutral interface; see the module docstring for the contract."""

    def submit_job(
        self,
        script_path: Union[str, os.PathLike[str]],
        resources: Optional[Mapping[str, Any]] = None,
        remote_dir: Optional[str] = None,
        depends_on: DependsOn = None,
        arguments: Sequence[str] = (),
        environment: Optional[Mapping[str, str]] = None,
        **options: Any,
    ) -> str:
        """Stage ``script_path`` and submit it; the job id (``options``: ``job_options``)."""
        from . import submitting

        repo = self.settings.remote_repo
        task = lambda: [submitting.make_task(script_path, arguments, environment, repo)]  # noqa: E731
        order = self.order(task, resources, depends_on, remote_dir, options)
        return self.submission().run(order)[0]

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

    def describe_submission(
        self,
        script_path: Union[str, os.PathLike[str]],
        resources: Optional[Mapping[str, Any]] = None,
        remote_dir: Optional[str] = None,
        depends_on: DependsOn = None,
        **options: Any,
    ) -> str:
        """What ``submit_job`` would run, without staging or submitting anything."""
        return self.describe_many([script_path], resources, depends_on, remote_dir, **options)

    def describe_many(
        self,
        jobs: Sequence[JobInput],
        resources: Optional[Mapping[str, Any]] = None,
        depends_on: DependsOn = None,
        remote_dir: Optional[str] = None,
        **options: Any,
    ) -> str:
        """What ``submit_many`` would run, a line per submission, checked as it would be."""
        from .submitting import coerce_task

        tasks = lambda: [coerce_task(item, None) for item in jobs]  # noqa: E731
        return self.describe_order(self.order(tasks, resources, depends_on, remote_dir, options))

    def describe_order(self, order: Order) -> str:
        """What the driver would send for ``order``, checked as a submission would be."""
        return self.submission().describe(order)

    def get_job_status(self, job_id: Any) -> JobStatus:
        job_id = self.normalize_job_id(job_id)
        return self.get_job_statuses([job_id])[job_id]

    def get_job_statuses(self, job_ids: Iterable[Any]) -> Dict[str, JobStatus]:
        """Statuses of many jobs: one scheduler round for all unfinished, at the polite rate;
        where the floor forbids one now, what is known, at once (``as_of``: since when)."""
        from .observation import statuses_of

        return statuses_of(self.observe(job_ids))

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

    def log_path(self, job_id: Any) -> str:
        """Where the job writes: its record's path (nothing opened), else the scheduler's."""
        job_id = self.normalize_job_id(job_id)
        record = self.store.get(job_id, self.scheduler_name, self.host_label)
        if record is not None and record.log_path:
            return record.log_path
        return self.following().log_path(job_id)

    def get_job_logs(self, job_id: Any) -> str:
        """The job's output so far ("" if it has not started writing)."""
        from .tracking import read_output

        return read_output(self.executor, self.log_path(job_id))

    def cancel_job(self, job_id: Any) -> None:
        self.cancel_jobs([job_id])

    def charges(self, job_ids: Sequence[str]) -> Dict[str, Charge]:
        """What the scheduler charged these jobs (``hpcbridge cost``), for those it can tell;
        ``SchedulerAdapterError`` when it cannot be asked.  The mock charges nothing."""
        return {}

    def describe(self) -> str:
        """One line saying what this adapter talks to and how (opens the session)."""
        choice = self.open().choice
        how = f"{choice.name} driver: {choice.reason}"
        return f"{self.scheduler_name} via {self.executor.kind} ({how})"

    def __enter__(self) -> SchedulerAdapter:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(executor={self.executor!r}, remote_workdir={self.remote_workdir!r})"


__all__ = ["SchedulerAdapter"]
