"""One submission, top to bottom: plan, stage, send, record.

``Submission`` is made by an adapter from its driver, its stager and its job
tracker.  It cuts the tasks into chunks of at most the driver's ``max_batch``
(a Slurm array's size limit), whatever scripts they run - each task keeps its
own name in its record (``staging.plan_chunks``) - and then:

1. **plan**: the parents (``--after``) are looked up - the store, one query
   for all of them, the exit-code file - and refused where they cannot be
   waited for (``refuse_unmet``, one rule for every scheduler); the driver works
   out every chunk and refuses what the scheduler would refuse - all before
   anything is staged (a refused job leaves no folder);
2. **stage**: each chunk's scripts and wrapper go into the submission's folder (a
   script one task alone runs travels in the wrapper's table: ``Stager.bundle``);
3. **send**: one ``driver.submit_many`` per chunk;
4. **record**: every job that went in is recorded before anything is raised,
   so a partly failed submission loses no record and is never sent again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import (
    JobSubmissionError,
    LimitRefusedError,
    SchedulerUnavailableError,
    SubmissionUncertainError,
)
from ..jobscript import TASK_INDEX_VARIABLE, PreparedJob, TaskSpec, new_token
from ..model import JobState, JobStatus
from ..resources import Resources
from . import staging
from .driver import PartialSubmissionError, Planned, SchedulerDriver, SubmitBatch, Submitted
from .observation import Observation, Source
from .staging import Stager
from .tracking import JobTracker, Placement, job_records

log = logging.getLogger("hpcbridge")


@dataclass(frozen=True)
class Order:
    """What a caller asked for, validated: the tasks and everything they share."""

    tasks: Sequence[TaskSpec]
    resources: Resources
    depends_on: Tuple[str, ...]
    remote_dir: Optional[str]
    #: the scheduler's own choices (``SchedulerAdapter.job_options``), passed on unread
    options: object = None
    #: names the submission's folder and first wrapper, made with the order: every
    #: rendering of one order (a dry run's jobspec and command line) shows the same paths
    token: str = field(default_factory=new_token)
    made: datetime = field(default_factory=datetime.now)
    #: each script's file name in ``remote_dir`` where other orders share that folder
    #: (a sweep's): one name per script across all of them (``staging.staged_basenames``)
    script_names: Optional[Mapping[str, str]] = None


def _shifted(submitted: Sequence[Submitted], offset: int) -> List[Submitted]:
    if not offset:
        return list(submitted)
    return [replace(item, index=item.index + offset) for item in submitted]


def batches(
    order: Order, stager: Stager, chunk_size: int
) -> List[Tuple[SubmitBatch, List[TaskSpec]]]:
    """The order's chunks as batches - one folder, one wrapper each; pure planning."""
    folder = stager.folder(order.remote_dir, order.token, order.made)
    chunks = staging.plan_chunks(
        folder, order.tasks, order.resources.job_name, chunk_size, order.token, order.script_names
    )
    return [(_batch(job, chunk, order, stager), chunk) for job, chunk in chunks]


def dry_batches(order: Order, stager: Stager, chunk_size: int) -> List[SubmitBatch]:
    """The batches of ``order`` as a dry run shows them where no driver can plan them."""
    return [batch for batch, _ in batches(order, stager, chunk_size)]


def _batch(
    job: PreparedJob, tasks: Sequence[TaskSpec], order: Order, stager: Stager
) -> SubmitBatch:
    output = stager.output_path(job, order.resources)
    return SubmitBatch(job, len(tasks), order.resources, order.depends_on, output, order.options)


#: how many distinct task names a dry run lists for one chunk
SHOWN_NAMES = 5


def _own_names(job: PreparedJob) -> str:
    """``, each its own: a.sh, b.sh`` for a chunk whose tasks are not all called by its
    one name (the first ``SHOWN_NAMES`` distinct ones, then how many more)."""
    distinct = list(dict.fromkeys(job.task_names))
    if len(distinct) < 2:
        return ""
    more = len(distinct) - SHOWN_NAMES
    shown = ", ".join(distinct[:SHOWN_NAMES]) + (f" and {more} more" if more > 0 else "")
    return f"; each named after its own: {shown}"


# -- parents -------------------------------------------------------------


def refuse_unmet(depends_on: Sequence[str], parents: Mapping[str, Observation]) -> None:
    """Raise when a parent cannot be waited for: one rule for every scheduler.

    - a parent found nowhere (no record here, not in the queue, not in the
      scheduler's history) is refused: Slurm would take ``afterok:<such an id>``
      and run the job at once (it cannot tell it from one purged long ago), Flux
      refuses it, the mock would cancel the job;
    - a parent that already ended other than COMPLETED is refused too: its child
      could never run (schedulers differ in how they say so later, if at all);
    - a parent PENDING or RUNNING holds the child; a COMPLETED one is satisfied;
    - a parent the scheduler could not be asked about (controller down) stops the
      submission as unusable: nothing is known, nothing is sent.
    """
    unreachable = [
        job_id for job_id in dict.fromkeys(depends_on) if _seen(job_id, parents).out_of_reach
    ]
    if unreachable:
        reason = _seen(unreachable[0], parents).status.reason
        raise SchedulerUnavailableError(
            f"cannot check the parent job(s) {', '.join(unreachable)}: {reason}; nothing was "
            "submitted. Check the scheduler with 'hpcbridge doctor', then submit again"
        )
    problems = unmet(depends_on, parents)
    if not problems:
        return
    raise JobSubmissionError(
        "; ".join(problems) + "; nothing was submitted (without --after, or depends_on, "
        "it would not wait)"
    )


def unmet(depends_on: Sequence[str], parents: Mapping[str, Observation]) -> List[str]:
    """One phrase per parent that cannot be waited for; empty when all can."""
    problems = []
    for job_id in dict.fromkeys(depends_on):
        problem = _problem(_seen(job_id, parents).status)
        if problem:
            problems.append(problem)
    return problems


def _seen(job_id: str, parents: Mapping[str, Observation]) -> Observation:
    missing = JobStatus(job_id, JobState.UNKNOWN, reason="not looked up")
    return parents.get(job_id) or Observation(missing, Source.KNOWN)


def _problem(status: JobStatus) -> Optional[str]:
    if status.state is JobState.UNKNOWN:
        said = f" ({status.reason})" if status.reason else ""
        return (
            f"parent job {status.job_id} cannot be found: no record of it here and no trace "
            f"in the scheduler's queue or history{said}; check the id ('hpcbridge jobs' lists "
            "the recorded ones)"
        )
    if status.is_terminal and status.state is not JobState.COMPLETED:
        code = "" if status.exit_code is None else f" (exit {status.exit_code})"
        return (
            f"parent job {status.job_id} already ended {status.state.value}{code}, so a job "
            "that waits for it to complete would never run; submit its step again and depend "
            "on the new job"
        )
    return None


class Submission:
    """Plans, stages, sends and records the jobs of one ``Order``."""

    def __init__(
        self,
        driver: SchedulerDriver,
        stager: Stager,
        tracker: JobTracker,
        placement: Placement,
        instance: Optional[str],
        launcher: Callable[[object], str],
        statuses: Callable[[List[str]], Dict[str, Observation]],
    ) -> None:
        self.driver = driver
        self.stager = stager
        self.tracker = tracker
        self.placement = placement
        #: the scheduler instance recorded with each job (Flux: its URI)
        self.instance = instance
        #: what the wrapper exports as ``HPCBRIDGE_LAUNCHER``, for the order's options
        self.launcher = launcher
        #: the adapter's observations of many ids (the store, then the scheduler at its
        #: polite rate: ``SchedulerAdapter.observe``)
        self.statuses = statuses

    def parents(
        self, depends_on: Sequence[str], known: Optional[Mapping[str, JobStatus]] = None
    ) -> Dict[str, Observation]:
        """What is known now of each parent: ``known`` (a sweep's feeder knows its own
        jobs), else the store, one status round for all (shared, at the polite rate),
        the exit-code file."""
        known = known or {}
        unknown = [job_id for job_id in dict.fromkeys(depends_on) if job_id not in known]
        found = self.statuses(unknown) if unknown else {}
        return {
            job_id: Observation(known[job_id], Source.KNOWN) if job_id in known else found[job_id]
            for job_id in depends_on
        }

    def plan(
        self, order: Order, known: Optional[Mapping[str, JobStatus]] = None
    ) -> List[Tuple[Planned, List[TaskSpec]]]:
        """Every chunk as the driver will send it; raises before anything is staged."""
        chunk_size = self.driver.max_batch() if len(order.tasks) > 1 else 1
        if order.depends_on:
            refuse_unmet(order.depends_on, self.parents(order.depends_on, known))
        return [
            (self.driver.plan(batch), chunk)
            for batch, chunk in batches(order, self.stager, chunk_size)
        ]

    def describe(self, order: Order) -> str:
        """What the driver would send for each chunk of ``order``, and what it does with
        them (drops...).  Planned as ``run`` plans: a dry run refuses what a submission would."""
        lines = []
        for planned, _ in self.plan(order):
            line, count = self.driver.describe(planned), planned.batch.count
            many = f"  # {count} jobs: {TASK_INDEX_VARIABLE}=0..{count - 1}" if count > 1 else ""
            lines.append(line + many + _own_names(planned.batch.job))
        summary = self.driver.capabilities.summary()
        return "\n".join(lines) + f"\n# {self.driver.name} driver: {summary}"

    def run(self, order: Order, known: Optional[Mapping[str, JobStatus]] = None) -> List[str]:
        """Submit every chunk; the ids in task order (``known``: as for ``parents``)."""
        plans = self.plan(order, known)
        launcher = self.launcher(order.options)
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
        files = staging.wrapper_files(batch.job, tasks, array_variable, launcher, bundled)
        self.stager.stage(batch.job, tasks, files, bundled.keys())
        try:
            submitted = self.driver.submit_many(planned)
        except PartialSubmissionError as exc:
            self.record(exc.submitted, batch, tasks)
            raise
        self.record(submitted, batch, tasks)
        return submitted

    def record(
        self, submitted: Sequence[Submitted], batch: SubmitBatch, tasks: Sequence[TaskSpec]
    ) -> None:
        self.tracker.record(job_records(submitted, batch, tasks, self.placement, self.instance))
