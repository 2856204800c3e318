"""pyslurm in the Slurm parsers' terms: its records as the rows ``status.parse_sacct``
reads (so that "squeue -> sacct -> UNKNOWN" and the array-task fill are the CLI's),
a submission as ``JobSubmitDescription``'s arguments, what a call answered or raised, and
the rules for loading pyslurm safely.  Written against pyslurm 25.11.2 on Slurm 25.11.
Pure, no I/O: the records and the module come in as arguments."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from ...engine.driver import Again, NotAskedNow
from ...model import JobStatus
from ...resources import format_slurm_time, signal_parts
from .cluster import parse_version
from .commands import SubmitSpec, dependency_text, refusal_error
from .ids import KEY_PREFIX, expand_array_spec, split_job_id
from .queries import NoHistory, Statuses
from .status import SACCT_COLUMNS, cell, parse_sacct, sacct_lines, shown_ids

#: why the real-driver tests skip here
PYSLURM_SKIP_REASON = "pyslurm not importable (PyPI has it only for Slurm 25.11)"


@dataclass(frozen=True)
class Outcome:
    """What a call into pyslurm gave: its value or the exception it raised, and the lines
    libslurm wrote to stderr meanwhile."""

    value: Any = None
    error: Optional[BaseException] = None
    said: Tuple[str, ...] = ()

    def message(self) -> str:
        """The error's words with libslurm's own where they add to them."""
        text = str(self.error) or type(self.error).__name__
        extra = [line for line in self.said if line and line not in text]
        return f"{text} ({'; '.join(extra)})" if extra else text


# -- the answers -------------------------------------------------------------------


def submitted_reply(outcome: Outcome) -> str:
    """``JobSubmitDescription.submit()``'s job id, or the error Slurm's refusal means."""
    if outcome.error is not None:
        # RPCError from Slurm; ValueError/TypeError from pyslurm's own checks
        message = outcome.message()
        raise refusal_error(message)(
            f"Slurm refused the job: {message}", scheduler_message=message
        ) from outcome.error
    return str(outcome.value)


def live_reply(outcome: Outcome, wanted: Sequence[str]) -> Statuses:
    """``Jobs.load()``'s statuses of ``wanted``; ``Again`` when slurmctld cannot answer."""
    if outcome.error is not None:  # RPCError: slurmctld down or restarting
        message = f"slurmctld query failed: {outcome.message()}"
        raise Again(message, NotAskedNow(message))
    return statuses_from_jobs(iter_jobs(outcome.value), wanted)


def history_reply(outcome: Outcome, wanted: Sequence[str]) -> Statuses:
    """``db.Jobs.load()``'s statuses of ``wanted``; ``NoHistory`` without slurmdbd."""
    if outcome.error is not None:  # RPCError; no slurmdbd (accounting off)
        raise NoHistory(f"pyslurm: no job history from slurmdbd: {outcome.message()}", True)
    return statuses_from_jobs(iter_jobs(outcome.value), wanted, history=True)


def output_reply(outcome: Outcome) -> Optional[str]:
    """``Job.load()``'s output file; ``None`` for an unknown id (RPCError)."""
    path = None if outcome.error else getattr(outcome.value, "standard_output", None)
    return str(path) if path else None


def history_filter_ids(job_ids: Sequence[str]) -> List[int]:
    """The jobs slurmdbd is asked for: the arrays' and plain jobs' own ids."""
    return sorted({int(split_job_id(job_id)[0]) for job_id in job_ids})


# -- a submission ------------------------------------------------------------------


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
        # pyslurm makes a missing ntasks 1 (sbatch -N leaves it unset): srun in the job
        # would then start one task on one node, not one per node
        "ntasks": resources.ntasks or resources.nodes,
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
    dependency = dependency_text(spec.depends_on)
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


def describe_submission(spec: SubmitSpec) -> str:
    """The call a submission of ``spec`` makes, as ``--dry-run`` shows it."""
    fields = ", ".join(f"{key}={value!r}" for key, value in submit_description_kwargs(spec).items())
    return f"pyslurm.JobSubmitDescription({fields}).submit()"


# -- records as rows -----------------------------------------------------------------


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


def _shown_ids(job: Any, history: bool) -> List[str]:
    raw = str(getattr(job, "id", "") or "")
    array_id = str(getattr(job, "array_id", "") or "")
    tasks = [shown.split("_", 1)[1] for shown in job_ids_of(job)] if array_id else []
    return shown_ids(raw, array_id, getattr(job, "array_task_id", None), tasks, history)


def _exit_cell(code: Any, signal_number: Any) -> str:
    """sacct's ``ExitCode`` (``N:S``) of pyslurm's exit code and signal; empty when unknown."""
    if code is None and not signal_number:
        return ""
    return f"{code or 0}:{signal_number or 0}"


def sacct_rows(jobs: Iterable[Any], history: bool = False) -> str:
    """pyslurm records as ``sacct -X -P`` would print them (``status.SACCT_COLUMNS``)."""
    return sacct_lines((_fields(job), _shown_ids(job, history)) for job in jobs)


def _fields(job: Any) -> Dict[str, str]:
    """One pyslurm record's sacct fields (``status.SACCT_COLUMNS``) but its id."""
    start = timestamp(getattr(job, "start_time", None))
    end = timestamp(getattr(job, "end_time", None))
    # pyslurm folds an exit status of 128 or more down by 128 (143 -> 15): may_be_folded.
    code, signal_number = getattr(job, "exit_code", None), getattr(job, "exit_code_signal", 0)
    return {
        "raw_id": str(getattr(job, "id", "") or ""),
        "state": cell(getattr(job, "state", "")),
        "exit_code": _exit_cell(code, signal_number),
        "start": start.isoformat() if start else "Unknown",
        "end": end.isoformat() if end else "Unknown",
        "reason": cell(getattr(job, "state_reason", "")),
    }


def statuses_from_jobs(
    jobs: Iterable[Any], wanted: Sequence[str], history: bool = False
) -> Statuses:
    """The status of every wanted id these jobs answer to (``status.parse_sacct`` of their
    rows: a record naming its task wins over one covering it; ``history``: an array's own
    record answers for each wanted task of it that no record names)."""
    bases = {split_job_id(job_id)[0] for job_id in wanted}
    mine = [job for job in jobs if _base_ids(job) & (bases | set(wanted))]
    return parse_sacct(sacct_rows(mine, history), SACCT_COLUMNS, wanted=wanted)


def _base_ids(job: Any) -> set:
    return {str(getattr(job, "id", "") or ""), str(getattr(job, "array_id", "") or "")}


def status_from_job(job: Any, job_id: Optional[str] = None) -> JobStatus:
    """A ``JobStatus`` from a ``pyslurm.Job`` or ``pyslurm.db.Job``."""
    ids = job_ids_of(job)
    wanted = job_id or (ids[0] if ids else str(getattr(job, "id", "")))
    return statuses_from_jobs([job], [wanted])[wanted]


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


def unfold(answers: Statuses, recorded: Callable[[str], Optional[int]]) -> List[str]:
    """Exit codes pyslurm may have folded (``may_be_folded``), in place, where
    ``recorded(job_id)`` (the exit-code file's, sacct's) settles them; the ids still unsure."""
    unsure: List[str] = []
    for job_id in [job_id for job_id, found in answers.items() if may_be_folded(found)]:
        found = unfolded(answers[job_id], recorded(job_id))
        answers[job_id] = found or answers[job_id]
        unsure += [] if found else [job_id]
    return unsure


def iter_jobs(collection: Any) -> Iterator[Any]:
    """Jobs of a pyslurm collection: a dict, a multi-cluster map or a list."""
    values = getattr(collection, "values", None)
    items: Iterable[Any] = values() if callable(values) else collection
    for item in items:
        if isinstance(item, dict):  # {cluster: {id: job}}
            yield from iter_jobs(item)
        else:
            yield item


# -- loading pyslurm safely, and libslurm's words on fd 2 ------------------------------


def wanted_slurm_conf(
    command_env: Mapping[str, str], process_env: Mapping[str, str]
) -> Optional[str]:
    """The ``SLURM_CONF`` the Slurm commands run with: the settings' first, else the process's."""
    return command_env.get("SLURM_CONF") or process_env.get("SLURM_CONF") or None


def conf_problem(
    wanted: Optional[str], process_conf: Optional[str], loaded: Tuple[bool, Optional[str]]
) -> Optional[str]:
    """Why pyslurm must not be used for ``wanted``; None when it may. ``loaded``: (already
    imported, the SLURM_CONF it was imported with)."""
    imported, loaded_conf = loaded
    if imported:
        if loaded_conf != wanted:
            return (
                f"pyslurm in this process was loaded for SLURM_CONF={loaded_conf or '(unset)'}, "
                f"the settings say {wanted or '(unset)'}"
            )
        return None
    if wanted != process_conf:
        return (
            f"pyslurm reads the process's SLURM_CONF ({process_conf or 'unset'}), "
            f"not the settings' ({wanted}): export SLURM_CONF={wanted} to use it"
        )
    return None


def version_problem(pyslurm_version: Optional[str], slurm_version: Optional[str]) -> Optional[str]:
    """Why the installed pyslurm (``None``: none) cannot talk to this Slurm; ``None``
    when it can."""
    if pyslurm_version is None:
        return f"{PYSLURM_SKIP_REASON}: no module named 'pyslurm'"
    if not versions_match(pyslurm_version, slurm_version):
        return f"pyslurm {pyslurm_version} does not match Slurm {slurm_version or '?'}"
    return None


def versions_match(pyslurm_version: Optional[str], slurm_version: Optional[str]) -> bool:
    """pyslurm ``X.Y.Z`` is built for Slurm ``X.Y`` (``24.5.1`` ~ ``24.05.4``)."""
    ours, theirs = parse_version(pyslurm_version or ""), parse_version(slurm_version or "")
    return ours is not None and theirs is not None and ours[:2] == theirs[:2]


#: a line of libslurm's log (``python: error: invalid partition specified: nosuchpart``)
_LOG_LINE = re.compile(r"^\S+: (?:error|fatal|warning|info|verbose|debug\d*): (?P<message>.*)$")


def split(text: str) -> Tuple[List[str], str]:
    """libslurm's messages (their level and program name stripped), and the rest of
    ``text`` as it was written."""
    messages: List[str] = []
    rest: List[str] = []
    for line in text.splitlines(keepends=True):
        match = _LOG_LINE.match(line.rstrip("\n"))
        if match:
            messages.append(match.group("message").strip())
        else:
            rest.append(line)
    return messages, "".join(rest)
