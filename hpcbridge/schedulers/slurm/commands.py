"""Slurm's job commands as hpcbridge writes them, and what their answers mean. Pure, no I/O.

sbatch (a ``SubmitBatch`` as Slurm jobs, shared by both drivers), scancel, and Slurm's
messages; squeue and sacct's states are ``status``'s (asked by ``queries``), what the
cluster says of itself ``cluster``'s, native options ``options``'."""

from __future__ import annotations

import logging
import re
import shlex
from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, Type

from ...engine.driver import (
    Again,
    Capabilities,
    PartialSubmissionError,
    Planned,
    Reply,
    SubmitBatch,
    Submitted,
)
from ...errors import (
    JobSubmissionError,
    LimitRefusedError,
    SchedulerAdapterError,
    SubmissionUncertainError,
)
from ...request.begins import format_begin
from ...resources import Resources, format_slurm_time
from .ids import KEY_PREFIX, normalize_job_id

log = logging.getLogger("hpcbridge.slurm")


# -- messages ------------------------------------------------------------

_PREFIX = re.compile(
    r"^(?:sbatch|squeue|sacct|scancel|scontrol|srun|salloc):\s*(?:error|fatal):\s*"
)

#: sbatch messages after which the job may exist although sbatch failed
UNCERTAIN_SUBMISSION = ("Socket timed out on send/recv operation",)
#: the controller is busy, restarting or rate-limiting: worth asking again soon
TRANSIENT = (
    "Socket timed out on send/recv operation",
    "Unable to contact slurm controller",
    "Resource temporarily unavailable",
    "Rate limit exceeded",
    "Zero Bytes were transmitted or received",
    "Transport endpoint is not connected",
)
#: ... of which these mean that a request never reached it (so sending it again is safe)
NEVER_REACHED = (
    "Unable to contact slurm controller (connect failure)",
    "Rate limit exceeded",
)
#: sbatch's words for a job refused by a cap on queued jobs (the reason codes, and
#: ESLURM_ACCOUNTING_POLICY's message when it names no code)
LIMIT_REFUSED = ("MaxSubmitJob", "GrpSubmitJob", "job submit limit")


def scheduler_message(text: str) -> str:
    """Slurm's own words: ``sbatch: error: `` prefixes stripped, warnings dropped when
    errors are present."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [_PREFIX.sub("", line) for line in lines if _PREFIX.match(line)]
    return "; ".join(errors or lines)


def transient(message: str) -> bool:
    """A failure of the controller (busy, restarting, rate limiting), not of the request."""
    return any(text in message for text in TRANSIENT)


def never_reached(message: str) -> bool:
    """sbatch failed before its request reached the controller (no job exists)."""
    return any(text in message for text in NEVER_REACHED)


def submission_uncertain(message: str) -> bool:
    """sbatch failed, yet the job may have been created."""
    return any(text in message for text in UNCERTAIN_SUBMISSION)


def arrays_refused(message: str) -> bool:
    """sbatch's answer where job arrays are not allowed ("Invalid job array specification"
    past MaxArraySize; site submit filters name them too)."""
    return "array" in message.lower()


def is_invalid_job_id(message: str) -> bool:
    """squeue's and scontrol's answer for a single purged or unknown id."""
    return "Invalid job id specified" in message


def job_already_ended(message: str) -> bool:
    """scancel's (or pyslurm's) words for a job that is unknown or has ended."""
    return all(
        is_invalid_job_id(line) or "completed" in line.lower() or "already" in line.lower()
        for line in message.split("; ")
    )


def refusal_error(message: str) -> Type[JobSubmissionError]:
    """The error a refused submission raises, for both drivers: uncertain (the job may
    exist), a cap on queued jobs met (a sweep waits and feeds the rest), else refused."""
    if submission_uncertain(message):
        return SubmissionUncertainError
    if any(text in message for text in LIMIT_REFUSED):
        return LimitRefusedError
    return JobSubmissionError


# -- sbatch --------------------------------------------------------------


@dataclass(frozen=True)
class SubmitSpec:
    """One sbatch call, scheduler-side paths already decided."""

    wrapper_path: str
    workdir: str
    output: str
    job_name: str
    resources: Resources
    depends_on: Tuple[str, ...] = ()
    #: ``"0-199"`` for a job array, else ``None``
    array: Optional[str] = None
    #: the task a many-task wrapper runs when submitted as a plain job
    task_index: Optional[int] = None
    #: kept by Slurm as the job's comment: what finds the job when sbatch's answer is lost
    key: str = ""


#: what sbatch's ``--mem`` takes: a whole number with an optional unit
_SLURM_MEM = re.compile(r"^\d+[KMGT]?$")


def check_mem(mem: Optional[str]) -> None:
    """``ValueError`` for a memory sbatch refuses (pyslurm would take ``1.5G``: both refuse)."""
    if mem is not None and not _SLURM_MEM.match(mem):
        raise ValueError(f"invalid mem {mem!r}: Slurm takes a whole number with K, M, G or T")


def dependency_text(depends_on: Iterable[str]) -> Optional[str]:
    ids = [normalize_job_id(job_id) for job_id in depends_on]
    return "afterok:" + ":".join(ids) if ids else None


def _resource_flags(resources: Resources) -> List[str]:
    begin = format_begin(resources.begin) if resources.begin is not None else None
    flags = [
        ("partition", resources.partition),
        ("qos", resources.qos),
        ("account", resources.account),
        ("constraint", resources.constraint),
        ("time", format_slurm_time(resources.time) if resources.time is not None else None),
        ("nodes", resources.nodes),
        ("ntasks", resources.ntasks),
        ("cpus-per-task", resources.cpus_per_task),
        ("mem", resources.mem),
        ("mem-per-cpu", resources.mem_per_cpu),
        # GPU counts are omitted when 0: --gpus=0 is refused on clusters without GRES
        ("gpus", resources.gpus or None),
        ("gpus-per-node", resources.gpus_per_node or None),
        ("gpus-per-task", resources.gpus_per_task or None),
        ("gres", resources.gres),
        ("reservation", resources.reservation),
        ("signal", resources.signal),
        ("begin", begin),
    ]
    argv = [f"--{name}={value}" for name, value in flags if value is not None and value != ""]
    if resources.exclusive:
        argv.append("--exclusive")
    if resources.requeue is not None:
        argv.append("--requeue" if resources.requeue else "--no-requeue")
    # the user's own sbatch options, checked (check_native) before anything was staged
    argv.extend(resources.native_options("slurm"))
    return argv


def sbatch_argv(spec: SubmitSpec) -> List[str]:
    """``sbatch --parsable`` with every directive as a flag (the wrapper has no ``#SBATCH``
    lines), then the wrapper."""
    argv = ["sbatch", "--parsable", *_resource_flags(spec.resources)]
    argv.append(f"--job-name={spec.job_name}")
    argv.append(f"--output={spec.output}")
    argv.append(f"--chdir={spec.workdir}")
    if spec.key:
        argv.append(f"--comment={KEY_PREFIX}{spec.key}")
    dependency = dependency_text(spec.depends_on)
    if dependency:
        argv.append(f"--dependency={dependency}")
        # Without it a child of a failed parent stays PENDING (DependencyNeverSatisfied) forever.
        argv.append("--kill-on-invalid-dep=yes")
    if spec.array:
        argv.append(f"--array={spec.array}")
    argv.append(spec.wrapper_path)
    # A task's index as the wrapper's argument, not --export: any --export but a bare ALL
    # sets SLURM_GET_USER_ENV=1 (sbatch.c), and slurmd then runs `su - USER` before the job.
    if spec.task_index is not None:
        argv.append(str(spec.task_index))
    return argv


def describe_argv(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(part) for part in argv)


def parse_sbatch_id(stdout: str) -> str:
    """The job id from ``sbatch --parsable``: ``id`` or ``id;cluster``."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        match = re.fullmatch(r"(\d+(?:_\d+)?)(?:;\S+)?", line)
        if match:
            return match.group(1)
        match = re.fullmatch(r"Submitted batch job (\d+)(?: on cluster \S+)?", line)
        if match:  # without --parsable (a site wrapper may drop the flag)
            return match.group(1)
    raise ValueError(f"no job id in sbatch output {stdout.strip()[:200]!r}")


class NeverReached(Again):
    """sbatch's request never reached the controller: sending it again is safe.
    ``error``: what to raise once the budget for that is spent."""


def parse_sbatch_output(
    argv: List[str], returncode: int, stdout: str, stderr: str, where: str
) -> str:
    """sbatch's answer as its job id, or the error it means (``refusal_error``;
    ``NeverReached`` when nothing went in); ``where``: the host, for the advice."""
    message = scheduler_message(stderr or stdout)
    if returncode == 127:
        raise JobSubmissionError(
            f"sbatch not found on {where}: {(stderr.strip() or stdout.strip())[:2000]} "
            "(put Slurm's commands on PATH there, or use HPCBRIDGE_SSH_LOGIN_SHELL=1)",
            argv=argv,
        )
    if returncode != 0:
        error = refusal_error(message)(
            f"sbatch refused the job (exit {returncode}): {message}",
            argv=argv,
            scheduler_message=message,
        )
        if never_reached(message):
            raise NeverReached(message, error)
        raise error
    try:
        return parse_sbatch_id(stdout)
    except ValueError as exc:
        raise SubmissionUncertainError(
            f"sbatch succeeded but printed no job id: {stdout.strip()[:200]!r}", argv=argv
        ) from exc


def sbatch_reply(argv: List[str], where: str, reply: Reply) -> str:
    """``parse_sbatch_output`` of a command's answer."""
    return parse_sbatch_output(argv, reply.returncode, reply.stdout, reply.stderr, where)


def array_output(output: str) -> str:
    """The output pattern for an array's tasks: ``%j`` (each task's own id, unknown until
    it starts) as ``%A_%a``, known at submission."""
    return re.sub(r"(?<!%)%j", "%A_%a", output)


def output_for_task(
    pattern: str, job_id: str, array_id: str = "", task: str = "", job_name: str = ""
) -> str:
    """Expand the filename patterns sbatch knows: ``%j %A %a %x %%``."""
    replacements = {"j": job_id, "A": array_id or job_id, "a": task, "x": job_name, "%": "%"}

    def substitute(match: re.Match[str]) -> str:
        letter = match.group(1)
        value = replacements.get(letter)
        return match.group(0) if value is None or (letter == "a" and not task) else value

    return re.sub(r"%([jAax%])", substitute, pattern)


SubmitOne = Callable[[SubmitSpec], str]


def spec_for(batch: SubmitBatch, task_index: Optional[int] = None) -> SubmitSpec:
    """A plain job or the whole array; with ``task_index`` that task alone, a plain job
    under its own name."""
    as_array = batch.count > 1 and task_index is None
    try:
        check_mem(batch.resources.mem)
    except ValueError as exc:
        raise JobSubmissionError(str(exc)) from exc
    return SubmitSpec(
        wrapper_path=batch.job.wrapper_path,
        workdir=batch.job.remote_dir,
        output=array_output(batch.output) if as_array else batch.output,
        job_name=batch.job.job_name if task_index is None else batch.job.name_of(task_index),
        resources=batch.resources,
        depends_on=tuple(batch.depends_on),
        array=f"0-{batch.count - 1}" if as_array else None,
        task_index=task_index,
        key=batch.job.token if task_index is None else f"{batch.job.token}.{task_index}",
    )


def plan_batch(batch: SubmitBatch) -> Planned:
    """The batch as its first submission: a plain job or the whole array."""
    return Planned(batch, spec_for(batch))


def planned_spec(planned: Planned) -> SubmitSpec:
    if not isinstance(planned.detail, SubmitSpec):
        raise TypeError("a Slurm driver was handed another driver's plan")
    return planned.detail


def submit_batch(planned: Planned, submit: SubmitOne) -> List[Submitted]:
    """``batch.count`` jobs: one plain job, else one array, else (Slurm refused the array)
    one job per task."""
    batch, spec = planned.batch, planned_spec(planned)
    try:
        first_id = submit(spec)
    except SubmissionUncertainError:
        raise  # the array may exist: never submit its tasks a second time
    except JobSubmissionError as exc:
        if spec.array is None or not arrays_refused(str(exc)):
            raise
        log.warning("Slurm refused a job array (%s); submitting one job per task", exc)
        return _one_by_one(batch, submit)
    return submitted_for(batch, spec, first_id)


def submitted_for(batch: SubmitBatch, spec: SubmitSpec, first_id: str) -> List[Submitted]:
    """The jobs one submission of ``spec`` made: the job, or every task of the array."""
    if spec.array is None:
        return [Submitted(first_id, _log_path(spec, first_id))]
    tasks = [f"{first_id}_{index}" for index in range(batch.count)]
    return [
        Submitted(
            task_id,
            output_for_task(spec.output, task_id, first_id, str(index), spec.job_name),
            index,
        )
        for index, task_id in enumerate(tasks)
    ]


def _one_by_one(batch: SubmitBatch, submit: SubmitOne) -> List[Submitted]:
    submitted: List[Submitted] = []
    for index in range(batch.count):
        spec = spec_for(batch, task_index=index)
        try:
            job_id = submit(spec)
        except JobSubmissionError as exc:
            if not submitted:
                raise
            skipped = [
                f"task {later} not submitted: task {index} failed"
                for later in range(index + 1, batch.count)
            ]
            limited = isinstance(exc, LimitRefusedError)
            failures = [str(exc), *skipped]
            raise PartialSubmissionError(submitted, failures, batch.count, limited) from exc
        submitted.append(Submitted(job_id, _log_path(spec, job_id), index))
    return submitted


def _log_path(spec: SubmitSpec, job_id: str) -> str:
    return output_for_task(spec.output, job_id, job_name=spec.job_name)


#: what Slurm does, whichever driver talks to it
CAPABILITIES = Capabilities(
    events=False,
    arrays=True,
    dependencies=True,
    array_index_variable="SLURM_ARRAY_TASK_ID",
)


# -- scancel ----------------------------------------------------------------


def scancel_argv(job_ids: Sequence[str]) -> List[str]:
    """scancel takes plain ids and array tasks (an unknown or ended one may exit 1)."""
    return ["scancel", *dict.fromkeys(job_ids)]


def cancel_reply(reply: Reply) -> None:
    """scancel's answer: a job that ended meanwhile or was purged is no failure."""
    if reply.ok:
        return
    message = scheduler_message(reply.message())
    if not job_already_ended(message):
        raise SchedulerAdapterError(f"scancel failed (exit {reply.returncode}): {message}")
