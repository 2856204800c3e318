"""Live states for ``jobs`` and ``cost``: every unfinished record asked about once.

The records are grouped by where their jobs run (scheduler, host, Flux
instance, transport); each group is one adapter and one ``get_job_statuses``
call, which asks the scheduler once for all of them and writes what changed
to the store.  A group whose scheduler cannot be reached keeps its recorded
states, each marked with why (``Listed.stale_reason``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, Tuple

from ..config import Settings
from ..errors import SchedulerAdapterError
from ..model import JobState, JobStatus
from .output import one_line
from .places import Place, adapter_at, place_of

if TYPE_CHECKING:
    from ..store.jobs import JobRecord

#: the reason shown for an unfinished job with ``--cached``
NOT_ASKED = "not asked (--cached)"


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
            place = place_of(record)
            places.setdefault(place, []).append(index)
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
