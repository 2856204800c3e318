"""SubmissionService: one scheduler, seen from here - the base of every adapter
(``SchedulerAdapter``, ``adapter.py``, adds the calls built on more than it: ``submit_many``,
which may feed a sweep, and the waits' keywords) and what a sweep is handed
(``sweeping``, ``feeding``), so that neither imports the other's module.

It holds where jobs are recorded (the store) and staged (the ``Stager``), the session
(the driver, chosen once by ``_open_session``) and the shared poll's identity
(``poll_target``, ``poll_floor``); it checks orders, submits, answers statuses, waits
as a ``WaitPlan`` says (``wait_for``), finds logs and cancels.  The submission and
following machinery is loaded when first used, not when an adapter is imported.
"""

from __future__ import annotations

import logging
import os
import threading
from abc import ABC, abstractmethod
from typing import (
    TYPE_CHECKING,
    AbstractSet,
    Any,
    Callable,
    ClassVar,
    Dict,
    Generic,
    Iterable,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    TypeVar,
    Union,
)

from ..errors import ConfigurationError, SchedulerUnavailableError
from ..model import JobStatus
from .wait_plan import WaitPlan

if TYPE_CHECKING:
    from ..model import Charge
    from ..resources import Resources
    from ..settings.config import Settings
    from ..store.jobs import JobStore
    from ..transports.base import Executor
    from .driver import SchedulerDriver, Session
    from .following import Following
    from .jobscript import TaskSpec
    from .observation import Observation
    from .parents import DependsOn
    from .submitting import JobInput, Order, Submission

log = logging.getLogger("hpcbridge")

#: what an adapter's ``open()`` makes (its driver, and what else it learned)
S = TypeVar("S", bound="Session")


class OwnKeywords(Protocol):
    """A scheduler's own submission keywords (Flux: ``nested``), read into the object its
    drivers read (``SubmitBatch.options``)."""

    @property
    def names(self) -> AbstractSet[str]: ...

    def read(self, given: Mapping[str, Any]) -> object:
        """``given``: those of ``names`` the caller gave."""
        ...


class SubmissionService(ABC, Generic[S]):
    """A scheduler as the engine and a sweep use it; see the module docstring."""

    #: "mock", "slurm" or "flux"
    scheduler_name: ClassVar[str] = ""
    #: file name of a job's output in its folder; ``{id}`` is replaced by the job id
    output_template: ClassVar[str] = "job-{id}.out"
    #: the placeholder the scheduler itself expands in an output path
    output_placeholder: ClassVar[str] = "{id}"
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
        # loaded by the first adapter made, not by importing one (as submitting, following)
        from ..settings.config import Settings
        from ..store.jobs import JobStore
        from ..transports.local import LocalExecutor
        from .submitting import Stager
        from .tracking import JobTracker

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
        #: set by an adapter whose scheduler has keywords of its own (``job_options``)
        self.own_keywords: Optional[OwnKeywords] = None
        self._session: Optional[S] = None
        self._following: Optional[Following] = None
        self._session_lock = threading.RLock()
        self._ignored_logged: set[str] = set()

    def open(self) -> S:
        """Choose the driver, once; raises what makes the scheduler unusable from here."""
        session = self._session
        if session is None:
            with self._session_lock:
                if self._session is None:
                    self._session = self._open_session()
                session = self._session
        return session

    @abstractmethod
    def _open_session(self) -> S:
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
        """The scheduler instance its jobs are recorded with (the session's ``instance``;
        Flux: its URI), for a record made before a submission (a sweep's, a pack's)."""
        return None

    @property
    def poll_floor(self) -> float:
        """The least time between two status rounds (none without a shared controller)."""
        return self.settings.min_poll_interval if self.shares_a_controller else 0.0

    @property
    def poll_target(self) -> str:
        """What one shared poll is about: this scheduler instance, seen from here."""
        return f"{self.scheduler_name}|{self.host_label}|{self.instance_label or ''}"

    def validate_resources(self, resources: Union[None, Mapping[str, Any], Resources]) -> Resources:
        """Validated resources over the settings' defaults (a ``Resources``: as it is)."""
        from ..resources import RESOURCE_KEYS, Resources

        if isinstance(resources, Resources):
            return resources
        sources = self.settings.sources
        origins = {key: sources.get(f"resource:{key}", "") for key in RESOURCE_KEYS}
        return Resources.from_mapping(resources, self.settings.resource_defaults, origins)

    def job_options(self, options: Mapping[str, Any]) -> object:
        """This scheduler's own keywords as the object its drivers read (``own_keywords``);
        ``ignored_options`` are logged once; an unknown one is a ``TypeError``."""
        own = self.own_keywords
        names = own.names if own is not None else frozenset()
        for name, value in options.items():
            if name in names:
                continue
            if name not in self.ignored_options:
                raise TypeError(f"{self.scheduler_name}: unexpected submission keyword {name!r}")
            if name not in self._ignored_logged:
                self._ignored_logged.add(name)
                log.info("%s: %s=%r does not apply here; ignored", self.scheduler_name, name, value)
        if own is None:
            return None
        return own.read({name: value for name, value in options.items() if name in names})

    def order(
        self,
        tasks: Callable[[], List[TaskSpec]],
        resources: Union[None, Mapping[str, Any], Resources],
        depends_on: DependsOn,
        remote_dir: Optional[str],
        options: Mapping[str, Any],
    ) -> Order:
        """Everything the caller gave, validated before anything is asked or staged."""
        from .submitting import Order

        validated = self.validate_resources(resources)
        parents: List[str] = []
        if depends_on is not None:  # the parents' module loads for an order that has some
            from .parents import dependency_ids

            parents = dependency_ids(depends_on, self.normalize_job_id)
        return Order(tasks(), validated, tuple(parents), remote_dir, self.job_options(options))

    def submission(self) -> Submission:
        """A submission through the open session's driver, recorded where this adapter records."""
        from .submitting import Placement, Submission, reach_text

        where = Placement(
            self.scheduler_name, self.executor.kind, self.host_label, reach_text(self.executor)
        )
        session = self.open()
        parts = (self.stager, self.store, where, session.instance, self.observe)
        return Submission(session.driver, *parts, self.settings.container_runtime)

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
        from .describing import describe

        return describe(self.submission(), order)

    def get_job_status(self, job_id: Any) -> JobStatus:
        job_id = self.normalize_job_id(job_id)
        return self.get_job_statuses([job_id])[job_id]

    def get_job_statuses(self, job_ids: Iterable[Any]) -> Dict[str, JobStatus]:
        """Statuses of many jobs: one scheduler round for all unfinished, at the polite rate;
        where the floor forbids one now, what is known, at once (``as_of``: since when)."""
        from .observation import statuses_of

        return statuses_of(self.observe(job_ids))

    def observe(self, job_ids: Iterable[Any]) -> Dict[str, Observation]:
        """``get_job_statuses`` as observations (source, answer time, reach)."""
        from .tracking import ask

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

    def wait_for(self, job_ids: Iterable[Any], plan: WaitPlan) -> Dict[str, JobStatus]:
        """Wait as ``plan`` says until every job ends (the first ``plan.enough``); their
        final statuses.  Jobs all recorded as ended are said as a wait would, nothing opened."""
        from .observation import statuses_of

        ids = list(dict.fromkeys(self.normalize_job_id(job_id) for job_id in job_ids))
        ended = self.tracker.all_ended(ids)
        if ended is None:
            return self.following().wait_all(ids, plan)
        finals = statuses_of(ended)
        for status in finals.values():
            if plan.on_change is not None:
                plan.on_change(status)
        if plan.on_poll is not None:
            plan.on_poll(dict(finals))
        return finals

    def following(self) -> Following:
        """The status, wait, log and cancel paths over the open session (made once)."""
        from .following import Following

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

    def cancel_jobs(self, job_ids: Iterable[Any]) -> None:
        self.following().cancel([self.normalize_job_id(job_id) for job_id in job_ids])

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

    def close(self) -> None:
        if self._following is not None:
            self._following.poller.release()  # the next process here polls at once
        if self._session is not None:
            self._session.driver.close()
        self.executor.close()
        # Now, not whenever the collector frees it: closing the last connection
        # checkpoints the store's write-ahead log (a disk sync).
        self.store.close()
