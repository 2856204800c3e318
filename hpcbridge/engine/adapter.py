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

A concrete adapter supplies ``_open_session`` (its driver: the session ``open()`` returns,
typed by the class parameter), ``normalize_job_id``, ``output_template``/
``output_placeholder`` and its own keywords (``own_keywords``, read by ``job_options``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence

from ..model import JobStatus
from .service import S, SubmissionService
from .wait_plan import ProgressCallback, StatusCallback, WaitPlan

if TYPE_CHECKING:
    from .parents import DependsOn
    from .submitting import JobInput
    from .sweeping import Announce


class SchedulerAdapter(SubmissionService[S]):
    """The scheduler-neutral interface; see the module docstring for the contract."""

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

    def __enter__(self) -> SchedulerAdapter:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(executor={self.executor!r}, remote_workdir={self.remote_workdir!r})"


__all__ = ["SchedulerAdapter"]
