"""The wait loop (``waiting.wait_for_all``) with stand-in rounds: the driver's waiter is
made before the first status round (an event stream opened then can answer it), and
the jobs it hears end are asked alone."""

from __future__ import annotations

from typing import Dict, List, Set

from hpcbridge.model import JobState, JobStatus
from hpcbridge.schedulers.waiting import WaitPlan, wait_for_all


class Waiter:
    def __init__(self, events: List[str], made: List[str]) -> None:
        self.events = events
        made.append("waiter")
        self.closed = False

    def pause(self, seconds: float) -> Set[str]:
        self.events.append("pause")
        return {"b"}

    def listening(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def test_the_waiter_comes_before_the_first_round_and_a_heard_end_is_asked_alone() -> None:
    events: List[str] = []
    asked: List[List[str]] = []
    waiters: List[Waiter] = []

    def status_round(pending: List[str]) -> Dict[str, JobStatus]:
        events.append("round")
        asked.append(sorted(pending))
        state = {"a": JobState.COMPLETED, "b": JobState.RUNNING}
        return {job_id: JobStatus(job_id, state[job_id]) for job_id in pending}

    def heard_round(ended: List[str]) -> Dict[str, JobStatus]:
        events.append("heard")
        asked.append(sorted(ended))
        return {job_id: JobStatus(job_id, JobState.COMPLETED) for job_id in ended}

    def make_waiter(job_ids: List[str]) -> Waiter:
        waiters.append(Waiter(events, events))
        return waiters[-1]

    plan = WaitPlan("test", timeout=10, notice_interval=60, files=False)
    final = wait_for_all(["a", "b"], status_round, lambda ids: {}, make_waiter, plan, heard_round)
    assert {job_id: status.state for job_id, status in final.items()} == {
        "a": JobState.COMPLETED,
        "b": JobState.COMPLETED,
    }
    assert events == ["waiter", "round", "pause", "heard"]
    assert asked == [["a", "b"], ["b"]]
    assert waiters[0].closed
