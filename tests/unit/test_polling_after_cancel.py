"""A cancel makes the poll's earlier answers stale: the next wait asks the scheduler
at once, in this process and in another one sharing the store (``PollBoard.forget``)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

from hpcbridge.engine.observation import Observation
from hpcbridge.engine.polling import PollBoard, Poller
from hpcbridge.model import JobState, JobStatus
from hpcbridge.store.jobs import JobStore


class Scheduler:
    """Answers each id with ``state``; counts its rounds."""

    def __init__(self) -> None:
        self.rounds: List[List[str]] = []
        self.state = JobState.RUNNING

    def query(self, job_ids: List[str]) -> Dict[str, Observation]:
        self.rounds.append(list(job_ids))
        return {job_id: Observation(JobStatus(job_id, self.state)) for job_id in job_ids}


def test_a_wait_in_another_process_is_not_served_the_answer_from_before_the_cancel(
    tmp_path: Path,
) -> None:
    scheduler = Scheduler()
    board = PollBoard(JobStore(tmp_path / "jobs.db"))
    canceller = Poller(scheduler.query, 60.0, board=board, target="t")
    assert canceller.ask(["7"], one_off=True)["7"].status.state is JobState.RUNNING  # cancel's look
    canceller.release()
    scheduler.state = JobState.CANCELLED
    before = Poller(scheduler.query, 60.0, board=board, target="t")
    assert before.ask(["7"])["7"].status.state is JobState.RUNNING  # within the pace: published
    before.release()
    assert len(scheduler.rounds) == 1
    canceller.forget(["7"])  # what Following.cancel does after scancel
    waiter = Poller(scheduler.query, 60.0, board=board, target="t")
    assert waiter.ask(["7"])["7"].status.state is JobState.CANCELLED
    assert len(scheduler.rounds) == 2


def test_the_same_process_asks_again_at_once_after_a_cancel() -> None:
    scheduler = Scheduler()
    poller = Poller(scheduler.query, 60.0)
    assert poller.ask(["7"])["7"].status.state is JobState.RUNNING
    scheduler.state = JobState.CANCELLED
    assert poller.ask(["7"])["7"].status.state is JobState.RUNNING  # not due: the last answer
    poller.forget(["7"])
    assert poller.ask(["7"])["7"].status.state is JobState.CANCELLED
    assert len(scheduler.rounds) == 2
