"""The wait loop (``waiting.wait_for_all``) with stand-in rounds: the driver's waiter is
made before the first status round (an event stream opened then can answer it), and
the jobs it hears end are asked alone; while it hears every end, the full rounds are
spaced out (a safety net), and kept at the notice interval once it stops hearing; an
outage of any round (status, exit-code files, events) is ridden out until the deadline."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Collection, Dict, List, Set

import pytest

from hpcbridge.engine import waiting
from hpcbridge.engine.observation import Observation, out_of_reach
from hpcbridge.engine.wait_plan import WaitPlan
from hpcbridge.engine.waiting import (
    HEARING_GAP,
    Rounds,
    Sleeper,
    StatusRound,
    _full_gap,
    wait_for_all,
)
from hpcbridge.errors import HostKeyError, JobNotFoundError, JobTimeoutError, TransportError
from hpcbridge.model import JobState, JobStatus


def seen(job_id: str, state: JobState) -> Observation:
    """The scheduler's answer: ``job_id`` is ``state``."""
    return Observation(JobStatus(job_id, state))


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

    def status_round(pending: List[str]) -> Dict[str, Observation]:
        events.append("round")
        asked.append(sorted(pending))
        state = {"a": JobState.COMPLETED, "b": JobState.RUNNING}
        return {job_id: seen(job_id, state[job_id]) for job_id in pending}

    def heard_round(ended: List[str]) -> Dict[str, Observation]:
        events.append("heard")
        asked.append(sorted(ended))
        return {job_id: seen(job_id, JobState.COMPLETED) for job_id in ended}

    def make_waiter(job_ids: List[str]) -> Waiter:
        waiters.append(Waiter(events, events))
        return waiters[-1]

    plan = WaitPlan(timeout=10, notice_interval=60, files=False)
    final = wait_for_all(
        ["a", "b"], Rounds("test", status_round, lambda ids: {}, make_waiter, heard_round), plan
    )
    assert {job_id: status.state for job_id, status in final.items()} == {
        "a": JobState.COMPLETED,
        "b": JobState.COMPLETED,
    }
    assert events == ["waiter", "round", "pause", "heard"]
    assert asked == [["a", "b"], ["b"]]
    assert waiters[0].closed


def test_while_the_waiter_hears_every_end_the_full_rounds_are_a_safety_net() -> None:
    plan = WaitPlan(notice_interval=1.0)
    assert _full_gap(plan, 50, hearing=False) == 1.0
    assert _full_gap(plan, 3000, hearing=False) == 1.5  # FULL_TICK_RATE jobs a second
    assert _full_gap(plan, 50, hearing=True) == 1.0
    assert _full_gap(plan, 1000, hearing=True) == 10.0  # HEARING_TICK_RATE jobs a second
    assert _full_gap(plan, 3000, hearing=True) == HEARING_GAP
    assert _full_gap(plan, 100000, hearing=True) == 50.0  # never past FULL_TICK_RATE


def test_a_waiter_hearing_every_end_leaves_one_full_round() -> None:
    jobs = [f"j{index}" for index in range(300)]
    rounds: List[int] = []

    def status_round(pending: List[str]) -> Dict[str, Observation]:
        rounds.append(len(pending))
        return {job_id: seen(job_id, JobState.RUNNING) for job_id in pending}

    def heard_round(ended: List[str]) -> Dict[str, Observation]:
        return {job_id: seen(job_id, JobState.COMPLETED) for job_id in ended}

    # 300 jobs heard ending ten a pause, at once.
    plan = WaitPlan(timeout=60, notice_interval=1e-6, files=False)
    final = wait_for_all(
        jobs,
        Rounds("test", status_round, lambda ids: {}, lambda ids: Hearing(ids), heard_round),
        plan,
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

    def file_round(pending: List[str]) -> Dict[str, Observation]:
        file_rounds.append(len(pending))
        return {"j0": seen("j0", JobState.COMPLETED)} if "j0" in pending else {}

    def status_round(pending: List[str]) -> Dict[str, Observation]:
        return {job_id: seen(job_id, JobState.RUNNING) for job_id in pending}

    def heard_round(ended: List[str]) -> Dict[str, Observation]:
        return {job_id: seen(job_id, JobState.COMPLETED) for job_id in ended}

    def make_waiter(job_ids: List[str]) -> HearingAllBut:
        waiters.append(HearingAllBut(job_ids, "j0"))
        return waiters[0]

    # With no end heard for a while, full rounds (and file rounds while it does not
    # hear every end) come at the notice interval: none once it hears every end.
    plan = WaitPlan(timeout=60, notice_interval=1e-6)
    final = wait_for_all(
        jobs, Rounds("test", status_round, file_round, make_waiter, heard_round), plan
    )
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

    def status_round(pending: List[str]) -> Dict[str, Observation]:
        return {job_id: seen(job_id, JobState.RUNNING) for job_id in pending}

    def heard_round(ended: List[str]) -> Dict[str, Observation]:
        return {job_id: seen(job_id, JobState.COMPLETED) for job_id in ended}

    def make_waiter(job_ids: List[str]) -> HearsOnce:
        waiters.append(HearsOnce(job_ids))
        return waiters[0]

    plan = WaitPlan(timeout=3, notice_interval=0.2, files=False)
    final = wait_for_all(
        ["a", "b"], Rounds("test", status_round, lambda ids: {}, make_waiter, heard_round), plan
    )
    assert {job_id: status.state for job_id, status in final.items()} == {
        "a": JobState.COMPLETED,
        "b": JobState.COMPLETED,
    }
    assert waiters[0].pauses == 1


# -- outages: every round guarded alike, ridden out until the wait's deadline ----------


@pytest.fixture
def quick_outages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The back-off of a wait's outage in hundredths of a second (the loop is the same)."""
    monkeypatch.setattr(waiting, "OUTAGE_FIRST_PAUSE", 0.01)
    monkeypatch.setattr(waiting, "OUTAGE_MAX_PAUSE", 0.04)


class Pauses(Sleeper):
    """A plain sleep that notes how long each pause was asked to be."""

    def __init__(self) -> None:
        self.asked: List[float] = []

    def pause(self, seconds: float) -> Set[str]:
        self.asked.append(seconds)
        return super().pause(seconds)


def failing(times: int, error: Exception, then: StatusRound) -> StatusRound:
    """A round that raises ``error`` ``times`` times, then answers as ``then``."""
    calls: List[int] = []

    def round_(pending: List[str]) -> Dict[str, Observation]:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return then(pending)

    return round_


def answering(state: JobState) -> StatusRound:
    return lambda pending: {job_id: seen(job_id, state) for job_id in pending}


def test_a_status_round_failing_for_a_while_is_ridden_out_with_back_off(
    quick_outages: None, caplog: pytest.LogCaptureFixture
) -> None:
    # Ten failed rounds with an UNKNOWN budget of two: an outage counts no UNKNOWN.
    lost = TransportError("cannot reconnect to u@login:22 after 5 attempts: connection refused")
    status_round = failing(10, lost, answering(JobState.COMPLETED))
    pauses = Pauses()
    plan = WaitPlan(timeout=60, notice_interval=1e-6)
    with caplog.at_level(logging.WARNING, logger="hpcbridge"):
        final = wait_for_all(
            ["7"],
            Rounds("slurm", status_round, lambda ids: {}, lambda ids: pauses, unknown_limit=2),
            plan,
        )
    assert final["7"].state is JobState.COMPLETED
    # The pause doubles from the first to the longest, and stays there.
    assert pauses.asked == pytest.approx(
        [0.01, 0.02, 0.04, 0.04, 0.04, 0.04, 0.04, 0.04, 0.04, 0.04], abs=0.005
    )
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 2, said  # once when it began, once when it was over
    assert "out of reach" in said[0] and "connection refused" in said[0]
    assert "until its deadline" in said[0]
    assert "reachable again" in said[1]


def test_the_exit_code_file_round_is_guarded_the_same(quick_outages: None) -> None:
    # The scheduler has forgotten the job; only its file tells the end, once reachable.
    lost = TransportError("sftp stat on u@login:22 failed: Socket is closed")
    file_round = failing(4, lost, answering(JobState.FAILED))
    plan = WaitPlan(timeout=60, notice_interval=1e-6)
    final = wait_for_all(
        ["7"],
        Rounds("slurm", answering(JobState.RUNNING), file_round, lambda ids: None, unknown_limit=2),
        plan,
    )
    assert final["7"].state is JobState.FAILED


def test_one_command_past_its_budget_is_an_outage_too(quick_outages: None) -> None:
    slow = JobTimeoutError("squeue did not finish within 60 s on u@login:22")
    status_round = failing(3, slow, answering(JobState.COMPLETED))
    plan = WaitPlan(timeout=60, notice_interval=1e-6, files=False)
    final = wait_for_all(
        ["7"],
        Rounds("slurm", status_round, lambda ids: {}, lambda ids: None, unknown_limit=1),
        plan,
    )
    assert final["7"].state is JobState.COMPLETED


def test_the_deadline_reached_during_an_outage_says_so(quick_outages: None) -> None:
    lost = TransportError("cannot reconnect to u@login:22 after 5 attempts: connection refused")
    status_round = failing(10**6, lost, answering(JobState.COMPLETED))
    plan = WaitPlan(timeout=0.3, notice_interval=1e-6, files=False)
    with pytest.raises(JobTimeoutError) as caught:
        wait_for_all(
            ["7"],
            Rounds("slurm", status_round, lambda ids: {}, lambda ids: None, unknown_limit=1),
            plan,
        )
    message = str(caught.value)
    assert "1 job(s) still unfinished after 0.3 s: 7" in message
    assert "wait again or cancel them" in message
    assert "could not be reached" in message and "connection refused" in message


def test_an_error_retrying_cannot_fix_ends_the_wait_at_once(quick_outages: None) -> None:
    rounds: List[int] = []

    def status_round(pending: List[str]) -> Dict[str, Observation]:
        rounds.append(1)
        raise HostKeyError("HOST KEY CHANGED for [login]:22")

    plan = WaitPlan(timeout=60, notice_interval=1e-6, files=False)
    with pytest.raises(HostKeyError):
        wait_for_all(["7"], Rounds("slurm", status_round, lambda ids: {}, lambda ids: None), plan)
    assert rounds == [1]


def stamped(seen: Observation) -> Observation:
    """As the poller gives it: with the time of the answer."""
    return replace(seen, answered_at=time.time())


def test_a_scheduler_that_cannot_be_asked_right_now_is_ridden_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Five such answers with an UNKNOWN budget of two: not counted.
    answers: List[Observation] = [
        seen("7", JobState.RUNNING),
        *[out_of_reach("7", "squeue failed: Unable to contact slurm controller")] * 5,
        seen("7", JobState.COMPLETED),
    ]

    def status_round(pending: List[str]) -> Dict[str, Observation]:
        return {"7": stamped(answers.pop(0))}

    plan = WaitPlan(timeout=60, notice_interval=1e-6, files=False)
    with caplog.at_level(logging.WARNING, logger="hpcbridge"):
        final = wait_for_all(
            ["7"],
            Rounds("slurm", status_round, lambda ids: {}, lambda ids: None, unknown_limit=2),
            plan,
        )
    assert final["7"].state is JobState.COMPLETED
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 2 and "Unable to contact" in said[0] and "reachable again" in said[1]


def test_a_scheduler_that_cannot_be_used_from_here_counts_towards_the_streak() -> None:
    reason = "cannot reach the flux scheduler: flux not found; set HPCBRIDGE_FLUX_COMMAND"

    def status_round(pending: List[str]) -> Dict[str, Observation]:
        return {"7": stamped(out_of_reach("7", reason, lasting=True))}

    plan = WaitPlan(timeout=60, notice_interval=1e-6, files=False)
    with pytest.raises(JobNotFoundError, match="3 times in a row .*HPCBRIDGE_FLUX_COMMAND"):
        wait_for_all(
            ["7"],
            Rounds("flux", status_round, lambda ids: {}, lambda ids: None, unknown_limit=3),
            plan,
        )


class FailingEvents(Hearing):
    """A waiter whose event stream fails at its first pause."""

    closed = False

    def pause(self, seconds: float) -> Set[str]:
        raise TransportError("the event stream to u@login:22 dropped")

    def listening(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


def test_a_waiter_whose_events_fail_is_given_up_for_plain_ticks(quick_outages: None) -> None:
    waiters: List[FailingEvents] = []
    states = [JobState.RUNNING, JobState.RUNNING, JobState.COMPLETED]

    def status_round(pending: List[str]) -> Dict[str, Observation]:
        return {job_id: seen(job_id, states.pop(0)) for job_id in pending}

    def make_waiter(job_ids: List[str]) -> FailingEvents:
        waiters.append(FailingEvents(job_ids))
        return waiters[-1]

    plan = WaitPlan(timeout=60, notice_interval=1e-6, files=False)
    final = wait_for_all(["7"], Rounds("flux", status_round, lambda ids: {}, make_waiter), plan)
    assert final["7"].state is JobState.COMPLETED
    assert len(waiters) == 1 and waiters[0].closed


def test_a_waiter_that_cannot_be_made_now_leaves_plain_ticks(quick_outages: None) -> None:
    def make_waiter(job_ids: List[str]) -> Sleeper:
        raise TransportError("cannot open the event stream")

    plan = WaitPlan(timeout=60, notice_interval=1e-6, files=False)
    final = wait_for_all(
        ["7"], Rounds("flux", answering(JobState.COMPLETED), lambda ids: {}, make_waiter), plan
    )
    assert final["7"].state is JobState.COMPLETED


class Woken(Exception):
    """``on_poll`` was told after the wake."""


def test_a_wake_ends_a_long_pause_and_tells_on_poll_without_a_round() -> None:
    """3,000 jobs a waiter hears: the next full round is 30 s away; a wake set during the
    pause (another thread's new subscription) ends it at the slice, with no round."""
    jobs = [f"j{index}" for index in range(3000)]
    wake = threading.Event()
    asked: List[float] = []
    rounds: List[int] = []

    class Listening(Hearing):
        def pause(self, seconds: float) -> Set[str]:
            asked.append(seconds)
            if len(asked) == 3:
                wake.set()
            return set()

    def status_round(pending: List[str]) -> Dict[str, Observation]:
        rounds.append(len(pending))
        return {job_id: seen(job_id, JobState.RUNNING) for job_id in pending}

    def on_poll(latest: Dict[str, JobStatus]) -> None:
        if wake.is_set():
            raise Woken()

    plan = WaitPlan(timeout=60, files=False, on_poll=on_poll, wake=wake)
    rounds_of = Rounds("test", status_round, lambda ids: {}, Listening, status_round)
    with pytest.raises(Woken):
        wait_for_all(jobs, rounds_of, plan)
    assert asked == [waiting.WAKE_SLICE] * 3  # slices of the 30 s pause, up to the wake
    assert rounds == [3000]  # the first round only: the wake asked for none

    asked.clear()
    polls: List[int] = []

    def second_poll(latest: Dict[str, JobStatus]) -> None:
        polls.append(1)
        if len(polls) == 2:
            raise Woken()

    with pytest.raises(Woken):
        wait_for_all(jobs, rounds_of, replace(plan, wake=None, on_poll=second_poll))
    assert asked == [pytest.approx(HEARING_GAP, abs=1.0)]  # no wake to hear: one whole pause
