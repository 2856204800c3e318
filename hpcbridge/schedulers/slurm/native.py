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
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Type

from ...durations import format_slurm_time
from ...errors import JobSubmissionError, SchedulerAdapterError
from ...model import JobState, JobStatus
from ...transports.base import Executor
from ...transports.local import LocalExecutor
from . import commands
from .cli import SlurmCliDriver, log_once

log = logging.getLogger("hpcbridge.slurm")

#: why the real-driver tests skip here
PYSLURM_SKIP_REASON = "pyslurm not importable (PyPI has it only for Slurm 25.11)"


# -- pure mapping ------------------------------------------------------------------


def submit_description_kwargs(spec: commands.SubmitSpec) -> Dict[str, Any]:
    """``pyslurm.JobSubmitDescription`` keyword arguments for one submission.

    The same request as ``commands.sbatch_argv``, in pyslurm's names
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
    dependency = commands.dependency_text(spec.depends_on)
    if dependency:
        kwargs["dependencies"] = dependency
        kwargs["kill_on_invalid_dependency"] = True  # see commands.sbatch_argv
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
        return [f"{array_id}_{index}" for index in commands.expand_array_spec(str(waiting))]
    return [raw] if raw else []


def status_from_job(job: Any, job_id: Optional[str] = None) -> JobStatus:
    """A ``JobStatus`` from a ``pyslurm.Job`` or ``pyslurm.db.Job``."""
    native = str(getattr(job, "state", "") or "")
    state = commands.map_state(native)
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
    parsed = commands.parse_version(version or "")
    return (parsed[0], parsed[1]) if parsed and len(parsed) >= 2 else None


def versions_match(pyslurm_version: Optional[str], slurm_version: Optional[str]) -> bool:
    """pyslurm ``X.Y.Z`` is built for Slurm ``X.Y`` (``24.5.1`` ~ ``24.05.4``)."""
    ours, theirs = major_minor(pyslurm_version), major_minor(slurm_version)
    return ours is not None and ours == theirs


# -- choosing a driver --------------------------------------------------------------


@dataclass(frozen=True)
class DriverChoice:
    name: str  # "native" or "cli"
    reason: str
    pyslurm_version: Optional[str] = None
    slurm_version: Optional[str] = None


def import_pyslurm() -> Any:
    return importlib.import_module("pyslurm")


def choose_driver(requested: str, executor: Executor, cli: SlurmCliDriver) -> DriverChoice:
    """Which driver to use, and why (for the log and ``hpcbridge doctor``)."""
    requested = (requested or "auto").lower()
    if requested not in ("auto", "native", "cli"):
        raise ValueError(f"unknown Slurm driver {requested!r}; choose auto, native or cli")
    if requested == "cli":
        return DriverChoice("cli", "the CLI driver was asked for")
    if not isinstance(executor, LocalExecutor):
        return DriverChoice(
            "cli", f"pyslurm talks to the local Slurm only; transport is {executor.kind}"
        )
    try:
        pyslurm = import_pyslurm()
    except Exception as exc:  # ImportError, or an ABI mismatch at import time
        return DriverChoice("cli", f"pyslurm not importable ({type(exc).__name__}: {exc})")
    pyslurm_version = str(getattr(pyslurm, "__version__", "") or "")
    slurm_version = cli.version()
    if not versions_match(pyslurm_version, slurm_version):
        return DriverChoice(
            "cli",
            f"pyslurm {pyslurm_version or '?'} does not match Slurm {slurm_version or '?'}",
            pyslurm_version,
            slurm_version,
        )
    return DriverChoice(
        "native",
        f"pyslurm {pyslurm_version} matches Slurm {slurm_version}",
        pyslurm_version,
        slurm_version,
    )


# -- the driver --------------------------------------------------------------------


class SlurmNativeDriver:
    """Slurm through pyslurm; array tasks and config still go through the CLI."""

    name = "native"

    def __init__(self, cli: SlurmCliDriver, pyslurm: Any = None) -> None:
        self.cli = cli
        self.pyslurm = pyslurm if pyslurm is not None else import_pyslurm()

    def _rpc_error(self) -> Type[BaseException]:
        error = getattr(self.pyslurm, "RPCError", None)
        if isinstance(error, type) and issubclass(error, BaseException):
            return error
        return RuntimeError

    def describe(self, spec: commands.SubmitSpec) -> str:
        fields = ", ".join(
            f"{key}={value!r}" for key, value in submit_description_kwargs(spec).items()
        )
        return f"pyslurm.JobSubmitDescription({fields}).submit()"

    def submit(self, spec: commands.SubmitSpec) -> str:
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
        ids = list(dict.fromkeys(job_ids))
        try:
            live = self.pyslurm.Jobs.load()
        except self._rpc_error() as exc:
            reason = f"slurmctld query failed: {exc}"
            return {job_id: JobStatus(job_id, JobState.UNKNOWN, reason=reason) for job_id in ids}
        answers = statuses_from_jobs(iter_jobs(live), ids)
        missing = [job_id for job_id in ids if job_id not in answers]
        if missing:
            answers.update(self.history(missing))
        return answers

    def history(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        bases = sorted({int(commands.split_job_id(job_id)[0]) for job_id in job_ids})
        try:
            db = self.pyslurm.db
            jobs = db.Jobs.load(db.JobFilter(ids=bases))
        except Exception as exc:  # RPCError; no slurmdbd (accounting off)
            log_once("native-no-history", "pyslurm: no job history from slurmdbd: %s", exc)
            return {}
        return statuses_from_jobs(iter_jobs(jobs), job_ids)

    def cancel(self, job_ids: Sequence[str]) -> None:
        plain = [job_id for job_id in job_ids if commands.split_job_id(job_id)[1] is None]
        tasks = [job_id for job_id in job_ids if job_id not in plain]
        for job_id in plain:
            try:
                self.pyslurm.Job(int(job_id)).cancel()
            except self._rpc_error() as exc:
                if not commands.is_invalid_job_id(str(exc)) and "already" not in str(exc).lower():
                    raise SchedulerAdapterError(f"cancel of job {job_id} failed: {exc}") from exc
        # A pending array task has no job record of its own yet: scancel
        # takes ARRAY_TASK ids, pyslurm's Job(id) does not.
        self.cli.cancel(tasks)

    def output_path(self, job_id: str) -> Optional[str]:
        base, task = commands.split_job_id(job_id)
        if task is not None:
            return self.cli.output_path(job_id)
        try:
            job = self.pyslurm.Job.load(int(base))
        except self._rpc_error():
            return None
        path = getattr(job, "standard_output", None)
        return str(path) if path else None

    def max_array_size(self) -> int:
        return self.cli.max_array_size()
