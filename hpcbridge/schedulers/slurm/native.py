"""The pyslurm driver: Slurm's C API in process, where it imports and matches.

Written against pyslurm's documented API (``JobSubmitDescription(...).submit()``,
``Job.load``/``Jobs.load``, ``db.Jobs.load(db.JobFilter(ids=...))``,
``Job(id).cancel()``, ``RPCError``).  pyslurm links against one Slurm major
release and its version says which (``24.5.1`` is for Slurm 24.05): with any
other Slurm it is not used.  The mapping code (a submission -> description
fields, a pyslurm job -> ``JobStatus``) is pure and tested everywhere; the
driver itself only where pyslurm imports.
"""

from __future__ import annotations

import importlib
import logging
from datetime import datetime
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Type

from ...durations import format_slurm_time
from ...errors import JobSubmissionError, SchedulerAdapterError, SchedulerUnavailableError
from ...model import JobStatus
from ...transports.base import Executor
from ..driver import (
    DriverChoice,
    SchedulerDriver,
    SubmitBatch,
    Submitted,
    choose_driver,
    unreachable,
)
from .batches import CAPABILITIES, NOT_FOUND, spec_for, submit_batch, unknown
from .cli import SlurmCliDriver
from .control import parse_version
from .ids import expand_array_spec, split_job_id
from .messages import job_already_ended
from .states import map_state
from .submission import SubmitSpec, dependency_text

log = logging.getLogger("hpcbridge.slurm")

#: why the real-driver tests skip here
PYSLURM_SKIP_REASON = "pyslurm not importable (PyPI has it only for Slurm 25.11)"


# -- pure mapping ------------------------------------------------------------------


def submit_description_kwargs(spec: SubmitSpec) -> Dict[str, Any]:
    """``pyslurm.JobSubmitDescription`` keyword arguments for one submission.

    The same request as ``submission.sbatch_argv``, in pyslurm's names
    (``partitions`` is plural; ``--mem`` is ``memory_per_node``).
    """
    resources = spec.resources
    kwargs: Dict[str, Any] = {
        "script": spec.wrapper_path,
        "working_directory": spec.workdir,
        "standard_output": spec.output,
        "name": spec.job_name,
    }
    optional = {
        "partitions": resources.partition,
        "qos": resources.qos,
        "account": resources.account,
        "constraints": resources.constraint,
        "time_limit": format_slurm_time(resources.time) if resources.time is not None else None,
        "nodes": resources.nodes,
        "ntasks": resources.ntasks,
        "cpus_per_task": resources.cpus_per_task,
        "memory_per_node": resources.mem,
        "gpus": resources.gpus or None,  # omitted when 0, as with sbatch
        "array": spec.array,
    }
    kwargs.update({key: value for key, value in optional.items() if value is not None})
    dependency = dependency_text(spec.depends_on)
    if dependency:
        kwargs["dependencies"] = dependency
        kwargs["kill_on_invalid_dependency"] = True  # see submission.sbatch_argv
    return kwargs


def _timestamp(value: Any) -> Optional[datetime]:
    """pyslurm gives unix timestamps (int) or None; 0 means unset."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.astimezone()
    try:
        seconds = int(value)
    except (TypeError, ValueError):
        return None
    if seconds <= 0:
        return None
    return datetime.fromtimestamp(seconds).astimezone()


def job_ids_of(job: Any) -> List[str]:
    """The ids a pyslurm job (live or database) answers to.

    An array task is ``ARRAY_TASK``; the pending rest of an array is one
    record with ``array_tasks_waiting`` (``"3-6"``), expanded to every task.
    """
    raw = str(getattr(job, "id", "") or "")
    array_id = getattr(job, "array_id", None)
    task_id = getattr(job, "array_task_id", None)
    waiting = getattr(job, "array_tasks_waiting", None)
    if array_id and task_id is not None:
        return [f"{array_id}_{task_id}"]
    if array_id and waiting:
        return [f"{array_id}_{index}" for index in expand_array_spec(str(waiting))]
    return [raw] if raw else []


def status_from_job(job: Any, job_id: Optional[str] = None) -> JobStatus:
    """A ``JobStatus`` from a ``pyslurm.Job`` or ``pyslurm.db.Job``."""
    native = str(getattr(job, "state", "") or "")
    state = map_state(native)
    exit_code: Optional[int] = None
    if state.is_terminal:
        signal = getattr(job, "exit_code_signal", None) or 0
        code = getattr(job, "exit_code", None)
        exit_code = 128 + int(signal) if signal else (int(code) if code is not None else None)
    reason = str(getattr(job, "state_reason", "") or "")
    ids = job_ids_of(job)
    return JobStatus(
        job_id=job_id or (ids[0] if ids else str(getattr(job, "id", ""))),
        state=state,
        exit_code=exit_code,
        start_time=_timestamp(getattr(job, "start_time", None)) if state.rank >= 1 else None,
        end_time=_timestamp(getattr(job, "end_time", None)) if state.is_terminal else None,
        native_state=native,
        reason="" if reason in ("None", "(null)") else reason,
        extra={"raw_id": str(getattr(job, "id", ""))},
    )


def iter_jobs(collection: Any) -> Iterator[Any]:
    """Jobs of a pyslurm collection: a dict, a multi-cluster map or a list."""
    values = getattr(collection, "values", None)
    items: Iterable[Any] = values() if callable(values) else collection
    for item in items:
        if isinstance(item, dict):  # {cluster: {id: job}}
            yield from iter_jobs(item)
        else:
            yield item


def statuses_from_jobs(jobs: Iterable[Any], wanted: Sequence[str]) -> Dict[str, JobStatus]:
    wanted_set = set(wanted)
    found: Dict[str, JobStatus] = {}
    for job in jobs:
        ids = job_ids_of(job)
        raw = str(getattr(job, "id", "") or "")
        array_id = str(getattr(job, "array_id", "") or "")
        if (
            raw
            and raw not in ids
            and getattr(job, "array_task_id", None) is not None
            and raw != array_id
        ):
            ids.append(raw)  # a running array task also answers to its own id
        for job_id in ids:
            if job_id in wanted_set:
                found[job_id] = status_from_job(job, job_id)
    return found


def major_minor(version: Optional[str]) -> Optional[Tuple[int, int]]:
    parsed = parse_version(version or "")
    return (parsed[0], parsed[1]) if parsed and len(parsed) >= 2 else None


def versions_match(pyslurm_version: Optional[str], slurm_version: Optional[str]) -> bool:
    """pyslurm ``X.Y.Z`` is built for Slurm ``X.Y`` (``24.5.1`` ~ ``24.05.4``)."""
    ours, theirs = major_minor(pyslurm_version), major_minor(slurm_version)
    return ours is not None and ours == theirs


# -- building the driver -------------------------------------------------------------


def import_pyslurm() -> Any:
    return importlib.import_module("pyslurm")


def build_native_driver(executor: Executor, cli: SlurmCliDriver) -> SlurmNativeDriver:
    """The pyslurm driver, or ``SchedulerUnavailableError`` saying why not."""
    if not executor.is_local:
        raise SchedulerUnavailableError(
            f"pyslurm talks to the local Slurm only; transport is {executor.kind}"
        )
    try:
        pyslurm = import_pyslurm()
    except Exception as exc:  # ImportError, or an ABI mismatch at import time
        raise SchedulerUnavailableError(
            f"pyslurm not importable ({type(exc).__name__}: {exc})"
        ) from exc
    pyslurm_version = str(getattr(pyslurm, "__version__", "") or "")
    slurm_version = cli.version()
    if not versions_match(pyslurm_version, slurm_version):
        raise SchedulerUnavailableError(
            f"pyslurm {pyslurm_version or '?'} does not match Slurm {slurm_version or '?'}"
        )
    return SlurmNativeDriver(
        cli, pyslurm, choice_reason=f"pyslurm {pyslurm_version} matches Slurm {slurm_version}"
    )


def choose_slurm_driver(
    requested: str, executor: Executor, cli: SlurmCliDriver
) -> Tuple[SchedulerDriver, DriverChoice]:
    """pyslurm when it is usable here, else ``cli`` (the rule of ``driver.choose_driver``)."""
    native = lambda: build_native_driver(executor, cli)  # noqa: E731 - a deferred build
    return choose_driver("slurm", requested, native=native, cli=lambda: cli)


# -- the driver --------------------------------------------------------------------


class SlurmNativeDriver:
    """Slurm through pyslurm; array-task cancels, one-task-at-a-time submissions,
    config and version through the CLI."""

    name = "native"
    capabilities = CAPABILITIES

    def __init__(self, cli: SlurmCliDriver, pyslurm: Any, choice_reason: str = "") -> None:
        self.cli = cli
        self.pyslurm = pyslurm
        #: why this driver was chosen (for describe and doctor)
        self.choice_reason = choice_reason or "pyslurm usable"
        #: "no job history from slurmdbd" is logged once per driver
        self._no_history_noted = False

    def _rpc_error(self) -> Type[BaseException]:
        error = getattr(self.pyslurm, "RPCError", None)
        if isinstance(error, type) and issubclass(error, BaseException):
            return error
        return RuntimeError

    def describe(self, batch: SubmitBatch) -> str:
        kwargs = submit_description_kwargs(spec_for(batch))
        fields = ", ".join(f"{key}={value!r}" for key, value in kwargs.items())
        return f"pyslurm.JobSubmitDescription({fields}).submit()"

    def submit_many(self, batch: SubmitBatch) -> List[Submitted]:
        return submit_batch(batch, self._submit_spec)

    def _submit_spec(self, spec: SubmitSpec) -> str:
        # One task of a many-task wrapper goes in through sbatch: its --export=ALL,VAR=i
        # adds the index to the submitting environment.
        return self.cli.submit(spec) if spec.task_index is not None else self.submit(spec)

    def submit(self, spec: SubmitSpec) -> str:
        """One submission; its job id."""
        description = self.pyslurm.JobSubmitDescription(**submit_description_kwargs(spec))
        try:
            job_id = description.submit()
        except self._rpc_error() as exc:
            message = str(exc)
            raise JobSubmissionError(
                f"Slurm refused the job: {message}", scheduler_message=message
            ) from exc
        return str(job_id)

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """Every id: from slurmctld, else slurmdbd, else UNKNOWN."""
        ids = list(dict.fromkeys(job_ids))
        try:
            live = self.pyslurm.Jobs.load()
        except self._rpc_error() as exc:
            reason = f"slurmctld query failed: {exc}"
            return {job_id: unreachable(job_id, reason) for job_id in ids}
        answers = statuses_from_jobs(iter_jobs(live), ids)
        missing = [job_id for job_id in ids if job_id not in answers]
        if missing:
            answers.update(self.history(missing))
        return {job_id: answers.get(job_id) or unknown(job_id, NOT_FOUND) for job_id in ids}

    def history(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """What slurmdbd remembers of these ids (nothing when accounting is off)."""
        bases = sorted({int(split_job_id(job_id)[0]) for job_id in job_ids})
        try:
            db = self.pyslurm.db
            jobs = db.Jobs.load(db.JobFilter(ids=bases))
        except Exception as exc:  # RPCError; no slurmdbd (accounting off)
            if not self._no_history_noted:
                self._no_history_noted = True
                log.info("pyslurm: no job history from slurmdbd: %s", exc)
            return {}
        return statuses_from_jobs(iter_jobs(jobs), job_ids)

    def cancel(self, job_ids: Sequence[str]) -> None:
        plain = [job_id for job_id in job_ids if split_job_id(job_id)[1] is None]
        tasks = [job_id for job_id in job_ids if job_id not in plain]
        for job_id in plain:
            try:
                self.pyslurm.Job(int(job_id)).cancel()
            except self._rpc_error() as exc:
                if not job_already_ended(str(exc)):
                    raise SchedulerAdapterError(f"cancel of job {job_id} failed: {exc}") from exc
        # A pending array task has no job record of its own yet: scancel
        # takes ARRAY_TASK ids, pyslurm's Job(id) does not.
        self.cli.cancel(tasks)

    def find_output(self, job_id: str) -> Optional[str]:
        base, task = split_job_id(job_id)
        if task is not None:
            return self.cli.find_output(job_id)
        try:
            job = self.pyslurm.Job.load(int(base))
        except self._rpc_error():
            return None
        path = getattr(job, "standard_output", None)
        return str(path) if path else None

    def max_batch(self) -> int:
        return self.cli.max_batch()

    def waiter(self, job_ids: Sequence[str]) -> None:
        """pyslurm has no job events to wait on: the adapter sleeps between rounds."""
        return None

    def close(self) -> None:
        """Nothing to release: pyslurm keeps no connection open."""
