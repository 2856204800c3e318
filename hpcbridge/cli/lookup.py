"""Which ids name a job at all: a record here, or a trace in the scheduler.

An id with no record whose scheduler answers UNKNOWN ("no such job", or it
cannot tell) is not a job hpcbridge can follow: the command says so in one
line and exits 4, instead of printing UNKNOWN or "cancel requested" for it.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence

from ..errors import JobNotFoundError, SchedulerAdapterError, SchedulerUnavailableError
from ..model import JobState, JobStatus
from ..schedulers.driver import SCHEDULER_UNREACHABLE
from .targets import Target


def untraced(target: Target, statuses: Mapping[str, JobStatus]) -> List[str]:
    """The ids with no record that the scheduler answered UNKNOWN for, in order."""
    return [
        job_id
        for job_id in dict.fromkeys(target.unrecorded())
        if job_id in statuses and statuses[job_id].state is JobState.UNKNOWN
    ]


def not_found_error(
    target: Target, job_ids: Sequence[str], statuses: Mapping[str, JobStatus]
) -> SchedulerAdapterError:
    """One line: which ids, what the scheduler said, what to try next.

    When the scheduler could not be asked at all, that is the error (exit 7),
    not "no such job" (exit 4): it may well know the job once it answers.
    """
    scheduler = target.adapter.scheduler_name
    said = sorted({statuses[job_id].reason for job_id in job_ids if statuses[job_id].reason})
    because = f" ({'; '.join(said)})" if said else ""
    which = "job " + job_ids[0] if len(job_ids) == 1 else "jobs " + ", ".join(job_ids)
    if all(statuses[job_id].extra.get(SCHEDULER_UNREACHABLE) for job_id in job_ids):
        return SchedulerUnavailableError(
            f"cannot tell about {which}: the {scheduler} scheduler could not be asked{because}; "
            "check it with 'hpcbridge doctor' and try again"
        )
    return JobNotFoundError(
        f"no {which}: no record here, and the {scheduler} scheduler gave no trace of it{because}; "
        "list the recorded jobs with 'hpcbridge jobs', or name the scheduler that ran it "
        "with --scheduler (Flux: --flux-uri)"
    )


def require_traced(target: Target) -> Dict[str, JobStatus]:
    """Ask the scheduler about the ids that have no record; raise for those it does not know.

    Returns what it answered (recorded ids are not asked here).
    """
    unrecorded = list(dict.fromkeys(target.unrecorded()))
    if not unrecorded:
        return {}
    statuses = target.adapter.get_job_statuses(unrecorded)
    missing = untraced(target, statuses)
    if missing:
        raise not_found_error(target, missing, statuses)
    return statuses
