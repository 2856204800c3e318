"""One submission, top to bottom: plan (parents checked: ``parents.refuse_unmet``; the
driver refuses what the scheduler would), stage, send (one ``submit_many`` a chunk of at
most ``max_batch`` tasks), record every job that went in before anything is raised.  What
it would send is ``describing``'s; the jobs a dead feeder sent are found by ``feeding``.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import stat
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import (
    AbstractSet,
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from ..errors import (
    JobSubmissionError,
    LimitRefusedError,
    SubmissionUncertainError,
    TransportError,
)
from ..model import JobState, JobStatus
from ..resources import Resources, signal_forwarded
from ..store.jobs import JobRecord, JobStore
from ..transports.base import Executor
from .containers import FOLDER_INSIDE, container_words
from .driver import PartialSubmissionError, Planned, SchedulerDriver, SubmitBatch, Submitted
from .jobscript import (
    MARKER_DIR,
    PreparedJob,
    Running,
    TaskSpec,
    check_environment_names,
    new_token,
    plan_chunks,
    wrapper_files,
)
from .observation import Observation
from .task_table import BUNDLED_SCRIPT_MAX, can_bundle

log = logging.getLogger("hpcbridge")


@dataclass(frozen=True)
class Order:
    """What a caller asked for, validated: the tasks and everything they share."""

    tasks: Sequence[TaskSpec]
    resources: Resources
    depends_on: Tuple[str, ...]
    remote_dir: Optional[str]
    #: the scheduler's own choices (``SchedulerAdapter.job_options``)
    options: object = None
    #: names the submission's folder and first wrapper: one order, the same paths
    token: str = field(default_factory=new_token)
    made: datetime = field(default_factory=datetime.now)
    #: each script's file name in a folder other orders share (a sweep's)
    script_names: Optional[Mapping[str, str]] = None


#: one job for ``submit_many``: a script, ``(script, arguments[, environment])``, a TaskSpec
JobInput = Union[str, "os.PathLike[str]", Tuple[Any, ...], TaskSpec]


def make_task(
    script_path: Any,
    arguments: Sequence[Any],
    environment: Optional[Mapping[str, str]],
    remote_repo: Optional[str],
    must_exist: bool = True,
) -> TaskSpec:
    """One validated task; ``remote_repo`` reaches the job as ``HPCBRIDGE_REMOTE_REPO``."""
    path = os.fspath(script_path)
    if must_exist:
        _check_script(path)
    job_environment = dict(environment or {})
    if remote_repo:
        job_environment.setdefault("HPCBRIDGE_REMOTE_REPO", remote_repo)
    return TaskSpec(
        os.path.abspath(path),
        tuple(str(argument) for argument in arguments),
        check_environment_names(job_environment),
    )


def _check_script(path: str) -> None:
    """Refuse what is no readable script file, saying what to do."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0
    if stat.S_ISDIR(mode):
        raise JobSubmissionError(
            f"{path} is a directory, not a script (give the path of a batch script file)"
        )
    if not stat.S_ISREG(mode):
        raise JobSubmissionError(
            f"script not found: {path} (give the path of an existing batch script)"
        )
    if not os.access(path, os.R_OK):
        raise JobSubmissionError(
            f"cannot read the script {path}: permission denied (make it readable to you: "
            f"chmod u+r {path})"
        )


def coerce_task(item: JobInput, remote_repo: Optional[str], must_exist: bool = True) -> TaskSpec:
    """A ``submit_many`` input as a task (see ``JobInput``)."""
    if isinstance(item, TaskSpec):
        return make_task(item.script, item.arguments, item.environment, remote_repo, must_exist)
    if isinstance(item, tuple):
        script = item[0]
        arguments = item[1] if len(item) > 1 and item[1] is not None else ()
        environment = item[2] if len(item) > 2 else None
        if isinstance(arguments, str):
            raise ValueError("arguments must be a list of strings, not one string")
        return make_task(script, arguments, environment, remote_repo, must_exist)
    return make_task(item, (), None, remote_repo, must_exist)


def _shifted(submitted: Sequence[Submitted], offset: int) -> List[Submitted]:
    if not offset:
        return list(submitted)
    return [replace(item, index=item.index + offset) for item in submitted]


def batches(
    order: Order, stager: Stager, chunk_size: int
) -> List[Tuple[SubmitBatch, List[TaskSpec]]]:
    """The order's chunks as batches - one folder, one wrapper each; pure planning."""
    folder = stager.folder(order.remote_dir, order.token, order.made)
    chunks = plan_chunks(
        folder, order.tasks, order.resources.job_name, chunk_size, order.token, order.script_names
    )
    return [(_batch(job, chunk, order, stager), chunk) for job, chunk in chunks]


def _batch(
    job: PreparedJob, tasks: Sequence[TaskSpec], order: Order, stager: Stager
) -> SubmitBatch:
    output = stager.output_path(job, order.resources)
    return SubmitBatch(job, len(tasks), order.resources, order.depends_on, output, order.options)


class Stager:
    """Where one adapter's jobs are staged."""

    def __init__(self, executor: Executor, workdir: str, output_template: str) -> None:
        self.executor = executor
        self.workdir = workdir
        #: a job's output file in its folder, with the scheduler's own id placeholder
        self.output_template = output_template

    def folder(self, remote_dir: Optional[str], token: str, made: datetime) -> str:
        """``remote_dir``, else a new folder under the workdir named by time and token."""
        directory = remote_dir or posixpath.join(
            self.workdir, f"{made.strftime('%Y%m%d-%H%M%S')}-{token}"
        )
        return self.executor.abspath(directory)

    def output_path(self, job: PreparedJob, resources: Resources) -> str:
        """The output path handed to the scheduler (its own placeholder kept)."""
        return posixpath.join(job.remote_dir, resources.output or self.output_template)

    def bundle(self, job: PreparedJob, tasks: Sequence[TaskSpec]) -> Dict[str, str]:
        """The text of each of ``job``'s single-use scripts that can travel in its
        wrapper's table, by staged path (one unreadable here is left to ``stage``)."""
        bundled: Dict[str, str] = {}
        for remote, task in zip(job.scripts, tasks):
            if remote not in job.single_use:
                continue
            try:
                if os.path.getsize(task.script) > BUNDLED_SCRIPT_MAX:
                    continue
                with open(task.script, encoding="utf-8", newline="") as source:
                    text = source.read()
            except (OSError, UnicodeDecodeError):
                continue
            if can_bundle(text):
                bundled[remote] = text
        return bundled

    def stage(
        self,
        job: PreparedJob,
        tasks: Sequence[TaskSpec],
        files: Sequence[Tuple[str, str]],
        bundled: AbstractSet[str] = frozenset(),
    ) -> None:
        """Create the job folder, copy the scripts but the ``bundled``, write ``files``."""
        executor = self.executor
        try:
            executor.mkdir(job.remote_dir, mode=0o700)
            executor.mkdir(posixpath.join(job.remote_dir, MARKER_DIR), mode=0o700)
            copied = set(bundled)
            for remote, task in zip(job.scripts, tasks):
                if remote not in copied:
                    executor.put(task.script, remote, mode=0o700)
                    copied.add(remote)
            for path, text in files:
                executor.write_text(path, text, mode=0o700)
        except OSError as exc:  # a TransportError stays one: exit 6, nothing went in
            raise JobSubmissionError(
                f"cannot stage the job into {job.remote_dir}: {exc} "
                "(check that the folder is writable and the transport is up)"
            ) from exc

    def unstage(self, folder: str) -> None:
        """Remove a folder staged for a refused submission (a failure is only logged)."""
        try:
            result = self.executor.run(["rm", "-rf", "--", folder], timeout=60)
            problem = "" if result.ok else result.message()
        except (OSError, TransportError) as exc:
            problem = str(exc)
        if problem:
            log.warning("could not remove %s, staged for a refused submission: %s", folder, problem)


@dataclass(frozen=True)
class Placement:
    """Where jobs are recorded: scheduler, transport, host."""

    scheduler: str
    transport: str
    host: str
    #: JSON of the settings that reach the host again (``Executor.reach``), or None
    reach: Optional[str] = None


def reach_text(executor: Executor) -> Optional[str]:
    """What a record keeps of ``executor.reach``: JSON, or None when there is nothing."""
    return json.dumps(dict(executor.reach), sort_keys=True) if executor.reach else None


def job_records(
    submitted: Sequence[Submitted],
    batch: SubmitBatch,
    tasks: Sequence[TaskSpec],
    where: Placement,
    instance: Optional[str],
) -> List[JobRecord]:
    """The records of the jobs of one batch that went in."""
    now = datetime.now(timezone.utc)
    resources, job = batch.resources, batch.job
    return [
        JobRecord(
            job_id=item.job_id,
            scheduler=where.scheduler,
            transport=where.transport,
            host=where.host,
            flux_uri=instance,
            job_name=job.name_of(item.index),
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
            script=tasks[item.index].script,
            log_path=item.log_path,
            exit_file=job.exit_file_for(item.index, batch.count),
            kind=item.kind,
            reach=where.reach,
        )
        for item in submitted
    ]


class Submission:
    """Plans, stages, sends and records the jobs of one ``Order``."""

    def __init__(
        self,
        driver: SchedulerDriver,
        stager: Stager,
        store: JobStore,
        placement: Placement,
        instance: Optional[str],
        statuses: Callable[[List[str]], Dict[str, Observation]],
        container_runtime: str = "ch-run",
    ) -> None:
        self.driver = driver
        self.stager = stager
        self.store = store
        self.placement = placement
        self.instance = instance  # recorded with each job (Flux: its URI)
        self.statuses = statuses  # ``SchedulerAdapter.observe``
        self.container_runtime = container_runtime

    def plan(
        self, order: Order, known: Optional[Mapping[str, JobStatus]] = None
    ) -> List[Tuple[Planned, List[TaskSpec]]]:
        """Every chunk as the driver will send it; raises before anything is staged."""
        chunk_size = self.driver.max_batch() if len(order.tasks) > 1 else 1
        if order.depends_on:  # the parents' rule loads only for an order that has parents
            from .parents import parents, refuse_unmet

            refuse_unmet(order.depends_on, parents(self.statuses, order.depends_on, known))
        return [
            (self.driver.plan(batch), chunk)
            for batch, chunk in batches(order, self.stager, chunk_size)
        ]

    def run(self, order: Order, known: Optional[Mapping[str, JobStatus]] = None) -> List[str]:
        """Submit every chunk; the ids in task order (``known``: as for ``parents``)."""
        self.store.check_writable()  # before anything is staged: no job goes in unrecorded
        plans = self.plan(order, known)
        launcher = self.driver.launcher(order.options)
        done: List[Submitted] = []
        offset = 0  # each chunk's indexes are its own; the caller's, the order's
        for planned, chunk in plans:
            try:
                done.extend(_shifted(self._send(planned, chunk, launcher), offset))
            except PartialSubmissionError as exc:
                went = done + _shifted(exc.submitted, offset)
                raise PartialSubmissionError(
                    went, exc.failures, len(order.tasks), exc.limited
                ) from exc
            except JobSubmissionError as exc:
                if not done:
                    if order.remote_dir is None and not isinstance(exc, SubmissionUncertainError):
                        # nothing went in: the folder made for it would pile up on a login node
                        self.stager.unstage(planned.batch.job.remote_dir)
                    raise
                limited = isinstance(exc, LimitRefusedError)
                raise PartialSubmissionError(done, [str(exc)], len(order.tasks), limited) from exc
            offset += len(chunk)
        ids = [item.job_id for item in done]
        folder = plans[0][0].batch.job.remote_dir
        log.info(
            "submitted %d %s job(s) (%s): %s", len(ids), self.placement.scheduler, folder, ids[0]
        )
        return ids

    def _send(self, planned: Planned, tasks: List[TaskSpec], launcher: str) -> List[Submitted]:
        batch = planned.batch
        array_variable = self.driver.capabilities.array_index_variable
        bundled = self.stager.bundle(batch.job, tasks)
        files = wrapper_files(
            batch.job, tasks, array_variable, self.running(batch, launcher), bundled
        )
        self.stager.stage(batch.job, tasks, files, bundled.keys())
        try:
            submitted = self.driver.submit_many(planned)
        except PartialSubmissionError as exc:
            self.record(exc.submitted, batch, tasks)
            raise
        self.record(submitted, batch, tasks)
        return submitted

    def running(self, batch: SubmitBatch, launcher: str) -> Running:
        """How the batch's wrapper runs its scripts (launcher, ``B:`` signal, container)."""
        image = batch.resources.container
        return Running(
            launcher,
            signal_forwarded(batch.resources.signal),
            container_words(self.container_runtime, image) if image else (),
            FOLDER_INSIDE[self.container_runtime] if image else "",
        )

    def record(
        self, submitted: Sequence[Submitted], batch: SubmitBatch, tasks: Sequence[TaskSpec]
    ) -> None:
        """Store jobs that went in at once (a crash loses none)."""
        self.store.add_many(job_records(submitted, batch, tasks, self.placement, self.instance))
