"""Which ids name a job at all: a record here, or a trace in the scheduler.

An id with no record whose scheduler answers UNKNOWN ("no such job", or it
cannot tell) is not a job hpcbridge can follow: the command says so in one
line and exits 4, instead of printing UNKNOWN or "cancel requested" for it.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

from ..engine.observation import Observation, statuses_of
from ..errors import JobNotFoundError, SchedulerAdapterError, SchedulerUnavailableError
from ..model import JobState, JobStatus
from .targets import Group, Targets


def untraced(group: Group, observed: Mapping[str, Observation]) -> List[str]:
    """The ids with no record that the scheduler answered UNKNOWN for, in order."""
    return [
        job_id
        for job_id in dict.fromkeys(group.unrecorded())
        if job_id in observed and observed[job_id].status.state is JobState.UNKNOWN
    ]


def not_found_error(
    scheduler: str,
    job_ids: Sequence[str],
    observed: Mapping[str, Observation],
    hint: str = "",
    typed: Optional[Mapping[str, str]] = None,
) -> SchedulerAdapterError:
    """One line: which ids, what the scheduler said, what to try next.

    When the scheduler could not be asked at all, that is the error (exit 7),
    not "no such job" (exit 4): it may well know the job once it answers.
    ``hint``: where else the ids are recorded (``Targets.hint``); ``typed``: the
    id as given, where the scheduler writes it otherwise (``1857`` is Flux's ``ƒZ2``).
    """
    reasons = (observed[job_id].status.reason for job_id in job_ids)
    said = sorted({reason for reason in reasons if reason})
    because = f" ({'; '.join(said)})" if said else ""
    labels = [_label(job_id, (typed or {}).get(job_id)) for job_id in job_ids]
    which = "job " + labels[0] if len(labels) == 1 else "jobs " + ", ".join(labels)
    if all(observed[job_id].out_of_reach for job_id in job_ids):
        return SchedulerUnavailableError(
            f"cannot tell about {which}: the {scheduler} scheduler could not be asked{because}; "
            "check it with 'hpcbridge doctor' and try again"
        )
    return JobNotFoundError(
        f"no {which}: no record here, and the {scheduler} scheduler gave no trace of it{because}"
        f"{hint}; list the recorded jobs with 'hpcbridge jobs', or name the scheduler that ran "
        "it with --scheduler (Flux: --flux-uri)"
    )


def _label(job_id: str, typed: Optional[str]) -> str:
    return f"{job_id} ({typed} as given)" if typed and typed.strip() != job_id else job_id


def group_error(
    targets: Targets, group: Group, missing: Sequence[str], observed: Mapping[str, Observation]
) -> SchedulerAdapterError:
    """``not_found_error`` for ids of one group, with where else they are recorded."""
    scheduler = group.adapter.scheduler_name
    typed = {own: given for given, owner, own in targets.order if owner is group}
    return not_found_error(scheduler, missing, observed, targets.hint(group, missing), typed)


def require_traced(targets: Targets) -> Dict[str, JobStatus]:
    """Ask each group's scheduler about its ids that have no record; raise for those it
    does not know.  Returns what was answered (recorded ids are not asked here)."""
    answered: Dict[str, JobStatus] = {}
    for group in targets.groups:
        unrecorded = list(dict.fromkeys(group.unrecorded()))
        if not unrecorded:
            continue
        observed = group.adapter.observe(unrecorded)
        missing = untraced(group, observed)
        if missing:
            raise group_error(targets, group, missing, observed)
        answered.update(statuses_of(observed))
    return answered
