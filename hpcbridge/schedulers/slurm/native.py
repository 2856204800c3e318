"""The pyslurm driver: Slurm's C API in process, where it loads safely and matches, and
pyslurm's objects in our terms (written against pyslurm 25.11.2 on Slurm 25.11)."""

from __future__ import annotations

import logging
import os
import signal
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from ...engine.driver import (
    DriverChoice,
    NotAskedNow,
    Planned,
    SchedulerDriver,
    SubmitBatch,
    Submitted,
    choose_driver,
)
from ...engine.tracking import exit_code_from_file
from ...errors import JobSubmissionError, SchedulerUnavailableError
from ...model import JobStatus
from ...resources import format_slurm_time, signal_parts
from ...retrying import retry
from ...transports.base import Executor
from . import commands, pyslurm_loading
from .cli import SlurmCliDriver
from .commands import CAPABILITIES, NOT_FOUND, SubmitSpec, planned_spec, submit_batch, unknown
from .pyslurm_loading import (
    PYSLURM_SKIP_REASON,
    ensure_loadable,
    import_pyslurm,
    installed_pyslurm_version,
    versions_match,
    wanted_slurm_conf,
)
from .status import KEY_PREFIX, expand_array_spec, job_status, split_job_id

log = logging.getLogger("hpcbridge.slurm")


def build_native_driver(
    executor: Executor, cli: SlurmCliDriver, command_env: Optional[Mapping[str, str]] = None
) -> Tuple[SlurmNativeDriver, str]:
    """The pyslurm driver and why it is usable, or ``SchedulerUnavailableError`` saying why not.
    ``command_env``: the settings' environment for Slurm's commands (its ``SLURM_CONF``)."""
    if not executor.is_local:
        raise SchedulerUnavailableError(
            f"pyslurm talks to the local Slurm only; transport is {executor.kind}"
        )
    # The version comes from pyslurm's metadata: nothing is loaded for another Slurm.
    pyslurm_version = installed_pyslurm_version()
    if pyslurm_version is None:
        raise SchedulerUnavailableError(f"{PYSLURM_SKIP_REASON}: no module named 'pyslurm'")
    slurm_version = cli.version()
    if not versions_match(pyslurm_version, slurm_version):
        raise SchedulerUnavailableError(
            f"pyslurm {pyslurm_version} does not match Slurm {slurm_version or '?'}"
        )
    ensure_loadable(wanted_slurm_conf(command_env or {}, os.environ))
    try:
        pyslurm = import_pyslurm()
    except Exception as exc:  # ImportError, or an ABI mismatch at import time
        raise SchedulerUnavailableError(
            f"pyslurm not importable ({type(exc).__name__}: {exc})"
        ) from exc
    driver = SlurmNativeDriver(cli, pyslurm)
    return driver, f"pyslurm {pyslurm_version} matches Slurm {slurm_version}"


def choose_slurm_driver(
    requested: str,
    executor: Executor,
    cli: SlurmCliDriver,
    command_env: Optional[Mapping[str, str]] = None,
) -> Tuple[SchedulerDriver, DriverChoice]:
    """pyslurm when it is usable here, else ``cli`` (the rule of ``driver.choose_driver``)."""

    def native() -> Tuple[SlurmNativeDriver, str]:
        return build_native_driver(executor, cli, command_env)

    return choose_driver("slurm", requested, native=native, cli=lambda: cli)


class SlurmNativeDriver:
    """Slurm through pyslurm; cancels, sbatch-only submissions, config and version
    through the CLI driver."""

    name = "native"
    capabilities = CAPABILITIES

    def __init__(self, cli: SlurmCliDriver, pyslurm: Any) -> None:
        self.cli = cli
        self.pyslurm = pyslurm
        self._no_history_noted = False
        #: the environment sbatch would run with, beyond the process's (SLURM_CONF...)
        self.command_env: Dict[str, str] = {**cli.executor.env, **(cli.env or {})}
        #: job id -> the wrapper's exit-code file, for the jobs this driver submitted
        self._exit_files: Dict[str, str] = {}

    def plan(self, batch: SubmitBatch) -> Planned:
        return self.cli.plan(batch)

    def describe(self, planned: Planned) -> str:
        if planned.batch.resources.native_options("slurm"):
            return self.cli.describe(planned)
        kwargs = submit_description_kwargs(planned_spec(planned))
        fields = ", ".join(f"{key}={value!r}" for key, value in kwargs.items())
        return f"pyslurm.JobSubmitDescription({fields}).submit()"

    def submit_many(self, planned: Planned) -> List[Submitted]:
        # JobSubmitDescription takes only the fields it names: native options go through sbatch.
        native = planned.batch.resources.native_options("slurm")
        submit = self.cli.submit if native else self._submit_spec
        return self._remember(planned, submit_batch(planned, submit))

    def _remember(self, planned: Planned, submitted: List[Submitted]) -> List[Submitted]:
        """``submitted``, each job's exit-code file noted."""
        batch = planned.batch
        for item in submitted:
            self._exit_files[item.job_id] = batch.job.exit_file_for(item.index, batch.count)
        return submitted

    def _submit_spec(self, spec: SubmitSpec) -> str:
        # One task of a many-task wrapper goes through sbatch, its index the wrapper's argument.
        return self.cli.submit(spec) if spec.task_index is not None else self.submit(spec)

    def submit(self, spec: SubmitSpec) -> str:
        """One submission; its job id; a lost answer is looked for by its key."""
        return self.cli.adopting(spec, lambda: self._submit_once(spec))

    def _submit_once(self, spec: SubmitSpec) -> str:
        kwargs = submit_description_kwargs(spec)
        try:
            # pyslurm reads ``script`` as a file only when that path exists: pass the text.
            with open(spec.wrapper_path, encoding="utf-8") as wrapper:
                kwargs["script"] = wrapper.read()
        except OSError as exc:
            raise JobSubmissionError(f"cannot read the wrapper {spec.wrapper_path}: {exc}") from exc
        kwargs["environment"] = submit_environment(self.command_env)
        said: List[str] = []
        try:
            with pyslurm_loading.caught(said):
                job_id = self.pyslurm.JobSubmitDescription(**kwargs).submit()
        except Exception as exc:  # RPCError from Slurm; ValueError/TypeError from pyslurm's checks
            message = _with_libslurm(str(exc) or type(exc).__name__, said)
            _log_libslurm(said, logging.DEBUG)
            raise commands.refusal_error(message)(
                f"Slurm refused the job: {message}", scheduler_message=message
            ) from exc
        _log_libslurm(said)
        return str(job_id)

    @staticmethod
    def _quiet(call: Callable[[], Any]) -> Any:
        """``call()``, what libslurm writes to stderr logged (DEBUG), not shown."""
        said: List[str] = []
        try:
            with pyslurm_loading.caught(said):
                return call()
        finally:
            _log_libslurm(said, logging.DEBUG)

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """Every id: from slurmctld, else slurmdbd, else UNKNOWN."""
        ids = list(dict.fromkeys(job_ids))
        try:
            live = retry(
                lambda: self._quiet(self.pyslurm.Jobs.load),
                budget=self.cli.query_retries,
                retry_on=(Exception,),
                pause=1.0,
                backoff=2.0,
                max_pause=8.0,
                what="pyslurm.Jobs.load",
            )
        except Exception as exc:  # RPCError: slurmctld down or restarting, past the retries
            raise NotAskedNow(f"slurmctld query failed: {exc}") from exc
        answers = statuses_from_jobs(iter_jobs(live), ids)
        missing = [job_id for job_id in ids if job_id not in answers]
        if missing:
            answers.update(self.history(missing))
        self._unfold_exit_codes(answers)
        return {job_id: answers.get(job_id) or unknown(job_id, NOT_FOUND) for job_id in ids}

    def history(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """What slurmdbd remembers of these ids (nothing when accounting is off)."""
        bases = sorted({int(split_job_id(job_id)[0]) for job_id in job_ids})
        try:
            db = self.pyslurm.db
            jobs = self._quiet(lambda: db.Jobs.load(db.JobFilter(ids=bases)))
        except Exception as exc:  # RPCError; no slurmdbd (accounting off)
            if not self._no_history_noted:
                self._no_history_noted = True
                log.info("pyslurm: no job history from slurmdbd: %s", exc)
            return {}
        return statuses_from_jobs(iter_jobs(jobs), job_ids, history=True)

    def _unfold_exit_codes(self, answers: Dict[str, JobStatus]) -> None:
        """Exit codes pyslurm folded (143 -> 15): the exit-code file's, else the CLI's."""
        unresolved: List[str] = []
        for job_id in [job_id for job_id, status in answers.items() if may_be_folded(status)]:
            unfolded_status = unfolded(answers[job_id], self._recorded_exit_code(job_id))
            if unfolded_status is None:
                unresolved.append(job_id)
            else:
                answers[job_id] = unfolded_status
        if not unresolved:
            return
        try:
            from_cli = self.cli.query(unresolved)
        except NotAskedNow:
            return  # pyslurm's codes stand until a later round
        for job_id in unresolved:
            found = unfolded(answers[job_id], from_cli[job_id].exit_code)
            answers[job_id] = found or answers[job_id]

    def _recorded_exit_code(self, job_id: str) -> Optional[int]:
        path = self._exit_files.get(job_id)
        if path is None:
            return None
        try:
            with open(path, encoding="utf-8") as recorded:
                return exit_code_from_file(recorded.read())
        except OSError:
            return None

    def cancel(self, job_ids: Sequence[str]) -> None:
        # pyslurm's Job(id).cancel() returns None for a running, ended and unknown id alike,
        # and takes no array task ids: scancel.
        self.cli.cancel(job_ids)

    def find_output(self, job_id: str) -> Optional[str]:
        base, task = split_job_id(job_id)
        if task is not None:
            return self.cli.find_output(job_id)
        try:
            job = self._quiet(lambda: self.pyslurm.Job.load(int(base)))
        except Exception:  # RPCError: Invalid job id specified
            return None
        path = getattr(job, "standard_output", None)
        return str(path) if path else None

    def find_submitted(
        self, planned: Planned, since: Optional[float] = None
    ) -> Optional[List[Submitted]]:
        found = self.cli.find_submitted(planned, since)
        return None if found is None else self._remember(planned, found)

    def queue_limit(self, account: Optional[str] = None, *, ask: bool = True) -> Optional[int]:
        # pyslurm.db.Associations asks slurmdbd as sacctmgr does: the CLI driver reads and keeps it.
        return self.cli.queue_limit(account, ask=ask)

    def max_batch(self) -> int:
        return self.cli.max_batch()

    def waiter(self, job_ids: Sequence[str]) -> None:
        return None  # no job events: the adapter sleeps between rounds

    def close(self) -> None:
        """Nothing to release: pyslurm keeps no connection open."""


def _with_libslurm(message: str, said: Sequence[str]) -> str:
    """pyslurm's error with libslurm's own words for it, where they add to it."""
    extra = [line for line in said if line and line not in message]
    return f"{message} ({'; '.join(extra)})" if extra else message


def _log_libslurm(said: Sequence[str], level: int = logging.INFO) -> None:
    for line in said:
        log.log(level, "libslurm: %s", line)


def submit_environment(command_env: Mapping[str, str]) -> Dict[str, str]:
    """The job's environment as sbatch's default ``--export=ALL`` would pass it on."""
    return {**os.environ, **command_env}


# -- pyslurm's objects, pure -------------------------------------------------------


def submit_description_kwargs(spec: SubmitSpec) -> Dict[str, Any]:
    """``pyslurm.JobSubmitDescription`` keyword arguments: ``commands.sbatch_argv``'s
    request in pyslurm's names."""
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
        "memory_per_cpu": resources.mem_per_cpu,
        "gpus": resources.gpus or None,  # omitted when 0, as with sbatch
        "gpus_per_task": resources.gpus_per_task or None,
        # pyslurm has no gpus_per_node: --gpus-per-node and --gres both set tres_per_node
        "gres_per_node": gres_counts(resources.gres, resources.gpus_per_node),
        "resource_sharing": "exclusive" if resources.exclusive else None,
        "reservations": [resources.reservation] if resources.reservation else None,
        "signal": warning_signal(resources.signal),
        "is_requeueable": resources.requeue,
        "begin_time": int(resources.begin) if resources.begin is not None else None,
        "array": spec.array,
        "comment": f"{KEY_PREFIX}{spec.key}" if spec.key else None,
    }
    kwargs.update({key: value for key, value in optional.items() if value is not None})
    dependency = commands.dependency_text(spec.depends_on)
    if dependency:
        kwargs["dependencies"] = dependency
        kwargs["kill_on_invalid_dependency"] = True  # see commands.sbatch_argv
    return kwargs


def gres_counts(gres: Optional[str], gpus_per_node: Optional[int]) -> Optional[Dict[str, int]]:
    """``--gres`` (and ``--gpus-per-node``) as pyslurm's ``gres_per_node``: ``{"gpu:a100": 2}``;
    a generic resource without a count asks for one, as in sbatch."""
    counts: Dict[str, int] = {}
    for item in (gres or "").split(","):
        if item:
            name, _, count = item.rpartition(":")
            if not count.isdigit():
                name, count = item, "1"
            counts[name] = int(count)
    if gpus_per_node:
        counts["gpu"] = gpus_per_node
    return counts or None


def warning_signal(text: Optional[str]) -> Optional[Dict[str, Any]]:
    """``--signal`` as pyslurm takes it: a dict with the signal's number (pyslurm's own
    parser refuses a bare ``USR1``)."""
    if text is None:
        return None
    name, seconds = signal_parts(text)
    found: Dict[str, Any] = {"signal": int(signal.Signals["SIG" + name])}
    if seconds is not None:
        found["time"] = seconds
    if text.startswith("B:"):
        found["batch_only"] = True
    return found


def timestamp(value: Any) -> Optional[datetime]:
    """pyslurm gives unix timestamps (int) or None; 0 means unset."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.astimezone()
    try:
        seconds = int(value)
    except (TypeError, ValueError):
        return None
    return datetime.fromtimestamp(seconds).astimezone() if seconds > 0 else None


def job_ids_of(job: Any) -> List[str]:
    """The ids a pyslurm job (live or database) answers to; an array's waiting rest
    (``array_tasks_waiting``) to each of its tasks."""
    raw = str(getattr(job, "id", "") or "")
    array_id = getattr(job, "array_id", None)
    task_id = getattr(job, "array_task_id", None)
    waiting = getattr(job, "array_tasks_waiting", None)
    if array_id and task_id is not None:
        return [f"{array_id}_{task_id}"]
    if array_id and waiting:
        return [f"{array_id}_{index}" for index in waiting_indices(str(waiting))]
    if array_id:
        # pyslurm reads an array_task_id of 0 as "no value": such a record is task 0.
        return [f"{array_id}_0"]
    return [raw] if raw else []


def waiting_indices(text: str) -> List[int]:
    """The task indices of an array's waiting rest: ``3-6``, or (pyslurm 25.11's ``db.Job``,
    slurmdbd's array_task_str) a hex bitmap, ``0x3`` for tasks 0 and 1."""
    text = text.strip()
    if text.lower().startswith("0x"):
        try:
            mask = int(text, 16)
        except ValueError:
            return []
        return [index for index in range(mask.bit_length()) if mask >> index & 1]
    return expand_array_spec(text)


def exit_code_of(job: Any) -> Optional[int]:
    """The exit code as the CLI driver gives it (a signal as 128+N), as far as pyslurm tells."""
    # pyslurm folds an exit status of 128 or more down by 128 (143 -> 15): see may_be_folded.
    signal_number = getattr(job, "exit_code_signal", None) or 0
    code = getattr(job, "exit_code", None)
    if signal_number:
        return 128 + int(signal_number)
    return int(code) if code is not None else None


def status_from_job(job: Any, job_id: Optional[str] = None) -> JobStatus:
    """A ``JobStatus`` from a ``pyslurm.Job`` or ``pyslurm.db.Job``."""
    ids = job_ids_of(job)
    raw = str(getattr(job, "id", ""))
    return job_status(
        job_id or (ids[0] if ids else raw),
        str(getattr(job, "state", "") or ""),
        exit_code_of(job),
        timestamp(getattr(job, "start_time", None)),
        timestamp(getattr(job, "end_time", None)),
        str(getattr(job, "state_reason", "") or ""),
        raw,
    )


def may_be_folded(status: JobStatus) -> bool:
    """Whether pyslurm may have folded this end's exit code (143 -> 15, 128 -> 0): any
    code under 128 but a COMPLETED 0."""
    code = status.exit_code
    return (
        code is not None
        and code < 128
        and not (code == 0 and status.native_state.startswith("COMPLETED"))
    )


def unfolded(status: JobStatus, recorded: Optional[int]) -> Optional[JobStatus]:
    """The status with the code ``recorded`` elsewhere (the wrapper's file, sacct) where
    that is the folded one's; ``None`` when it does not settle it."""
    if recorded is None or status.exit_code is None or recorded % 128 != status.exit_code:
        return None
    return status.with_(exit_code=recorded)


def iter_jobs(collection: Any) -> Iterator[Any]:
    """Jobs of a pyslurm collection: a dict, a multi-cluster map or a list."""
    values = getattr(collection, "values", None)
    items: Iterable[Any] = values() if callable(values) else collection
    for item in items:
        if isinstance(item, dict):  # {cluster: {id: job}}
            yield from iter_jobs(item)
        else:
            yield item


def statuses_from_jobs(
    jobs: Iterable[Any], wanted: Sequence[str], history: bool = False
) -> Dict[str, JobStatus]:
    """The status of every wanted id these jobs answer to; a record naming its task wins
    over one covering it with a range. ``history`` (slurmdbd's records): an array's own
    record answers for each wanted task of it that no record names."""
    # slurmdbd keeps one record for the tasks cancelled before they started; slurmctld
    # drops a task's record MinJobAge after it ended while the others stay.
    wanted_set = set(wanted)
    found: Dict[str, JobStatus] = {}
    named: set = set()
    whole: Dict[str, Any] = {}
    for job in jobs:
        ids = job_ids_of(job)
        raw = str(getattr(job, "id", "") or "")
        array_id = str(getattr(job, "array_id", "") or "")
        if raw and raw not in ids and array_id and raw != array_id:
            ids.append(raw)  # a running array task also answers to its own id
        own = getattr(job, "array_task_id", None) is not None or not array_id
        if history and getattr(job, "array_task_id", None) is None and raw == (array_id or raw):
            whole[raw] = job
        for job_id in ids:
            if job_id not in wanted_set or (not own and job_id in named):
                continue
            found[job_id] = status_from_job(job, job_id)
            if own:
                named.add(job_id)
    for job_id in wanted:
        base, _, task = job_id.partition("_")
        if task and job_id not in found and base in whole:
            found[job_id] = status_from_job(whole[base], job_id)
    return found
