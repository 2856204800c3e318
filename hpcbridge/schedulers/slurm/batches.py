"""One ``SubmitBatch`` as Slurm jobs: a plain job, one array, or one job per task.

Shared by the CLI and pyslurm drivers, which differ only in how one
``SubmitSpec`` goes in (``submit(spec) -> job id``).
"""

from __future__ import annotations

import logging
from typing import Callable, List, Optional

from ...errors import JobSubmissionError, LimitRefusedError, SubmissionUncertainError
from ...model import JobState, JobStatus
from ..dependencies import refuse_unmet
from ..driver import Capabilities, PartialSubmissionError, Planned, SubmitBatch, Submitted
from .ids import array_task_ids
from .messages import arrays_refused
from .submission import SubmitSpec, array_output, check_mem, output_for_task

log = logging.getLogger("hpcbridge.slurm")

SubmitOne = Callable[[SubmitSpec], str]


def spec_for(batch: SubmitBatch, task_index: Optional[int] = None) -> SubmitSpec:
    """The first (often only) submission of a batch: a plain job or the whole array.

    With ``task_index`` it is that task alone, submitted as a plain job under its
    own name.  An array has one name for all its tasks (``PreparedJob.job_name``):
    what ``%x`` in its output path becomes.
    """
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
    """The batch as its first submission: a plain job or the whole array.

    Parents are checked here, not left to sbatch: Slurm takes
    ``--dependency=afterok:<an id it never had>`` and runs the job (it cannot
    tell such an id from one purged long ago)."""
    refuse_unmet(batch)
    return Planned(batch, spec_for(batch))


def planned_spec(planned: Planned) -> SubmitSpec:
    """The ``SubmitSpec`` ``plan_batch`` made."""
    if not isinstance(planned.detail, SubmitSpec):
        raise TypeError("a Slurm driver was handed another driver's plan")
    return planned.detail


def submit_batch(planned: Planned, submit: SubmitOne) -> List[Submitted]:
    """``batch.count`` jobs: one plain sbatch, else one ``--array=0-N``.

    Where Slurm refuses the array, each task goes in on its own with its
    index as the wrapper's argument.
    """
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
    task_ids = array_task_ids(first_id, batch.count)
    return [
        Submitted(
            task_id,
            output_for_task(spec.output, task_id, first_id, str(index), spec.job_name),
            index,
        )
        for index, task_id in enumerate(task_ids)
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


def unknown(job_id: str, reason: str) -> JobStatus:
    return JobStatus(job_id, JobState.UNKNOWN, reason=reason)


#: the reason given for an id neither the queue nor the history knows
NOT_FOUND = "not in squeue or sacct"
