"""SchedulerAdapter: staging, records, the one bounded wait loop, many-job polling.

A concrete adapter supplies four things: how to submit a staged wrapper,
how to query many jobs at once, how to cancel, and how to describe a
submission without running it.  Everything else - validation, staging,
state ordering, the cancel override, the job records and waiting - lives
here once.
"""

from __future__ import annotations

import logging
import os
import posixpath
import threading
import time
from abc import ABC, abstractmethod
from datetime import datetime, timezone
from typing import (
    Any,
    Callable,
    ClassVar,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from ..config import Settings
from ..errors import (
    JobNotFoundError,
    JobSubmissionError,
    JobTimeoutError,
    SchedulerAdapterError,
    TransportError,
)
from ..jobscript import (
    MARKER_DIR,
    PreparedJob,
    TaskSpec,
    build_wrapper,
    check_environment_names,
    marker_path,
    new_token,
)
from ..model import JobState, JobStatus, advance
from ..resources import Resources
from ..store import JobRecord, JobStore
from ..transports.base import Executor
from ..transports.local import LocalExecutor

log = logging.getLogger("hpcbridge")

#: what ``submit_many`` accepts for one job: a script path, or
#: ``(script, arguments)``, or ``(script, arguments, environment)``
JobInput = Union[str, "os.PathLike[str]", Tuple[Any, ...], TaskSpec]

StatusCallback = Callable[[JobStatus], None]


class Pauser:
    """The pause between two status rounds of ``wait_all``."""

    def pause(self, seconds: float) -> bool:
        """Wait up to ``seconds``; True when a watched job ended meanwhile."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the pauser holds (watches, futures)."""


class Sleeper(Pauser):
    def pause(self, seconds: float) -> bool:
        time.sleep(seconds)
        return False


class SchedulerAdapter(ABC):
    """The scheduler-neutral interface; see the README for the contract."""

    #: "mock", "slurm" or "flux"
    scheduler_name: ClassVar[str] = ""
    #: file name of a job's output in its folder; ``{id}`` is replaced by the job id
    output_template: ClassVar[str] = "job-{id}.out"
    #: the placeholder the scheduler itself expands in an output path
    output_placeholder: ClassVar[str] = "{id}"

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
        self.remote_workdir = (
            remote_workdir or self.settings.remote_workdir or self._default_workdir()
        )
        self.store = store if store is not None else JobStore(self.settings.database_path)
        self.unknown_limit = unknown_limit or self.settings.unknown_limit
        self._known: Dict[str, JobStatus] = {}
        self._lock = threading.Lock()

    # -- what a concrete adapter provides --------------------------------

    @abstractmethod
    def _submit(self, job: PreparedJob, resources: Resources, depends_on: List[str]) -> str:
        """Submit the staged wrapper; return the job id."""

    @abstractmethod
    def _query(self, job_ids: List[str], records: Mapping[str, JobRecord]) -> Dict[str, JobStatus]:
        """Statuses of many jobs with as few scheduler commands as possible.

        Must answer for every id: UNKNOWN when the scheduler cannot tell.
        """

    @abstractmethod
    def _cancel(self, job_ids: List[str]) -> None:
        """Ask the scheduler to end these jobs."""

    @abstractmethod
    def _describe(self, job: PreparedJob, resources: Resources, depends_on: List[str]) -> str:
        """The exact command line (or jobspec) a submission would run."""

    def _default_workdir(self) -> str:
        if isinstance(self.executor, LocalExecutor):
            return str(self.settings.state_path / "jobs")
        return "hpcbridge-jobs"  # relative to the remote home directory

    def normalize_job_id(self, job_id: Any) -> str:
        return str(job_id).strip()

    @property
    def host_label(self) -> str:
        """The key under which this adapter's jobs are recorded."""
        return self.executor.host

    # -- submission -------------------------------------------------------

    def validate_resources(self, resources: Optional[Mapping[str, Any]]) -> Resources:
        """Validated resources over the settings' defaults (raises ``ResourceError``)."""
        return Resources.from_mapping(resources, defaults=self.settings.resource_defaults)

    def submit_job(
        self,
        script_path: Union[str, os.PathLike[str]],
        resources: Optional[Mapping[str, Any]] = None,
        remote_dir: Optional[str] = None,
        depends_on: Union[None, str, int, Sequence[Any]] = None,
        arguments: Sequence[str] = (),
        environment: Optional[Mapping[str, str]] = None,
    ) -> str:
        """Stage ``script_path`` into ``remote_dir`` and submit it; return the job id."""
        validated = self.validate_resources(resources)
        dependencies = self._dependency_ids(depends_on)
        task = self._task(script_path, arguments, environment)
        job = self._plan([task], validated, remote_dir)
        self._stage(job, [task])
        job_id = self._submit(job, validated, dependencies)
        self._record([job_id], job, validated, [task])
        log.info("submitted %s job %s (%s)", self.scheduler_name, job_id, job.remote_dir)
        return job_id

    def submit_many(
        self,
        jobs: Sequence[JobInput],
        resources: Optional[Mapping[str, Any]] = None,
        depends_on: Union[None, str, int, Sequence[Any]] = None,
        remote_dir: Optional[str] = None,
    ) -> List[str]:
        """Submit many similar jobs; one id per input, in order."""
        validated = self.validate_resources(resources)
        dependencies = self._dependency_ids(depends_on)
        tasks = [self._coerce_task(item) for item in jobs]
        if not tasks:
            return []
        return self._submit_tasks(tasks, validated, dependencies, remote_dir)

    def _submit_tasks(
        self,
        tasks: List[TaskSpec],
        resources: Resources,
        depends_on: List[str],
        remote_dir: Optional[str],
    ) -> List[str]:
        """Default bulk path: one staged wrapper and one submission per task."""
        ids = []
        for task in tasks:
            job = self._plan([task], resources, remote_dir)
            self._stage(job, [task])
            job_id = self._submit(job, resources, depends_on)
            self._record([job_id], job, resources, [task])
            ids.append(job_id)
        return ids

    def describe_submission(
        self,
        script_path: Union[str, os.PathLike[str]],
        resources: Optional[Mapping[str, Any]] = None,
        remote_dir: Optional[str] = None,
        depends_on: Union[None, str, int, Sequence[Any]] = None,
    ) -> str:
        """What ``submit_job`` would run, without staging or submitting anything."""
        validated = self.validate_resources(resources)
        task = self._task(script_path, (), None, must_exist=False)
        job = self._plan([task], validated, remote_dir)
        return self._describe(job, validated, self._dependency_ids(depends_on))

    def _task(
        self,
        script_path: Any,
        arguments: Sequence[str],
        environment: Optional[Mapping[str, str]],
        must_exist: bool = True,
    ) -> TaskSpec:
        path = os.fspath(script_path)
        if must_exist and not os.path.isfile(path):
            raise JobSubmissionError(f"script not found: {path}")
        job_environment = dict(environment or {})
        if self.settings.remote_repo:
            # Where the code is deployed on the cluster, for scripts that need it.
            job_environment.setdefault("HPCBRIDGE_REMOTE_REPO", self.settings.remote_repo)
        return TaskSpec(
            os.path.abspath(path),
            tuple(str(argument) for argument in arguments),
            check_environment_names(job_environment),
        )

    def _coerce_task(self, item: JobInput) -> TaskSpec:
        if isinstance(item, TaskSpec):
            return self._task(item.script, item.arguments, item.environment)
        if isinstance(item, tuple):
            script = item[0]
            arguments = item[1] if len(item) > 1 and item[1] is not None else ()
            environment = item[2] if len(item) > 2 else None
            if isinstance(arguments, str):
                raise ValueError("arguments must be a list of strings, not one string")
            return self._task(script, arguments, environment)
        return self._task(item, (), None)

    def _dependency_ids(self, depends_on: Union[None, str, int, Sequence[Any]]) -> List[str]:
        if depends_on is None:
            return []
        if isinstance(depends_on, (str, int)):
            depends_on = [depends_on]
        return [self.normalize_job_id(job_id) for job_id in depends_on]

    def _plan(
        self, tasks: Sequence[TaskSpec], resources: Resources, remote_dir: Optional[str]
    ) -> PreparedJob:
        token = new_token()
        directory = remote_dir or posixpath.join(
            self.remote_workdir, f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{token}"
        )
        directory = self.executor.abspath(directory)
        scripts = _staged_names(directory, [task.script for task in tasks])
        name = resources.job_name or os.path.basename(tasks[0].script) or "hpcbridge"
        return PreparedJob(
            token=token,
            remote_dir=directory,
            wrapper_path=marker_path(directory, token, ".sh"),
            exit_file=marker_path(directory, token, ".exit"),
            scripts=scripts,
            job_name=name,
        )

    def _wrapper_text(self, job: PreparedJob, tasks: Sequence[TaskSpec]) -> str:
        staged = [
            TaskSpec(remote, task.arguments, task.environment)
            for remote, task in zip(job.scripts, tasks)
        ]
        index_variable = self._task_index_variable() if len(tasks) > 1 else None
        return build_wrapper(staged, job.remote_dir, job.exit_file, index_variable)

    def _task_index_variable(self) -> Optional[str]:
        """The environment variable that picks the task of a many-task wrapper."""
        return None

    def _stage(self, job: PreparedJob, tasks: Sequence[TaskSpec]) -> None:
        """Create the job folder, copy the scripts, write the wrapper."""
        try:
            self.executor.mkdir(job.remote_dir, mode=0o700)
            self.executor.mkdir(posixpath.join(job.remote_dir, MARKER_DIR), mode=0o700)
            copied = set()
            for remote, task in zip(job.scripts, tasks):
                if remote not in copied:
                    self.executor.put(task.script, remote, mode=0o700)
                    copied.add(remote)
            self.executor.write_text(job.wrapper_path, self._wrapper_text(job, tasks), mode=0o700)
        except (OSError, TransportError) as exc:
            raise JobSubmissionError(f"cannot stage the job into {job.remote_dir}: {exc}") from exc

    def output_path(self, job: PreparedJob, resources: Resources) -> str:
        """The output path handed to the scheduler (its own placeholder kept)."""
        template = resources.output or self.output_template.replace("{id}", self.output_placeholder)
        return posixpath.join(job.remote_dir, template)

    def _resolve_output(self, job: PreparedJob, resources: Resources, job_id: str) -> str:
        return self.output_path(job, resources).replace(self.output_placeholder, job_id)

    def _record(
        self,
        job_ids: Sequence[str],
        job: PreparedJob,
        resources: Resources,
        tasks: Sequence[TaskSpec],
        exit_files: Optional[Sequence[str]] = None,
        log_paths: Optional[Sequence[str]] = None,
    ) -> None:
        now = datetime.now(timezone.utc)
        records = []
        for index, job_id in enumerate(job_ids):
            records.append(
                JobRecord(
                    job_id=job_id,
                    scheduler=self.scheduler_name,
                    transport=self.executor.kind,
                    host=self.host_label,
                    flux_uri=self._record_uri(),
                    job_name=job.job_name,
                    state=JobState.PENDING.value,
                    submit_time=now,
                    nodes=resources.nodes,
                    ntasks=resources.ntasks,
                    cpus_per_task=resources.cpus_per_task,
                    gpus=resources.gpus,
                    time_limit=resources.time,
                    partition=resources.partition,
                    qos=resources.qos,
                    account=resources.account,
                    remote_dir=job.remote_dir,
                    script=tasks[min(index, len(tasks) - 1)].script,
                    log_path=log_paths[index]
                    if log_paths
                    else self._resolve_output(job, resources, job_id),
                    exit_file=exit_files[index] if exit_files else job.exit_file,
                )
            )
            self._known[job_id] = JobStatus(job_id, JobState.PENDING)
        self.store.add_many(records)

    def _record_uri(self) -> Optional[str]:
        return None

    def _status_from_exit_file(
        self, status: JobStatus, record: Optional[JobRecord]
    ) -> Optional[JobStatus]:
        """``status`` ended as the wrapper's exit-code file says, for a job the scheduler
        no longer knows; ``None`` when there is no readable file."""
        if record is None or not record.exit_file:
            return None
        try:
            code = exit_code_from_file(self.executor.read_text(record.exit_file))
        except Exception as exc:  # noqa: BLE001 - missing or unreachable: no answer
            log.debug("no exit-code file %s: %s", record.exit_file, exc)
            return None
        if code is None:
            return None
        state = JobState.COMPLETED if code == 0 else JobState.FAILED
        return status.with_(state=state, exit_code=code)

    # -- status -----------------------------------------------------------

    def get_job_status(self, job_id: Any) -> JobStatus:
        job_id = self.normalize_job_id(job_id)
        return self.get_job_statuses([job_id])[job_id]

    def get_job_statuses(self, job_ids: Iterable[Any]) -> Dict[str, JobStatus]:
        """Statuses of many jobs: one scheduler query for all that are not finished."""
        ids = list(dict.fromkeys(self.normalize_job_id(job_id) for job_id in job_ids))
        records = self.store.get_many(self.scheduler_name, self.host_label, ids)
        answers: Dict[str, JobStatus] = {}
        to_ask = []
        for job_id in ids:
            known = self._previous(job_id, records.get(job_id))
            if known is not None and known.is_terminal:
                answers[job_id] = known  # final: no need to ask the scheduler again
            else:
                to_ask.append(job_id)
        if to_ask:
            observed = self._query(to_ask, records)
            changed = []
            for job_id in to_ask:
                status = observed.get(job_id) or JobStatus(
                    job_id, JobState.UNKNOWN, reason="no answer from the scheduler"
                )
                merged = self._merge(job_id, status, records.get(job_id))
                answers[job_id] = merged
                if merged.state is not JobState.UNKNOWN and merged != self._known.get(job_id):
                    changed.append(merged)
                if merged.state is not JobState.UNKNOWN:
                    self._known[job_id] = merged
            if changed:
                self.store.update_statuses(self.scheduler_name, self.host_label, changed)
        return {job_id: answers[job_id] for job_id in ids}

    def _previous(self, job_id: str, record: Optional[JobRecord]) -> Optional[JobStatus]:
        known = self._known.get(job_id)
        if known is None and record is not None:
            known = record.status()
        return known

    def _merge(self, job_id: str, observed: JobStatus, record: Optional[JobRecord]) -> JobStatus:
        if observed.state is JobState.UNKNOWN:
            return observed
        cancel_requested = record is not None and record.cancel_requested
        if cancel_requested and observed.state in (JobState.FAILED, JobState.TIMEOUT):
            # A cancelled job may be reported FAILED/TIMEOUT (killed by SIGTERM,
            # exit 143) by the scheduler; the user asked for it to end, so it is
            # CANCELLED.  The scheduler's own words stay in native_state.  A job
            # that COMPLETED before the cancel arrived stays COMPLETED.
            observed = observed.with_(
                state=JobState.CANCELLED,
                reason=observed.reason or "cancel requested",
            )
        return advance(self._previous(job_id, record), observed)

    # -- waiting ----------------------------------------------------------

    def wait_until_complete(
        self,
        job_id: Any,
        poll_interval: float = 10.0,
        timeout: Optional[float] = None,
        on_change: Optional[StatusCallback] = None,
    ) -> str:
        """Wait until the job ends (whatever its final state); return its log path."""
        job_id = self.normalize_job_id(job_id)
        self.wait_all([job_id], poll_interval=poll_interval, timeout=timeout, on_change=on_change)
        return self.log_path(job_id)

    def wait(
        self,
        job_id: Any,
        poll_interval: float = 10.0,
        timeout: Optional[float] = None,
        on_change: Optional[StatusCallback] = None,
    ) -> JobStatus:
        """Wait until the job ends; return its final status."""
        job_id = self.normalize_job_id(job_id)
        return self.wait_all(
            [job_id], poll_interval=poll_interval, timeout=timeout, on_change=on_change
        )[job_id]

    def wait_all(
        self,
        job_ids: Iterable[Any],
        poll_interval: float = 10.0,
        timeout: Optional[float] = None,
        on_change: Optional[StatusCallback] = None,
        first_interval: float = 0.25,
        on_poll: Optional[Callable[[Dict[str, JobStatus]], None]] = None,
    ) -> Dict[str, JobStatus]:
        """Wait until every job ends; one scheduler query per poll for all of them.

        The interval starts short and backs off to ``poll_interval`` while
        nothing changes.  A job that stays UNKNOWN (not in queue, history or
        its folder) for ``unknown_limit`` polls in a row raises
        ``JobNotFoundError``; a failed query counts as UNKNOWN for all, so a
        restarting controller or a dropped connection is ridden out.
        ``on_poll`` gets every job's latest status after each round (progress).
        """
        ids = list(dict.fromkeys(self.normalize_job_id(job_id) for job_id in job_ids))
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = list(ids)
        final: Dict[str, JobStatus] = {}
        last_seen: Dict[str, JobState] = {}
        unknown_streak = dict.fromkeys(ids, 0)
        interval = min(first_interval, poll_interval)
        latest: Dict[str, JobStatus] = {}
        pauser: Optional[Pauser] = None
        try:
            while True:
                statuses = self._poll(pending)
                latest.update(statuses)
                if on_poll is not None:
                    on_poll(latest)
                changed = False
                for job_id in list(pending):
                    status = statuses[job_id]
                    if status.state is JobState.UNKNOWN:
                        unknown_streak[job_id] += 1
                        if unknown_streak[job_id] >= self.unknown_limit:
                            raise JobNotFoundError(
                                f"{self.scheduler_name} job {job_id} could not be observed "
                                f"{unknown_streak[job_id]} times in a row "
                                f"({status.reason or 'not in queue, history or job folder'})"
                            )
                        continue
                    unknown_streak[job_id] = 0
                    if last_seen.get(job_id) is not status.state:
                        last_seen[job_id] = status.state
                        changed = True
                        if on_change is not None:
                            on_change(status)
                    if status.is_terminal:
                        final[job_id] = status
                        pending.remove(job_id)
                if not pending:
                    return {job_id: final[job_id] for job_id in ids}
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    raise JobTimeoutError(
                        f"{len(pending)} job(s) still unfinished after {timeout:g} s: "
                        + ", ".join(pending[:10])
                    )
                interval = first_interval if changed else min(interval * 1.5, poll_interval)
                pause = interval if deadline is None else min(interval, max(deadline - now, 0))
                if pauser is None:
                    pauser = self._pauser(pending)
                if pauser.pause(pause):
                    interval = first_interval  # a job ended: look again soon
        finally:
            if pauser is not None:
                pauser.close()

    def _pauser(self, job_ids: List[str]) -> Pauser:
        """How ``wait_all`` pauses between rounds: plain sleeping, unless a
        scheduler can wake up when a job ends (Flux's native driver)."""
        return Sleeper()

    def _poll(self, job_ids: List[str]) -> Dict[str, JobStatus]:
        """One status round; a failed query makes every job UNKNOWN this time."""
        try:
            return self.get_job_statuses(job_ids)
        except (TransportError, JobTimeoutError) as exc:
            log.warning("status query failed (will retry): %s", exc)
            return {
                job_id: JobStatus(job_id, JobState.UNKNOWN, reason=f"query failed: {exc}")
                for job_id in job_ids
            }

    # -- logs, cancel -----------------------------------------------------

    def _record_for(self, job_id: str) -> Optional[JobRecord]:
        return self.store.get(job_id, self.scheduler_name, self.host_label)

    def log_path(self, job_id: Any) -> str:
        job_id = self.normalize_job_id(job_id)
        record = self._record_for(job_id)
        if record is not None and record.log_path:
            return record.log_path
        found = self._find_log_path(job_id)
        if found is None:
            raise JobNotFoundError(f"no record of {self.scheduler_name} job {job_id}")
        return found

    def _find_log_path(self, job_id: str) -> Optional[str]:
        """Ask the scheduler where a job without a record writes its output."""
        return None

    def get_job_logs(self, job_id: Any) -> str:
        """The job's output so far ("" if it has not started writing)."""
        path = self.log_path(job_id)
        try:
            return self.executor.read_text(path)
        except FileNotFoundError:
            return ""
        except OSError as exc:
            if getattr(exc, "errno", None) == 2:
                return ""
            raise TransportError(f"cannot read {path}: {exc}") from exc

    def cancel_job(self, job_id: Any) -> None:
        self.cancel_jobs([job_id])

    def cancel_jobs(self, job_ids: Iterable[Any]) -> None:
        ids = [self.normalize_job_id(job_id) for job_id in job_ids]
        self.store.mark_cancel_requested(self.scheduler_name, self.host_label, ids)
        self._cancel(ids)
        log.info("cancel requested for %s job(s) %s", self.scheduler_name, ", ".join(ids))

    # -- misc ---------------------------------------------------------------

    def describe(self) -> str:
        """One line saying what this adapter talks to and how."""
        return f"{self.scheduler_name} via {self.executor.kind}"

    def close(self) -> None:
        self.executor.close()

    def __enter__(self) -> SchedulerAdapter:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(executor={self.executor!r}, remote_workdir={self.remote_workdir!r})"


def _staged_names(directory: str, scripts: Sequence[str]) -> List[str]:
    """Where each script lands in the job folder: its own name, deduplicated."""
    by_source: Dict[str, str] = {}
    used: Dict[str, str] = {}
    names = []
    for script in scripts:
        if script not in by_source:
            base = os.path.basename(script) or "script"
            candidate, counter = base, 1
            while candidate in used and used[candidate] != script:
                counter += 1
                candidate = f"{base}.{counter}"
            used[candidate] = script
            by_source[script] = posixpath.join(directory, candidate)
        names.append(by_source[script])
    return names


def exit_code_from_file(text: str) -> Optional[int]:
    """The wrapper's exit-code file holds one integer."""
    try:
        return int(text.strip())
    except ValueError:
        return None


__all__ = ["SchedulerAdapter", "SchedulerAdapterError", "exit_code_from_file"]
