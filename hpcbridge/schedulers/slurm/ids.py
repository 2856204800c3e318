"""Slurm job ids as a user types them and as squeue and sacct print them (``123``,
``123_4``, ``123;cluster``, ``123_[5-9%2]``), array specs, the ``--jobs`` list for many ids,
and the key a submission carries.  Pure, no I/O."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

_TASK_ID = re.compile(r"^(?P<base>\d+)_(?P<task>\d+)$")
_BRACKETED = re.compile(r"^(?P<base>\d+)_\[(?P<spec>[^\]]*)\]$")
_SPEC_ITEM = re.compile(r"^(?P<first>\d+)(?:-(?P<last>\d+)(?::(?P<step>\d+))?)?$")


def normalize_job_id(job_id: object) -> str:
    """``123``, ``"123;cluster"``, ``" 123_4 "`` -> ``"123"`` / ``"123_4"``."""
    text = str(job_id).strip()
    if ";" not in text:  # the usual case, on every row of squeue and sacct
        return text
    return text.split(";", 1)[0].strip()


#: what a user may name a job by: a job (``123``) or an array task (``123_4``)
_TYPED_ID = re.compile(r"^\d+(?:_\d+)?$")


def job_id_of(text: object) -> str:
    """A job id as a user types it (``123``, ``123_4``, ``123;cluster``), as recorded;
    ``ValueError`` for text that is no Slurm job id (squeue's failure would read as a
    controller that cannot be asked)."""
    if type(text) is str and text.isdecimal():
        return text  # the usual case: nothing to normalize
    job_id = normalize_job_id(text)
    if not (job_id.isdecimal() or _TYPED_ID.match(job_id)):
        raise ValueError(
            f"{str(text).strip()!r} is not a Slurm job id (expected a number such as 123, "
            "or 123_4 for a task of an array)"
        )
    return job_id


def split_job_id(job_id: str) -> Tuple[str, Optional[int]]:
    """``"123_4"`` -> ``("123", 4)``; ``"123"`` -> ``("123", None)``."""
    if "_" not in job_id:
        return job_id, None
    match = _TASK_ID.match(job_id)
    if match:
        return match.group("base"), int(match.group("task"))
    return job_id, None


def expand_array_spec(spec: str) -> List[int]:
    """Task indices of an array spec: ``3-6%2`` (throttle ignored), ``[1,3,5-7]``,
    ``0-15:4``; a malformed spec gives an empty list."""
    spec = spec.strip()
    if spec.startswith("[") and spec.endswith("]"):
        spec = spec[1:-1]
    spec = spec.split("%", 1)[0]
    indices: List[int] = []
    for item in spec.split(","):
        match = _SPEC_ITEM.match(item.strip())
        if not match:
            return []
        first = int(match.group("first"))
        last = int(match.group("last") or first)
        step = int(match.group("step") or 1)
        if last < first or step < 1:
            return []
        indices.extend(range(first, last + 1, step))
    return indices


def expand_job_id(text: str) -> List[str]:
    """Every id a squeue/sacct job id column stands for: ``123_[4-9]`` (an array's waiting
    tasks, one row) as ``123_4`` ... ``123_9``."""
    text = normalize_job_id(text)
    if "[" not in text:
        return [text] if text else []
    match = _BRACKETED.match(text)
    if match:
        base = match.group("base")
        return [f"{base}_{index}" for index in expand_array_spec(match.group("spec"))]
    return [text] if text else []


def job_list(job_ids: Sequence[str], collapse_over: int = 50) -> List[str]:
    """The ``--jobs`` list for many ids, deduplicated; an array with more than
    ``collapse_over`` tasks asked is named by its id alone (then all its tasks are listed)."""
    ordered = list(dict.fromkeys(job_ids))
    by_array: Dict[str, List[str]] = {}
    for job_id in ordered:
        base, task = split_job_id(job_id)
        if task is not None:
            by_array.setdefault(base, []).append(job_id)
    collapsed = {base for base, tasks in by_array.items() if len(tasks) > collapse_over}
    if not collapsed:
        return ordered
    entries = (
        base if task is not None and base in collapsed else job_id
        for job_id, (base, task) in zip(ordered, map(split_job_id, ordered))
    )
    return list(dict.fromkeys(entries))


def array_ids(job_ids: Sequence[str]) -> List[str]:
    """The arrays' own ids of the tasks among ``job_ids`` (``123_4`` -> ``123``)."""
    return list(
        dict.fromkeys(base for base, task in map(split_job_id, job_ids) if task is not None)
    )


#: the job comment every submission carries: what an uncertain submission is found by
KEY_PREFIX = "hpcbridge:"
