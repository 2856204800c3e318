"""SchedulerAdapter: the scheduler-neutral half of every adapter.

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

import logging
import os
import threading
from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from ..config import Settings
from ..cost import Charge
from ..errors import ConfigurationError, SchedulerUnavailableError
from ..model import JobStatus
from ..resources import RESOURCE_KEYS, Resources
from ..store.jobs import JobStore
from ..transports.base import Executor
from ..transports.local import LocalExecutor
from . import submitting, sweeping
from .driver import SchedulerDriver, Session
from .jobscript import TaskSpec
from .observation import Observation, statuses_of
from .submitting import DependsOn, JobInput, Order, Placement, Stager, Submission, reach_text
from .tracking import JobTracker, ask, exit_code_from_file, read_output
from .waiting import Following, ProgressCallback, StatusCallback

log = logging.getLogger("hpcbridge")


class SchedulerAdapter(ABC):
    """The scheduler-neutral interface; see the module docstring for the contract."""

    #: "mock", "slurm" or "flux"
    scheduler_name: ClassVar[str] = ""
    #: file name of a job's output in its folder; ``{id}`` is replaced by the job id
    output_template: ClassVar[str] = "job-{id}.out"
    #: the placeholder the scheduler itself expands in an output path
    output_placeholder: ClassVar[str] = "{id}"
    #: what the wrapper exports as ``HPCBRIDGE_LAUNCHER`` (``srun``, ``flux run``)
    launcher_command: ClassVar[str] = ""
    #: submission keywords of other schedulers that this one accepts and ignores
    ignored_options: ClassVar[frozenset[str]] = frozenset()
    #: seconds between two status rounds when neither the caller nor the settings say
    default_poll_interval: ClassVar[float] = 10.0
    #: whether status rounds ask a controller others share (the site's floor applies)
    shares_a_controller: ClassVar[bool] = True

    def __init__(
        self,
        executor: Optional[Executor] = None,
        remote_workdir: Optional[str] = None,
        *,
        settings: Optional[Settings] = None,
        store: Optional[JobStore] = None,
        unknown_limit: Optional[int] = None,
        command_timeout: Optional[float] = None,
    ) -> None:
        self.settings = settings if settings is not None else Settings.from_env()
        self.command_timeout = (
            command_timeout if command_timeout is not None else self.settings.command_timeout
        )
        self.executor: Executor = (
            executor
            if executor is not None
            else LocalExecutor(self.command_timeout, env=self.settings.command_env)
        )
        self.remote_workdir = remote_workdir or self.settings.remote_workdir or self._workdir()
        self.store = store if store is not None else JobStore(self.settings.database_path)
        self.unknown_limit = unknown_limit or self.settings.unknown_limit
        files = self.executor  # the exit-code files: read, and their mtimes
        self.tracker = JobTracker(
            self.store, self.scheduler_name, self.host_label, files.read_text, files.stat_many
        )
        self.stager = Stager(
            self.executor,
            self.remote_workdir,
            self.output_template.replace("{id}", self.output_placeholder),
        )
        self._session: Optional[Session] = None
        self._following: Optional[Following] = None
        self._session_lock = threading.RLock()
        self._ignored_logged: set[str] = set()

    def open(self) -> Session:
        """Choose the driver, once; raises what makes the scheduler unusable from here."""
        session = self._session
        if session is None:
            with self._session_lock:
                if self._session is None:
                    self._session = self._open_session()
                session = self._session
        return session

    @abstractmethod
    def _open_session(self) -> Session:
        """Choose the driver (and whatever else must be learned); called once by ``open``."""

    def _workdir(self) -> str:
        if self.executor.is_local:
            return str(self.settings.state_path / "jobs")
        return "hpcbridge-jobs"  # relative to the remote home directory

    def normalize_job_id(self, job_id: Any) -> str:
        return str(job_id).strip()

    @property
    def host_label(self) -> str:
        """The key under which this adapter's jobs are recorded."""
        return self.executor.host

    @property
    def instance_label(self) -> Optional[str]:
        """The scheduler instance recorded with each job (Flux: its URI)."""
        return None

    def validate_resources(self, resources: Union[None, Mapping[str, Any], Resources]) -> Resources:
        """Validated resources over the settings' defaults (a ``Resources``: as it is)."""
        if isinstance(resources, Resources):
            return resources
        sources = self.settings.sources
        origins = {key: sources.get(f"resource:{key}", "") for key in RESOURCE_KEYS}
        return Resources.from_mapping(resources, self.settings.resource_defaults, origins)

    def job_options(self, options: Mapping[str, Any]) -> object:
        """This scheduler's own keywords as the object its drivers read; the base takes
        only ``ignored_options`` (logged once); an unknown one is a ``TypeError``."""
        for name, value in options.items():
            if name not in self.ignored_options:
                raise TypeError(f"{self.scheduler_name}: unexpected submission keyword {name!r}")
            if name not in self._ignored_logged:
                self._ignored_logged.add(name)
                log.info("%s: %s=%r does not apply here; ignored", self.scheduler_name, name, value)
        return None

    def launcher(self, options: object) -> str:
        """What the wrapper exports as ``HPCBRIDGE_LAUNCHER`` for jobs of these options."""
        return self.launcher_command

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
        on_sweep: Optional[sweeping.Announce] = None,
        **options: Any,
    ) -> List[str]:
        """One id per input, in order (``PartialSubmissionError`` when only some went in).
        With ``max_queued``, a ``sweep`` name, or past the scheduler's cap, fed as a sweep
        (one made for a cap is told to ``on_sweep(name, why)``, else logged as a warning)."""
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
        tasks = lambda: [submitting.coerce_task(item, None) for item in jobs]  # noqa: E731
        return self.describe_order(self.order(tasks, resources, depends_on, remote_dir, options))

    def describe_order(self, order: Order) -> str:
        """What the driver would send for ``order``, checked as a submission would be."""
        return self.submission().describe(order)

    def order(
        self,
        tasks: Callable[[], List[TaskSpec]],
        resources: Union[None, Mapping[str, Any], Resources],
        depends_on: DependsOn,
        remote_dir: Optional[str],
        options: Mapping[str, Any],
    ) -> Order:
        """Everything the caller gave, validated before anything is asked or staged."""
        validated = self.validate_resources(resources)
        dependencies = tuple(submitting.dependency_ids(depends_on, self.normalize_job_id))
        return Order(tasks(), validated, dependencies, remote_dir, self.job_options(options))

    def submission(self) -> Submission:
        """A submission through the open session's driver, recorded where this adapter records."""
        where = Placement(
            self.scheduler_name, self.executor.kind, self.host_label, reach_text(self.executor)
        )
        parts = (self.stager, self.store, where, self.instance_label, self.launcher)
        runtime = self.settings.container_runtime
        return Submission(self.open().driver, *parts, self.observe, runtime)

    def get_job_status(self, job_id: Any) -> JobStatus:
        job_id = self.normalize_job_id(job_id)
        return self.get_job_statuses([job_id])[job_id]

    def get_job_statuses(self, job_ids: Iterable[Any]) -> Dict[str, JobStatus]:
        """Statuses of many jobs: one scheduler round for all unfinished, at the polite rate;
        where the floor forbids one now, what is known, at once (``as_of``: since when)."""
        return statuses_of(self.observe(job_ids))

    def observe(self, job_ids: Iterable[Any]) -> Dict[str, Observation]:
        """``get_job_statuses`` as observations (source, answer time, reach)."""
        ids = list(dict.fromkeys(self.normalize_job_id(job_id) for job_id in job_ids))
        ended = self.tracker.all_ended(ids)
        if ended is not None:  # a finished job is read from its record: nothing is opened
            return ended
        try:
            following = self.following()
        except (ConfigurationError, SchedulerUnavailableError):
            return self.tracker.refresh(
                ids, lambda asked: ask(self._driver, self.scheduler_name, asked)
            )
        return following.statuses(ids)

    def _driver(self) -> SchedulerDriver:
        return self.open().driver

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
        _check_wait_arguments(poll_interval, timeout, notice_interval)
        ids = list(dict.fromkeys(self.normalize_job_id(job_id) for job_id in job_ids))
        ended = self.tracker.all_ended(ids)
        if ended is not None:  # all recorded as ended: said as a wait would, nothing opened
            finals = statuses_of(ended)
            for status in finals.values():
                if on_change is not None:
                    on_change(status)
            if on_poll is not None:
                on_poll(dict(finals))
            return finals
        return self.following().wait_all(
            ids, poll_interval, timeout, on_change, on_poll, notice_interval
        )

    def following(self) -> Following:
        """The status, wait, log and cancel paths over the open session (made once)."""
        with self._session_lock:
            following = self._following
        if following is None:
            driver = self.open().driver
            interval = self.settings.poll_interval or self.default_poll_interval
            made = Following(
                driver,
                self.tracker,
                self.store,
                poll_interval=interval,
                poll_floor=self.poll_floor,
                poll_target=self.poll_target,
                unknown_limit=self.unknown_limit,
            )
            with self._session_lock:
                self._following = following = self._following or made
        return following

    @property
    def poll_floor(self) -> float:
        """The least time between two status rounds (none without a shared controller)."""
        return self.settings.min_poll_interval if self.shares_a_controller else 0.0

    @property
    def poll_target(self) -> str:
        """What one shared poll is about: this scheduler instance, seen from here."""
        return f"{self.scheduler_name}|{self.host_label}|{self.instance_label or ''}"

    def log_path(self, job_id: Any) -> str:
        """Where the job writes: its record's path (nothing opened), else the scheduler's."""
        job_id = self.normalize_job_id(job_id)
        record = self.store.get(job_id, self.scheduler_name, self.host_label)
        if record is not None and record.log_path:
            return record.log_path
        return self.following().log_path(job_id)

    def get_job_logs(self, job_id: Any) -> str:
        """The job's output so far ("" if it has not started writing)."""
        return read_output(self.executor, self.log_path(job_id))

    def cancel_job(self, job_id: Any) -> None:
        self.cancel_jobs([job_id])

    def cancel_jobs(self, job_ids: Iterable[Any]) -> None:
        self.following().cancel([self.normalize_job_id(job_id) for job_id in job_ids])

    def charges(self, job_ids: Sequence[str]) -> Dict[str, Charge]:
        """What the scheduler charged these jobs (``hpcbridge cost``), for those it can tell;
        ``SchedulerAdapterError`` when it cannot be asked.  The mock charges nothing."""
        return {}

    def describe(self) -> str:
        """One line saying what this adapter talks to and how (opens the session)."""
        choice = self.open().choice
        how = f"{choice.name} driver: {choice.reason}"
        return f"{self.scheduler_name} via {self.executor.kind} ({how})"

    def close(self) -> None:
        if self._following is not None:
            self._following.poller.release()  # the next process here polls at once
        if self._session is not None:
            self._session.driver.close()
        self.executor.close()
        # Now, not whenever the collector frees it: closing the last connection
        # checkpoints the store's write-ahead log (a disk sync).
        self.store.close()

    def __enter__(self) -> SchedulerAdapter:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(executor={self.executor!r}, remote_workdir={self.remote_workdir!r})"


__all__ = ["SchedulerAdapter", "exit_code_from_file"]


def _check_wait_arguments(
    poll_interval: Optional[float], timeout: Optional[float], notice_interval: float
) -> None:
    """A wait's numbers, refused before anything is asked (``ConfigurationError``)."""
    if timeout is not None and not timeout >= 0:
        raise ConfigurationError(
            f"timeout={timeout!r}: expected seconds, 0 or more (None waits for as long as it takes)"
        )
    for name, value in (("poll_interval", poll_interval), ("notice_interval", notice_interval)):
        if value is not None and not value > 0:
            raise ConfigurationError(f"{name}={value!r}: expected a number of seconds above 0")
