"""The Poller: one scheduler round per interval, shared through the store by every
waiter of one scheduler instance; a waiter that stops hands the poll on."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Dict, List

import pytest

from hpcbridge.engine.observation import Observation, out_of_reach
from hpcbridge.engine.polling import PollBoard, Poller
from hpcbridge.model import JobState, JobStatus
from hpcbridge.store.jobs import JobStore


class Scheduler:
    """Answers every id RUNNING, or what ``states`` says; counts its rounds."""

    def __init__(self, delay: float = 0.0) -> None:
        self.rounds: List[List[str]] = []
        self.states: Dict[str, JobState] = {}
        self.delay = delay

    def query(self, job_ids: List[str]) -> Dict[str, Observation]:
        self.rounds.append(list(job_ids))
        time.sleep(self.delay)
        return {i: Observation(JobStatus(i, self.states.get(i, JobState.RUNNING))) for i in job_ids}


@pytest.fixture
def board(tmp_path: Path) -> PollBoard:
    return PollBoard(JobStore(tmp_path / "jobs.db"))


def test_alone_one_round_per_interval() -> None:
    scheduler = Scheduler()
    poller = Poller(scheduler.query, interval=0.2)
    for _ in range(10):
        answers = poller.ask(["1", "2"])
        assert set(answers) == {"1", "2"}
    assert len(scheduler.rounds) == 1  # the rest within the interval: the same answers
    time.sleep(0.25)
    poller.ask(["1"])
    assert len(scheduler.rounds) == 2
    assert answers["1"].answered_at > 0  # type: ignore[operator]


def test_two_waiters_share_one_round(board: PollBoard, tmp_path: Path) -> None:
    """The second waiter's ids go into the first one's next round; it asks nobody."""
    scheduler = Scheduler()
    first = Poller(scheduler.query, 0.3, board=board, target="slurm|here|")
    second_board = PollBoard(JobStore(tmp_path / "jobs.db"))  # another "process"
    second = Poller(scheduler.query, 0.3, board=second_board, target="slurm|here|")
    assert set(first.ask(["1"])) == {"1"}
    assert second.ask(["2"]) == {}  # the poll is held: no answer yet, no question asked
    assert scheduler.rounds == [["1"]]
    time.sleep(0.35)
    first.ask(["1"])
    assert sorted(scheduler.rounds[-1]) == ["1", "2"]  # the union
    assert set(second.ask(["2"])) == {"2"}
    assert len(scheduler.rounds) == 2


def test_a_one_off_question_while_another_process_polls_is_not_asked(board: PollBoard) -> None:
    """Only a wait waits: the id goes into the holder's next round, the call returns."""
    scheduler = Scheduler()
    holder = Poller(scheduler.query, 0.3, board=board, target="t")
    holder.ask(["1"])
    other = Poller(scheduler.query, 0.3, board=board, target="t")
    assert other.ask(["9"], one_off=True) == {}
    assert scheduler.rounds == [["1"]]
    time.sleep(0.35)
    holder.ask(["1"])
    assert sorted(scheduler.rounds[-1]) == ["1", "9"]  # asked in the holder's next round
    assert set(other.ask(["9"], one_off=True)) == {"9"} and len(scheduler.rounds) == 2


def test_next_answers_waits_for_the_poller_then_asks_itself(board: PollBoard) -> None:
    """For an id nothing is known of: the next round the floor allows."""
    scheduler = Scheduler()
    holder = Poller(scheduler.query, 0.3, board=board, target="t")
    holder.ask(["1"])
    other = Poller(scheduler.query, 0.3, board=board, target="t")
    found = other.next_answers(["9"])  # the holder never polls again
    assert set(found) == {"9"}
    assert "9" in scheduler.rounds[-1] and len(scheduler.rounds) == 2


def test_a_one_off_question_asks_at_once_when_nobody_polls(board: PollBoard) -> None:
    """Nobody holds the poll (the last holder is gone): no waiting for a pace."""
    scheduler = Scheduler()
    first = Poller(scheduler.query, 30.0, board=board, target="t")
    first.ask(["1"])
    first.release()
    other = Poller(scheduler.query, 30.0, board=board, target="t")
    started = time.monotonic()
    assert set(other.ask(["2"], one_off=True)) == {"2"}
    assert time.monotonic() - started < 1.0 and scheduler.rounds[-1] == ["2"]


def test_a_dead_holder_hands_the_poll_on_at_once(board: PollBoard) -> None:
    scheduler = Scheduler()
    board.take("t", "vm-gone:999999999:abc", time.time(), time.time() + 600, None)
    board.store.transaction(
        lambda c: c.execute(
            "UPDATE poll_lease SET owner = ?", (f"{socket.gethostname()}:999999999:x",)
        )
    )
    other = Poller(scheduler.query, 30.0, board=board, target="t")
    assert set(other.ask(["2"], one_off=True)) == {"2"}


def test_a_released_poll_is_taken_at_the_same_pace(board: PollBoard) -> None:
    """The next waiter polls as soon as a round is due, not sooner: one pace for all."""
    scheduler = Scheduler()
    holder = Poller(scheduler.query, 0.3, board=board, target="t")
    holder.ask(["1"])
    holder.release()
    other = Poller(scheduler.query, 0.3, board=board, target="t")
    assert other.ask(["2"]) == {}  # the last round was less than an interval ago
    time.sleep(0.35)
    assert set(other.ask(["2"])) == {"2"}
    assert scheduler.rounds[-1] == ["2"]  # the released wants are gone too


def test_a_dead_pollers_lease_runs_out(board: PollBoard, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hpcbridge.engine.polling.LEASE_INTERVALS", 1.0)
    scheduler = Scheduler()
    Poller(scheduler.query, 0.2, board=board, target="t").ask(["1"])  # then "dies"
    other = Poller(scheduler.query, 0.2, board=board, target="t")
    assert other.ask(["2"]) == {}
    time.sleep(0.3)
    assert set(other.ask(["2"])) == {"2"}


def test_a_slow_scheduler_is_asked_less_often(monkeypatch: pytest.MonkeyPatch) -> None:
    # Thresholds far from the delays: a loaded machine oversleeps by milliseconds.
    monkeypatch.setattr("hpcbridge.engine.polling.SLOW_AFTER", 0.05)
    poller = Poller(Scheduler(delay=0.1).query, interval=0.1)
    poller.ask(["1"])
    assert poller.gap() >= 1.0  # 10 x its answer time, at least 0.1 s
    assert poller.gap() == pytest.approx(10 * poller._duration)
    quick = Poller(Scheduler(delay=0.0).query, interval=0.1)
    quick.ask(["1"])
    assert quick.gap() == pytest.approx(0.1)  # a quick answer does not slow the rate


def test_failures_do_not_slow_the_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hpcbridge.engine.polling.SLOW_AFTER", 0.01)

    def down(job_ids: List[str]) -> Dict[str, Observation]:
        time.sleep(0.05)
        return {i: out_of_reach(i, "Unable to contact slurm controller") for i in job_ids}

    poller = Poller(down, interval=0.1)
    poller.ask(["1"])
    assert poller.gap() == pytest.approx(0.1)


def test_answers_of_another_target_are_not_served(board: PollBoard) -> None:
    """Two clusters seen from one host keep their answers apart."""
    scheduler = Scheduler()
    Poller(scheduler.query, 60.0, board=board, target="slurm|here|/a.conf").ask(["5"])
    other = Poller(scheduler.query, 60.0, board=board, target="slurm|here|/b.conf")
    other.ask(["5"])
    assert len(scheduler.rounds) == 2
