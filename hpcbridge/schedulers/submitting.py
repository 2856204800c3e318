"""How one submission goes in: one folder, a wrapper per chunk, the driver, the records.

A submission of many tasks is cut into chunks of the driver's ``max_batch``
(a Slurm array's size limit); each chunk gets a wrapper of its own in the
submission's folder and one ``driver.submit_many``.  Every job that went in
is recorded before anything is raised, so a partly failed submission loses
no record and is never sent again.
"""

from __future__ import annotations

import logging
from typing import List, Optional, Protocol, Sequence

from ..errors import JobSubmissionError
from ..jobscript import PreparedJob, TaskSpec, new_token
from ..resources import Resources
from ..transports.base import Executor
from . import staging
from .driver import PartialSubmissionError, SchedulerDriver, SubmitBatch, Submitted
from .tracking import JobTracker, Placement, job_records

log = logging.getLogger("hpcbridge")


class Submitter(Protocol):
    """What the submission pipeline needs of an adapter."""

    executor: Executor
    remote_workdir: str
    tracker: JobTracker

    @property
    def scheduler_name(self) -> str: ...

    @property
    def driver(self) -> SchedulerDriver: ...

    @property
    def host_label(self) -> str: ...

    @property
    def instance_label(self) -> Optional[str]: ...

    def launcher(self, nested: Optional[bool]) -> str: ...

    def output_path(self, job: PreparedJob, resources: Resources) -> str: ...


def batch_of(
    adapter: Submitter,
    job: PreparedJob,
    count: int,
    resources: Resources,
    depends_on: Sequence[str],
    nested: Optional[bool],
) -> SubmitBatch:
    output = adapter.output_path(job, resources)
    return SubmitBatch(job, count, resources, tuple(depends_on), output, nested)


def submit_tasks(
    adapter: Submitter,
    tasks: List[TaskSpec],
    resources: Resources,
    depends_on: List[str],
    remote_dir: Optional[str],
    nested: Optional[bool],
) -> List[str]:
    """One folder; one wrapper and one driver submission per ``max_batch`` tasks."""
    token = new_token()
    folder = staging.new_folder(adapter.executor, adapter.remote_workdir, remote_dir, token)
    chunk_size = adapter.driver.max_batch() if len(tasks) > 1 else 1
    chunks = staging.plan_chunks(
        folder, tasks, staging.job_name(resources, tasks), chunk_size, token
    )
    done: List[Submitted] = []
    for job, chunk in chunks:
        try:
            done.extend(_submit_chunk(adapter, job, chunk, resources, depends_on, nested))
        except PartialSubmissionError as exc:
            submitted = done + exc.submitted
            raise PartialSubmissionError(submitted, exc.failures, len(tasks)) from exc
        except JobSubmissionError as exc:
            if not done:
                raise
            raise PartialSubmissionError(done, [str(exc)], len(tasks)) from exc
    ids = [item.job_id for item in done]
    log.info("submitted %d %s job(s) (%s): %s", len(ids), adapter.scheduler_name, folder, ids[0])
    return ids


def _submit_chunk(
    adapter: Submitter,
    job: PreparedJob,
    tasks: List[TaskSpec],
    resources: Resources,
    depends_on: List[str],
    nested: Optional[bool],
) -> List[Submitted]:
    driver = adapter.driver
    array_variable = driver.capabilities.array_index_variable
    wrapper = staging.wrapper_text(job, tasks, array_variable, adapter.launcher(nested))
    staging.stage(adapter.executor, job, tasks, wrapper)
    batch = batch_of(adapter, job, len(tasks), resources, depends_on, nested)
    try:
        submitted = driver.submit_many(batch)
    except PartialSubmissionError as exc:
        _record(adapter, exc.submitted, batch, tasks)
        raise
    _record(adapter, submitted, batch, tasks)
    return submitted


def _record(
    adapter: Submitter,
    submitted: Sequence[Submitted],
    batch: SubmitBatch,
    tasks: Sequence[TaskSpec],
) -> None:
    where = Placement(adapter.scheduler_name, adapter.executor.kind, adapter.host_label)
    adapter.tracker.record(job_records(submitted, batch, tasks, where, adapter.instance_label))
