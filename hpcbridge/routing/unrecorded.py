"""Ids no record knows, asked of the scheduler they were routed to: what it said, and
the one error for those it gave no trace of (or could not be asked about)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import JobNotFoundError, SchedulerAdapterError, SchedulerUnavailableError
from ..model import JobState
from .ids import Group, Targets

if TYPE_CHECKING:
    from ..engine.observation import Observation


def ask(
    targets: Targets, group: Group, job_ids: Sequence[str]
) -> Tuple[Mapping[str, Observation], List[str], Optional[SchedulerAdapterError]]:
    """What the group's scheduler says of ``job_ids`` (one query), the ids with no record
    it answered UNKNOWN for, in order - not jobs hpcbridge can follow - and their error."""
    observed = group.adapter.observe(list(job_ids)) if job_ids else {}
    missing = [
        job_id
        for job_id in dict.fromkeys(group.unrecorded())
        if job_id in observed and observed[job_id].status.state is JobState.UNKNOWN
    ]
    return observed, missing, group_error(targets, group, missing, observed) if missing else None


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


def untraced_errors(targets: Targets) -> Dict[Tuple[int, str], Exception]:
    """The error of each id with no record that its scheduler gave no trace of (or
    could not be asked about), by (group, id)."""
    errors: Dict[Tuple[int, str], Exception] = {}
    for group in targets.groups:
        unrecorded = list(dict.fromkeys(group.unrecorded()))
        if not unrecorded:
            continue
        try:
            _, missing, error = ask(targets, group, unrecorded)
        except SchedulerAdapterError as exc:
            errors.update({(id(group), job_id): exc for job_id in unrecorded})
            continue
        if error is not None:
            errors.update({(id(group), job_id): error for job_id in missing})
    return errors


def require_traced(targets: Targets) -> None:
    """Raise the error of the first id with no record that its scheduler does not know."""
    for error in untraced_errors(targets).values():
        raise error
