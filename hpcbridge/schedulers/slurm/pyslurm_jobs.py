"""pyslurm's objects in hpcbridge's terms: pure, no I/O, no pyslurm import.

A submission -> ``JobSubmitDescription`` keyword arguments; a ``pyslurm.Job``
or ``pyslurm.db.Job`` -> the ids it answers to and its ``JobStatus``.
"""

from __future__ import annotations

import signal
from datetime import datetime
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence

from ...model import JobStatus
from ...resources import format_slurm_time, signal_parts
from .commands import SubmitSpec, dependency_text
from .ids import expand_array_spec
from .states import map_state, settled
from .status import KEY_PREFIX


def submit_description_kwargs(spec: SubmitSpec) -> Dict[str, Any]:
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
    """``--gres`` (and ``--gpus-per-node``) as pyslurm's ``gres_per_node`` takes them:
    ``{"gpu:a100": 2}``; a generic resource without a count asks for one, as in sbatch."""
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
    """``--signal`` as pyslurm takes it: a dict with the signal's number (its own parser
    looks a bare ``USR1`` up as ``signal.Signals["USR1"]`` and refuses it)."""
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
        return [f"{array_id}_{index}" for index in waiting_indices(str(waiting))]
    if array_id:
        # pyslurm reads an array_task_id of 0 as "no value": a record of an
        # array that is neither a numbered task nor the waiting rest is task 0.
        return [f"{array_id}_0"]
    return [raw] if raw else []


def waiting_indices(text: str) -> List[int]:
    """The task indices of an array's waiting rest: ``3-6`` (slurmctld's jobs), or a
    hex bitmap, ``0x3`` for tasks 0 and 1 (pyslurm 25.11's ``db.Job`` gives slurmdbd's
    ``array_task_str`` so)."""
    text = text.strip()
    if text.lower().startswith("0x"):
        try:
            mask = int(text, 16)
        except ValueError:
            return []
        return [index for index in range(mask.bit_length()) if mask >> index & 1]
    return expand_array_spec(text)


def exit_code_of(job: Any) -> Optional[int]:
    """The exit code as the CLI driver gives it, as far as pyslurm tells.

    pyslurm reports a signal as ``exit_code_signal`` (shown as 128+N), but
    folds an exit status of 128 or more down by 128 with signal 0 (143 -> 15):
    such a code is told by ``may_be_folded``.
    """
    signal = getattr(job, "exit_code_signal", None) or 0
    code = getattr(job, "exit_code", None)
    if signal:
        return 128 + int(signal)
    return int(code) if code is not None else None


def status_from_job(job: Any, job_id: Optional[str] = None) -> JobStatus:
    """A ``JobStatus`` from a ``pyslurm.Job`` or ``pyslurm.db.Job``."""
    native = str(getattr(job, "state", "") or "")
    state = map_state(native)
    exit_code = exit_code_of(job) if state.is_terminal else None
    reason = str(getattr(job, "state_reason", "") or "")
    ids = job_ids_of(job)
    extra: Dict[str, Any] = {"raw_id": str(getattr(job, "id", ""))}
    status = JobStatus(
        job_id=job_id or (ids[0] if ids else str(getattr(job, "id", ""))),
        state=state,
        exit_code=exit_code,
        start_time=timestamp(getattr(job, "start_time", None)) if state.rank >= 1 else None,
        end_time=timestamp(getattr(job, "end_time", None)) if state.is_terminal else None,
        native_state=native,
        reason="" if reason in ("None", "(null)") else reason,
        extra=extra,
    )
    return settled(status)


def may_be_folded(status: JobStatus) -> bool:
    """Whether pyslurm may have folded this end's exit code (143 -> 15, 128 -> 0): any
    code under 128 but a COMPLETED 0 (a signal comes as 128 + N: certain)."""
    code = status.exit_code
    return (
        code is not None
        and code < 128
        and not (code == 0 and status.native_state.startswith("COMPLETED"))
    )


def unfolded(status: JobStatus, recorded: Optional[int]) -> Optional[JobStatus]:
    """The status with the code ``recorded`` elsewhere (the wrapper's file, sacct) where
    that is the folded one's (``recorded % 128``); ``None`` when it does not settle it."""
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
    """The status of every wanted id these jobs answer to.  A record that names
    its task never loses to one that covers it with a range (slurmdbd may keep
    ``0-2`` on an array's record beside the records of tasks 0 and 1 that ran)
    or takes it for task 0 by elimination.

    ``history`` (slurmdbd's records): the tasks of an array cancelled before they
    started have no record of their own, only the array's (its id is the array's,
    with no task and maybe no range): that record answers for every wanted task of
    the array no record names.  Not so for slurmctld's jobs, which drop a task's
    record MinJobAge after it ended while the others stay."""
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
