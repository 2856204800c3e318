"""A submission's parents: the ids a caller gives (``depends_on``) as the scheduler writes
them, and the one rule for every scheduler on whether a child may wait for them.  Loaded
only for an order that has parents."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ..errors import JobNotFoundError, JobSubmissionError, SchedulerUnavailableError
from ..model import JobState, JobStatus
from .observation import Observation, Source

#: ids a job waits for: one id, or several
DependsOn = Union[None, str, int, Sequence[Any]]


def dependency_ids(depends_on: DependsOn, normalize: Any) -> List[str]:
    """The parents as the scheduler writes its ids; text that is no id is refused."""
    if depends_on is None:
        return []
    if isinstance(depends_on, (str, int)):
        depends_on = [depends_on]
    ids = []
    for job_id in depends_on:
        try:
            ids.append(normalize(job_id))
        except (JobNotFoundError, ValueError) as exc:
            raise JobSubmissionError(
                f"parent job {job_id!r} cannot be found: {exc}; nothing was submitted"
            ) from None
    return ids


def parents(
    statuses: Callable[[List[str]], Dict[str, Observation]],
    depends_on: Sequence[str],
    known: Optional[Mapping[str, JobStatus]] = None,
) -> Dict[str, Observation]:
    """What is known now of each parent: ``known``, else one status round for all
    (``statuses``: ``SchedulerAdapter.observe``)."""
    known = known or {}
    unknown = [job_id for job_id in dict.fromkeys(depends_on) if job_id not in known]
    found = statuses(unknown) if unknown else {}
    return {
        job_id: Observation(known[job_id], Source.KNOWN) if job_id in known else found[job_id]
        for job_id in depends_on
    }


def refuse_unmet(depends_on: Sequence[str], parents: Mapping[str, Observation]) -> None:
    """Raise when a parent cannot be waited for, one rule for every scheduler: found
    nowhere (Slurm would run the child at once), or ended other than COMPLETED, or the
    scheduler could not be asked about it."""
    unreachable = [
        job_id for job_id in dict.fromkeys(depends_on) if _seen(job_id, parents).out_of_reach
    ]
    if unreachable:
        reason = _seen(unreachable[0], parents).status.reason
        raise SchedulerUnavailableError(
            f"cannot check the parent job(s) {', '.join(unreachable)}: {reason}; nothing was "
            "submitted. Check the scheduler with 'hpcbridge doctor', then submit again"
        )
    seen = [_seen(job_id, parents).status for job_id in dict.fromkeys(depends_on)]
    problems = [problem for problem in map(_problem, seen) if problem]
    if problems:
        raise JobSubmissionError(
            "; ".join(problems) + "; nothing was submitted (without --after, or depends_on, "
            "it would not wait)"
        )


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
