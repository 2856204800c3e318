"""A tracker of a new process (nothing known but the store's records) merging answers:
states never go backwards, a start once known stays, the record is written only when a
state changes. The answers are injected: the merge is what is tested."""

from datetime import datetime, timezone
from typing import Dict, List

import pytest

from hpcbridge.engine.observation import Observation
from hpcbridge.engine.tracking import JobTracker
from hpcbridge.model import JobState, JobStatus
from hpcbridge.store.jobs import JobRecord, JobStore

STARTED = datetime(2026, 12, 5, 14, 0, tzinfo=timezone.utc)
ANSWERED_AT = datetime(2026, 12, 5, 15, 0, tzinfo=timezone.utc).timestamp()


@pytest.fixture
def store(tmp_path) -> JobStore:
    store = JobStore(tmp_path / "jobs.db")
    store.add_many(JobRecord(str(job_id), "slurm", host="h") for job_id in range(1, 5))
    return store


def tracker(store: JobStore) -> JobTracker:
    """What a new process makes: it knows nothing but the records."""
    return JobTracker(store, "slurm", "h", read_text=lambda path: "", stat_many=lambda paths: {})


def answering(*statuses: JobStatus):
    def query(job_ids: List[str]) -> Dict[str, Observation]:
        return {s.job_id: Observation(s).stamped(ANSWERED_AT) for s in statuses}

    return query


def written(store: JobStore, job_id: str) -> JobRecord:
    record = store.get(job_id, "slurm", "h")
    assert record is not None
    return record


def test_a_state_seen_again_is_dated_by_its_round_and_not_written(store) -> None:
    before = written(store, "1").updated_at
    found = tracker(store).refresh(["1"], answering(JobStatus("1", JobState.PENDING)))
    assert found["1"].status.state is JobState.PENDING
    assert found["1"].status.as_of == datetime.fromtimestamp(ANSWERED_AT, tz=timezone.utc)
    assert written(store, "1").updated_at == before


def test_a_later_state_is_written_and_a_final_one_not_asked_again(store) -> None:
    ended = JobStatus("2", JobState.CANCELLED, end_time=STARTED)
    assert tracker(store).refresh(["2"], answering(ended))["2"].status.state is JobState.CANCELLED
    assert written(store, "2").state == "CANCELLED"
    asked: List[List[str]] = []
    fresh = tracker(store)
    found = fresh.refresh(["2"], lambda ids: asked.append(ids) or {})
    assert asked == [] and found["2"].status.state is JobState.CANCELLED


def test_a_recorded_start_stays_and_a_state_never_goes_back(store) -> None:
    store.update_statuses("slurm", "h", [JobStatus("3", JobState.RUNNING, start_time=STARTED)])
    again = tracker(store).refresh(["3"], answering(JobStatus("3", JobState.RUNNING)))
    assert again["3"].status.start_time == STARTED
    back = tracker(store).refresh(["3"], answering(JobStatus("3", JobState.PENDING)))
    assert back["3"].status.state is JobState.RUNNING and back["3"].status.start_time == STARTED
    assert written(store, "3").state == "RUNNING"


def test_a_failure_after_a_requested_cancel_is_cancelled(store) -> None:
    store.mark_cancel_requested("slurm", "h", ["4"])
    found = tracker(store).refresh(["4"], answering(JobStatus("4", JobState.FAILED, exit_code=15)))
    assert found["4"].status.state is JobState.CANCELLED
    assert written(store, "4").state == "CANCELLED"
