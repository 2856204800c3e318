"""The shared machinery of SchedulerAdapter, driven by a scripted fake scheduler.

A fake is right here: these tests inject answers (a failing query, a job that
vanishes, a scheduler reporting a cancelled job as FAILED) that a real
scheduler cannot produce on demand.
"""

from typing import Dict, List

import pytest

from hpcbridge import (
    JobNotFoundError,
    JobState,
    JobStatus,
    JobTimeoutError,
    Settings,
    TransportError,
)
from hpcbridge.schedulers.base import SchedulerAdapter


class Scripted(SchedulerAdapter):
    scheduler_name = "scripted"

    def __init__(self, answers: List[object], **kwargs):
        super().__init__(**kwargs)
        self.answers = list(answers)
        self.queries = 0
        self.cancelled: List[str] = []

    def _submit(self, job, resources, depends_on):
        return "1"

    def _query(self, job_ids, records) -> Dict[str, JobStatus]:
        self.queries += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return {job_id: JobStatus(job_id, answer) for job_id in job_ids}

    def _cancel(self, job_ids):
        self.cancelled.extend(job_ids)

    def _describe(self, job, resources, depends_on):
        return "scripted"


@pytest.fixture
def make(tmp_path, make_script):
    def build(*answers, unknown_limit=3):
        adapter = Scripted(
            list(answers),
            settings=Settings.from_env({}, state_dir=str(tmp_path / "state")),
            unknown_limit=unknown_limit,
        )
        job_id = adapter.submit_job(make_script("true"))
        return adapter, job_id

    return build


def test_states_never_go_backwards(make):
    adapter, job_id = make(JobState.RUNNING, JobState.PENDING, JobState.COMPLETED)
    assert adapter.get_job_status(job_id).state is JobState.RUNNING
    assert adapter.get_job_status(job_id).state is JobState.RUNNING  # PENDING ignored
    assert adapter.get_job_status(job_id).state is JobState.COMPLETED


def test_terminal_jobs_are_not_asked_again(make):
    adapter, job_id = make(JobState.COMPLETED)
    adapter.get_job_status(job_id)
    adapter.get_job_status(job_id)
    assert adapter.queries == 1


def test_cancelled_job_reported_failed_ends_cancelled(make):
    adapter, job_id = make(JobState.RUNNING, JobState.FAILED)
    adapter.get_job_status(job_id)
    adapter.cancel_job(job_id)
    assert adapter.cancelled == [job_id]
    assert adapter.get_job_status(job_id).state is JobState.CANCELLED
    assert adapter.store.get(job_id).state == "CANCELLED"


def test_completed_before_the_cancel_stays_completed(make):
    adapter, job_id = make(JobState.COMPLETED)
    adapter.cancel_job(job_id)
    assert adapter.get_job_status(job_id).state is JobState.COMPLETED


def test_unknown_streak_raises_not_found(make):
    adapter, job_id = make(JobState.UNKNOWN, unknown_limit=3)
    with pytest.raises(JobNotFoundError, match="3 times in a row"):
        adapter.wait(job_id, poll_interval=0.01)
    assert adapter.queries == 3


def test_failed_queries_within_the_streak_are_ridden_out(make):
    down = TransportError("connection reset")
    adapter, job_id = make(down, down, JobState.RUNNING, down, JobState.COMPLETED)
    assert adapter.wait(job_id, poll_interval=0.01).state is JobState.COMPLETED
    assert adapter.queries == 5


def test_unknown_between_known_states_resets_the_streak(make):
    adapter, job_id = make(
        JobState.UNKNOWN,
        JobState.UNKNOWN,
        JobState.RUNNING,
        JobState.UNKNOWN,
        JobState.UNKNOWN,
        JobState.COMPLETED,
        unknown_limit=3,
    )
    assert adapter.wait(job_id, poll_interval=0.01).state is JobState.COMPLETED


def test_overall_deadline(make):
    adapter, job_id = make(JobState.RUNNING)
    with pytest.raises(JobTimeoutError, match="still unfinished"):
        adapter.wait(job_id, poll_interval=0.05, timeout=0.3)


def test_wait_all_one_query_per_poll(make, make_script):
    adapter, first = make(JobState.PENDING, JobState.RUNNING, JobState.COMPLETED)
    others = [adapter.submit_job(make_script("true")) for _ in range(2)]
    final = adapter.wait_all([first, *others], poll_interval=0.01)
    assert {status.state for status in final.values()} == {JobState.COMPLETED}
    assert adapter.queries == 3  # three polls, each one query for all jobs


def test_backoff_grows_to_the_poll_interval(make, monkeypatch):
    adapter, job_id = make(*([JobState.RUNNING] * 8), JobState.COMPLETED)
    sleeps = []
    monkeypatch.setattr("time.sleep", sleeps.append)
    adapter.wait_all([job_id], poll_interval=1.0, first_interval=0.1)
    assert sleeps[0] == 0.1  # the change PENDING -> RUNNING resets to short
    assert sleeps == sorted(sleeps) and max(sleeps) == 1.0
