"""The shared machinery of SchedulerAdapter, driven by a scripted fake scheduler.

A fake is right here: these tests inject answers (a failing query, a job that
vanishes, a scheduler reporting a cancelled job as FAILED) that a real
scheduler cannot produce on demand.
"""

import itertools
import time
from typing import Dict, List, Optional, Sequence

import pytest

from hpcbridge import (
    ConfigurationError,
    JobNotFoundError,
    JobState,
    JobStatus,
    JobSubmissionError,
    JobTimeoutError,
    Settings,
    TransportError,
)
from hpcbridge.engine.adapter import SchedulerAdapter
from hpcbridge.engine.driver import (
    Capabilities,
    DriverChoice,
    OpenDriver,
    PartialSubmissionError,
    Planned,
    SubmitBatch,
    Submitted,
    Waiter,
)


class ScriptedDriver:
    """Answers status queries from a script; counts what it is asked."""

    name = "scripted"
    capabilities = Capabilities()

    def __init__(self, answers: List[object], max_batch: int = 1000) -> None:
        self.answers = list(answers)
        self.queries = 0
        self.cancelled: List[str] = []
        self.batches: List[SubmitBatch] = []
        self.refuse_after: Optional[int] = None
        self._ids = itertools.count(1)
        self._max_batch = max_batch

    def plan(self, batch: SubmitBatch) -> Planned:
        return Planned(batch)

    def describe(self, planned: Planned) -> str:
        return "scripted"

    def submit_many(self, planned: Planned) -> List[Submitted]:
        batch = planned.batch
        self.batches.append(batch)
        submitted = []
        for index in range(batch.count):
            if self.refuse_after is not None and len(self.batches) > self.refuse_after:
                if not submitted:
                    raise JobSubmissionError("refused")
                raise PartialSubmissionError(submitted, ["refused"], batch.count)
            job_id = str(next(self._ids))
            submitted.append(Submitted(job_id, f"/out/{job_id}", index))
        return submitted

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        self.queries += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, JobState)
        return {job_id: JobStatus(job_id, answer) for job_id in job_ids}

    def cancel(self, job_ids: Sequence[str]) -> None:
        self.cancelled.extend(job_ids)

    def max_batch(self) -> int:
        return self._max_batch

    def launcher(self, options: object) -> str:
        return ""

    def queue_limit(self, account: Optional[str] = None, *, ask: bool = True) -> Optional[int]:
        return None

    def find_submitted(
        self, planned: Planned, since: Optional[float] = None
    ) -> Optional[List[Submitted]]:
        return None

    def find_output(self, job_id: str) -> Optional[str]:
        return None

    def waiter(self, job_ids: Sequence[str]) -> Optional[Waiter]:
        return None

    def close(self) -> None:
        pass


class Scripted(SchedulerAdapter):
    scheduler_name = "scripted"

    def __init__(self, answers: List[object], max_batch: int = 1000, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.scripted = ScriptedDriver(answers, max_batch)

    def _open_session(self) -> OpenDriver:
        return OpenDriver(self.scripted, DriverChoice("scripted", "a test's script"))

    @property
    def queries(self) -> int:
        return self.scripted.queries

    @property
    def cancelled(self) -> List[str]:
        return self.scripted.cancelled


@pytest.fixture
def make(tmp_path, make_script):
    def build(*answers, unknown_limit=3, max_batch=1000):
        adapter = Scripted(
            list(answers),
            max_batch=max_batch,
            # Each call a new round: these cases script the scheduler's every answer.
            settings=Settings.from_env(
                {},
                state_dir=str(tmp_path / "state"),
                poll_interval=1e-6,
                min_poll_interval=0.0,
            ),
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


@pytest.mark.parametrize(
    ("arguments", "named"),
    [({"timeout": -1}, "timeout=-1"), ({"poll_interval": 0}, "poll_interval=0")],
)
def test_a_wait_with_negative_seconds_is_refused_before_asking(make, arguments, named):
    adapter, job_id = make(JobState.COMPLETED)
    with pytest.raises(ConfigurationError, match=named):
        adapter.wait(job_id, **arguments)
    assert adapter.queries == 0


def test_wait_all_one_query_per_poll(make, make_script):
    adapter, first = make(JobState.PENDING, JobState.RUNNING, JobState.COMPLETED)
    others = [adapter.submit_job(make_script("true")) for _ in range(2)]
    final = adapter.wait_all([first, *others], poll_interval=0.01)
    assert {status.state for status in final.values()} == {JobState.COMPLETED}
    assert adapter.queries == 3  # three polls, each one query for all jobs


def test_the_scheduler_is_asked_once_per_poll_interval(make):
    """Ticks every notice interval; a scheduler round only every poll interval."""
    adapter, job_id = make(*([JobState.RUNNING] * 8), JobState.COMPLETED)
    before = adapter.queries
    started = time.monotonic()
    adapter.wait_all([job_id], poll_interval=0.3, notice_interval=0.02, timeout=60)
    elapsed = time.monotonic() - started
    rounds = adapter.queries - before
    assert rounds == 9  # every scripted answer was asked for, none twice
    assert rounds <= elapsed / 0.3 + 1, (rounds, elapsed)


def test_many_jobs_go_in_chunks_of_the_drivers_batch_size(make, make_script):
    adapter, _ = make(JobState.PENDING, max_batch=3)
    scripts = [make_script(f"echo {index}") for index in range(7)]
    ids = adapter.submit_many(scripts)
    assert [batch.count for batch in adapter.scripted.batches[1:]] == [3, 3, 1]
    assert len(set(ids)) == 7
    folders = {batch.job.remote_dir for batch in adapter.scripted.batches[1:]}
    assert len(folders) == 1  # one folder, one wrapper per chunk
    records = [adapter.store.get(job_id, "scripted", adapter.host_label) for job_id in ids]
    assert all(record is not None for record in records)
    exit_files = [record.exit_file for record in records if record is not None]
    assert len(set(exit_files)) == 7 and exit_files[-1].endswith(".exit")


def test_a_later_chunk_refused_records_the_earlier_ones(make, make_script):
    adapter, _ = make(JobState.PENDING, max_batch=2)
    adapter.scripted.refuse_after = 2  # the first call was the fixture's submit_job
    with pytest.raises(PartialSubmissionError) as caught:
        adapter.submit_many([make_script("true") for _ in range(5)])
    assert len(caught.value.submitted_ids) == 2
    assert "3 of 5 submissions did not go in" in str(caught.value)
    for job_id in caught.value.submitted_ids:
        assert adapter.store.get(job_id, "scripted", adapter.host_label) is not None


def test_unknown_job_with_an_exit_file_ends_from_it(make):
    adapter, job_id = make(JobState.UNKNOWN)
    record = adapter.store.get(job_id, "scripted", adapter.host_label)
    assert record is not None and record.exit_file
    with open(record.exit_file, "w", encoding="ascii") as handle:
        handle.write("3\n")
    status = adapter.get_job_status(job_id)
    assert status.state is JobState.FAILED and status.exit_code == 3
    assert "exit-code file" in status.reason


def test_a_driver_leaving_an_id_out_gives_unknown_not_a_crash(make):
    adapter, job_id = make(JobState.RUNNING)
    adapter.scripted.query = lambda job_ids: {}  # type: ignore[method-assign]
    status = adapter.get_job_status(job_id)
    assert status.state is JobState.UNKNOWN and "no answer" in status.reason


def test_known_jobs_are_refreshed_without_reading_the_store(make, monkeypatch):
    adapter, job_id = make(JobState.PENDING)
    adapter.get_job_status(job_id)
    reads = []
    monkeypatch.setattr(adapter.store, "get_many", lambda *args: reads.append(args) or {})
    assert adapter.get_job_status(job_id).state is JobState.PENDING
    assert reads == []
