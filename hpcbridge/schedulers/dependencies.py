"""Whether a submission's ``afterok`` parents can be waited for: one rule for every scheduler.

Before anything is staged, the submission looks its parents up the way any
status is looked up - the job store, then one ``driver.query`` for all of
them, then the exit-code file - and hands the answers to the driver on the
batch (``SubmitBatch.parents``).  Every driver's ``plan`` then calls
``refuse_unmet``:

- a parent found nowhere (no record here, not in the queue, not in the
  scheduler's history) is refused: Slurm would take ``afterok:<such an id>``
  and run the job at once, Flux refuses it, the mock would cancel the job;
- a parent that already ended other than COMPLETED is refused too: its child
  could never run (schedulers differ in how they say so later, if at all);
- a parent PENDING or RUNNING holds the child; a COMPLETED one is satisfied;
- a parent the scheduler could not be asked about (controller down) stops the
  submission as unusable: nothing is known, nothing is sent.
"""

from __future__ import annotations

from typing import List, Mapping, Optional, Sequence

from ..errors import JobSubmissionError, SchedulerUnavailableError
from ..model import JobState, JobStatus
from .driver import SubmitBatch
from .observation import Observation, Source


def refuse_unmet(batch: SubmitBatch) -> None:
    """Raise when a parent of ``batch`` cannot be waited for (see the module docstring).

    Parents that were not looked up (``batch.parents is None``) are not checked.
    """
    if batch.parents is None or not batch.depends_on:
        return
    unreachable = [
        job_id
        for job_id in dict.fromkeys(batch.depends_on)
        if _seen(job_id, batch.parents).out_of_reach
    ]
    if unreachable:
        reason = _seen(unreachable[0], batch.parents).status.reason
        raise SchedulerUnavailableError(
            f"cannot check the parent job(s) {', '.join(unreachable)}: {reason}; nothing was "
            "submitted. Check the scheduler with 'hpcbridge doctor', then submit again"
        )
    problems = unmet(batch.depends_on, batch.parents)
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


__all__ = ["refuse_unmet", "unmet"]
