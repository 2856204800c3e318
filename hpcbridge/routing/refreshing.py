"""Recorded jobs as they are now: each place's scheduler asked once for its unfinished
jobs (and for what the ended ones were charged); one that cannot be reached leaves its
jobs' recorded states, marked stale with why."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..engine.cost import charge_of, key_of, with_charge
from ..errors import SchedulerAdapterError, one_line
from ..model import Charge, JobState, JobStatus
from ..settings.config import Settings
from ..store.jobs import JobRecord, JobStore
from .places import Place, adapter_at, place_of

log = logging.getLogger("hpcbridge")

#: the reason shown for an unfinished job with ``--cached``
NOT_ASKED = "not asked (--cached)"
#: job ids per question of what they were charged (one sacct or flux jobs command line)
CHARGES_PER_QUESTION = 500


@dataclass(frozen=True)
class Listed:
    """A record as the command shows it: live, or its last recorded state and why."""

    record: JobRecord
    stale_reason: Optional[str] = None

    @property
    def stale(self) -> bool:
        return self.stale_reason is not None


def cached(records: Sequence[JobRecord]) -> List[Listed]:
    """The records as stored; the unfinished ones marked as not asked."""
    return [
        Listed(record, None if record.status().is_terminal else NOT_ASKED) for record in records
    ]


def refreshed(records: Sequence[JobRecord], settings: Settings) -> List[Listed]:
    """The records with every unfinished job's live state (one query per place)."""
    places: Dict[Place, List[int]] = {}
    for index, record in enumerate(records):
        if not record.status().is_terminal:
            places.setdefault(place_of(record), []).append(index)
    listed = [Listed(record) for record in records]
    for place, indexes in places.items():
        answers, failure = ask_place(place, [records[i].job_id for i in indexes], settings)
        for index in indexes:
            listed[index] = _listed(records[index], answers.get(records[index].job_id), failure)
    return listed


def _listed(record: JobRecord, status: Optional[JobStatus], failure: Optional[str]) -> Listed:
    if status is None or status.state is JobState.UNKNOWN:
        why = failure or (status.reason if status is not None else "") or "no answer"
        return Listed(record, why)
    return Listed(with_status(record, status))


def with_status(record: JobRecord, status: JobStatus) -> JobRecord:
    """The record with the live state (times kept where the scheduler gave none)."""
    return dataclasses.replace(
        record,
        state=status.state.value,
        native_state=status.native_state or record.native_state,
        reason=status.reason,
        exit_code=status.exit_code if status.exit_code is not None else record.exit_code,
        start_time=status.start_time or record.start_time,
        end_time=status.end_time or record.end_time,
    )


def ask_place(
    place: Place, job_ids: List[str], settings: Settings
) -> Tuple[Mapping[str, JobStatus], Optional[str]]:
    """One batched query for the jobs at ``place``: ``(answers, None)``, or
    ``({}, why)`` when its scheduler cannot be reached from here."""
    try:
        adapter = adapter_at(place, settings)
    except (SchedulerAdapterError, ValueError, OSError) as exc:
        return {}, f"{place.scheduler} on {place.host}: {one_line(exc)}"
    try:
        return adapter.get_job_statuses(job_ids), None
    except (SchedulerAdapterError, OSError) as exc:
        return {}, f"{place.scheduler} on {place.host}: {one_line(exc)}"
    finally:
        adapter.close()


def listed_jobs(
    store: JobStore,
    settings: Settings,
    cached_only: bool,
    state: Optional[str] = None,
    limit: Optional[int] = None,
    where: str = "",
) -> List[Listed]:
    """The recorded jobs (``state``: only those in it now; ``limit``: the newest N;
    ``where``: a condition of the store's, e.g. no sweep's)."""
    if cached_only:
        return cached(store.list(state=state, limit=limit, where=where))
    if state is None:
        return refreshed(store.list(limit=limit, where=where), settings)
    # Only an unfinished job, or one already in it, can be in ``state`` now.
    candidates = [
        record
        for record in store.list(where=where)
        if record.state == state or not record.status().is_terminal
    ]
    shown = [item for item in refreshed(candidates, settings) if item.record.state == state]
    return shown[-limit:] if limit else shown


def charged(
    listed: Sequence[Listed],
    settings: Settings,
    store: JobStore,
    inside: Mapping[Any, Any],
    notify: Callable[[str], None] = log.warning,
) -> List[Listed]:
    """The jobs with what their scheduler charged, where not read yet: one question per
    place for the jobs that ran or ended (one cancelled before it ran: charged 0; a
    pack's tasks - ``inside`` their allocation - are not asked: their allocation was
    charged); an ended job's charge is kept in its record.  A place that cannot say
    leaves its jobs estimated, said through ``notify``."""
    places: Dict[Place, List[int]] = {}
    for index, item in enumerate(listed):
        record = item.record
        if (
            record.scheduler != "mock"
            and key_of(record) not in inside
            and charge_of(record) is None
            and (record.start_time is not None or record.status().is_terminal)
        ):
            places.setdefault(place_of(record), []).append(index)
    result = list(listed)
    for place, indexes in places.items():
        ids = [listed[i].record.job_id for i in indexes]
        try:
            charges = _charges_at(place, ids, settings)
        except (SchedulerAdapterError, ValueError, OSError) as exc:
            notify(
                f"what {len(ids)} job(s) on {place.describe()} were charged is not "
                f"known now ({one_line(exc)}): their figures are estimates (basis requested)"
            )
            continue
        ended = {}
        for index in indexes:
            record = listed[index].record
            charge = charges.get(record.job_id)
            if charge is None:
                continue
            result[index] = dataclasses.replace(listed[index], record=with_charge(record, charge))
            if charge.final and record.status().is_terminal:
                ended[record.job_id] = charge.as_row()
        store.record_charges(place.scheduler, place.host, ended)
    return result


def _charges_at(place: Place, job_ids: List[str], settings: Settings) -> Dict[str, Charge]:
    """What the scheduler at ``place`` charged for ``job_ids``, ``CHARGES_PER_QUESTION``
    ids a question."""
    charges: Dict[str, Charge] = {}
    adapter = adapter_at(place, settings)
    try:
        for start in range(0, len(job_ids), CHARGES_PER_QUESTION):
            charges.update(adapter.charges(job_ids[start : start + CHARGES_PER_QUESTION]))
    finally:
        adapter.close()
    return charges
