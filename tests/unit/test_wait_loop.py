"""The wait loop (``waiting.wait_for_all``) with stand-in rounds: the driver's waiter is
made before the first status round (an event stream opened then can answer it), and
the jobs it hears end are asked alone; while it hears every end, the full rounds are
spaced out (a safety net), and kept at the notice interval once it stops hearing."""

from __future__ import annotations

import time
from typing import Collection, Dict, List, Set

from hpcbridge.model import JobState, JobStatus
from hpcbridge.schedulers.waiting import HEARING_GAP, WaitPlan, _full_gap, wait_for_all


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

    def settled(self, job_ids: Collection[str]) -> None:
        pass

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


def test_while_the_waiter_hears_every_end_the_full_rounds_are_a_safety_net() -> None:
    plan = WaitPlan("test", notice_interval=1.0)
    assert _full_gap(plan, 50, hearing=False) == 1.0
    assert _full_gap(plan, 3000, hearing=False) == 1.5  # FULL_TICK_RATE jobs a second
    assert _full_gap(plan, 50, hearing=True) == 1.0
    assert _full_gap(plan, 1000, hearing=True) == 10.0  # HEARING_TICK_RATE jobs a second
    assert _full_gap(plan, 3000, hearing=True) == HEARING_GAP
    assert _full_gap(plan, 100000, hearing=True) == 50.0  # never past FULL_TICK_RATE


def test_a_waiter_hearing_every_end_leaves_one_full_round() -> None:
    jobs = [f"j{index}" for index in range(300)]
    rounds: List[int] = []

    def status_round(pending: List[str]) -> Dict[str, JobStatus]:
        rounds.append(len(pending))
        return {job_id: JobStatus(job_id, JobState.RUNNING) for job_id in pending}

    def heard_round(ended: List[str]) -> Dict[str, JobStatus]:
        return {job_id: JobStatus(job_id, JobState.COMPLETED) for job_id in ended}

    # 300 jobs heard ending ten a pause, at once.
    plan = WaitPlan("test", timeout=60, notice_interval=0.0, files=False)
    final = wait_for_all(
        jobs, status_round, lambda ids: {}, lambda ids: Hearing(ids), plan, heard_round
    )
    assert all(status.state is JobState.COMPLETED for status in final.values())
    assert len(rounds) == 1  # the first; the next was 3 s away


class Hearing:
    """A waiter that hears ten jobs end per pause, at once."""

    def __init__(self, job_ids: List[str]) -> None:
        self.left = list(job_ids)

    def pause(self, seconds: float) -> Set[str]:
        heard, self.left = set(self.left[:10]), self.left[10:]
        return heard

    def listening(self) -> bool:
        return True

    def settled(self, job_ids: Collection[str]) -> None:
        pass

    def close(self) -> None:
        pass


class HearingAllBut(Hearing):
    """Hears the jobs it follows end, ten a pause; not ``gone`` (it ended before the
    stream opened): it says it hears every end only once told ``gone`` ended."""

    def __init__(self, job_ids: List[str], gone: str) -> None:
        super().__init__([job_id for job_id in job_ids if job_id != gone])
        self.unfollowed = {gone}
        self.told: List[str] = []

    def listening(self) -> bool:
        return not self.unfollowed

    def settled(self, job_ids: Collection[str]) -> None:
        self.told.extend(job_ids)
        self.unfollowed.difference_update(job_ids)


def test_a_job_ended_by_its_file_is_told_to_the_waiter_which_then_hears_every_end() -> None:
    jobs = [f"j{index}" for index in range(300)]
    file_rounds: List[int] = []
    waiters: List[HearingAllBut] = []

    def file_round(pending: List[str]) -> Dict[str, JobStatus]:
        file_rounds.append(len(pending))
        return {"j0": JobStatus("j0", JobState.COMPLETED)} if "j0" in pending else {}

    def status_round(pending: List[str]) -> Dict[str, JobStatus]:
        return {job_id: JobStatus(job_id, JobState.RUNNING) for job_id in pending}

    def heard_round(ended: List[str]) -> Dict[str, JobStatus]:
        return {job_id: JobStatus(job_id, JobState.COMPLETED) for job_id in ended}

    def make_waiter(job_ids: List[str]) -> HearingAllBut:
        waiters.append(HearingAllBut(job_ids, "j0"))
        return waiters[0]

    # With no end heard for a while, full rounds (and file rounds while it does not
    # hear every end) come at the notice interval: none once it hears every end.
    plan = WaitPlan("test", timeout=60, notice_interval=0.0)
    final = wait_for_all(jobs, status_round, file_round, make_waiter, plan, heard_round)
    assert all(status.state is JobState.COMPLETED for status in final.values())
    assert file_rounds == [300]  # the first round's files ended j0; the waiter was told
    assert waiters[0].told[0] == "j0" and sorted(waiters[0].told) == sorted(jobs)


class HearsOnce(Hearing):
    """Hears every job end at the very end of its first pause (when a full tick is due),
    then nothing more; counts its pauses."""

    def __init__(self, job_ids: List[str]) -> None:
        super().__init__(job_ids)
        self.pauses = 0

    def pause(self, seconds: float) -> Set[str]:
        self.pauses += 1
        time.sleep(seconds + 0.01)
        heard, self.left = set(self.left), []
        return heard

    def listening(self) -> bool:
        return False  # full ticks at the notice interval


def test_ends_heard_when_a_full_tick_is_due_are_taken_from_the_waiters_events() -> None:
    # The poller repeats its last answer (still running) until its interval has passed:
    # the heard ends must not wait for its next real question.
    waiters: List[HearsOnce] = []

    def status_round(pending: List[str]) -> Dict[str, JobStatus]:
        return {job_id: JobStatus(job_id, JobState.RUNNING) for job_id in pending}

    def heard_round(ended: List[str]) -> Dict[str, JobStatus]:
        return {job_id: JobStatus(job_id, JobState.COMPLETED) for job_id in ended}

    def make_waiter(job_ids: List[str]) -> HearsOnce:
        waiters.append(HearsOnce(job_ids))
        return waiters[0]

    plan = WaitPlan("test", timeout=3, notice_interval=0.2, files=False)
    final = wait_for_all(["a", "b"], status_round, lambda ids: {}, make_waiter, plan, heard_round)
    assert {job_id: status.state for job_id, status in final.items()} == {
        "a": JobState.COMPLETED,
        "b": JobState.COMPLETED,
    }
    assert waiters[0].pauses == 1
