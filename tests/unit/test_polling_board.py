"""The poll board's rounds (``store.polls.PollBoard``): one row per round, its answers as
one JSON document (``encode_round``/``decode_round``, which round trip any answer); a one-off
question that takes the round leaves nothing behind; the newest answer of each id is
served, a final one is not asked again, rounds nobody can take any more are dropped."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Dict, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbridge.engine.observation import Observation, Reach, Source
from hpcbridge.engine.polling import Poller
from hpcbridge.model import JobState, JobStatus
from hpcbridge.store.jobs import JobStore
from hpcbridge.store.leases import me
from hpcbridge.store.polls import Answer, PollBoard, decode_round, encode_round
from tests.support.statuses import job_statuses

SETTINGS = settings(max_examples=60, deadline=None)

_statuses = job_statuses(allow_infinity=False)
_answers = st.tuples(
    _statuses,
    st.one_of(st.none(), st.floats(0, 4e9)),
    st.sampled_from([reach.value for reach in Reach]),
)


def _same(left: Answer, right: Answer) -> bool:
    a, b = left[0], right[0]
    return (a, a.extra, a.as_of, *left[1:]) == (b, b.extra, b.as_of, *right[1:])


@SETTINGS
@given(st.lists(_answers, max_size=6))
def test_a_round_round_trips(seen: List[Answer]) -> None:
    answers = {answer[0].job_id: answer for answer in seen}
    back = decode_round(encode_round(answers))
    assert list(back) == list(answers)
    assert all(_same(back[job_id], answers[job_id]) for job_id in answers)


@SETTINGS
@given(st.lists(_answers, max_size=6), st.lists(st.text(max_size=12), max_size=6))
def test_only_the_asked_ids_are_decoded(seen: List[Answer], asked: List[str]) -> None:
    answers = {answer[0].job_id: answer for answer in seen}
    back = decode_round(encode_round(answers), asked)
    assert set(back) == set(asked) & set(answers)
    assert all(_same(back[job_id], answers[job_id]) for job_id in back)


def test_a_value_of_extra_that_is_no_json_is_left_out() -> None:
    status = JobStatus("1", JobState.RUNNING, extra={"raw_id": "1", "handle": object()})
    back = decode_round(encode_round({"1": (status, None, "answered")}))
    assert back["1"][0].extra == {"raw_id": "1"}


@SETTINGS
@given(_answers, st.lists(st.text(max_size=8), min_size=2, max_size=5, unique=True))
def test_jobs_sharing_all_but_their_ids_round_trip(shared: Answer, ids: List[str]) -> None:
    status, at, reach = shared
    extra = {**status.extra, "raw_id": "r"}
    answers = {i: (status.with_(job_id=i, extra={**extra, "raw_id": i}), at, reach) for i in ids}
    back = decode_round(encode_round(answers))
    assert list(back) == ids
    assert all(_same(back[job_id], answers[job_id]) for job_id in ids)


def test_one_instant_in_two_zones_keeps_each_zone() -> None:
    noon = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
    east = noon.astimezone(timezone(timedelta(hours=2)))
    answers = {
        job_id: (JobStatus(job_id, JobState.RUNNING, start_time=start), 1.0, "answered")
        for job_id, start in (("1", noon), ("2", east))
    }
    back = decode_round(encode_round(answers))
    assert [back[i][0].start_time.isoformat() for i in ("1", "2")] == [  # type: ignore[union-attr]
        noon.isoformat(),
        east.isoformat(),
    ]


def _answered(job_ids: List[str], state: JobState) -> Dict[str, Answer]:
    return {i: (JobStatus(i, state), None, Reach.ANSWERED.value) for i in job_ids}


class Scheduler:
    """Answers each id with what ``states`` says (else RUNNING); counts its rounds."""

    def __init__(self) -> None:
        self.rounds: List[List[str]] = []
        self.states: Dict[str, JobState] = {}

    def query(self, job_ids: List[str]) -> Dict[str, Observation]:
        self.rounds.append(list(job_ids))
        return {i: Observation(JobStatus(i, self.states.get(i, JobState.RUNNING))) for i in job_ids}


@pytest.fixture
def board(tmp_path: Path) -> PollBoard:
    return PollBoard(JobStore(tmp_path / "jobs.db"))


def _rows(board: PollBoard, statement: str) -> List[Any]:
    return list(board.store.query(statement))


def test_a_one_off_question_that_takes_the_round_leaves_no_wants_and_no_holder(
    board: PollBoard,
) -> None:
    scheduler = Scheduler()
    asked = Poller(scheduler.query, 30.0, board=board, target="t", floor=30.0)
    assert set(asked.ask(["1", "2"], one_off=True)) == {"1", "2"}
    assert _rows(board, "SELECT * FROM poll_wants") == []
    assert _rows(board, "SELECT owner, until FROM poll_lease") == [("", 0)]
    assert len(_rows(board, "SELECT * FROM poll_rounds")) == 1  # one row for the round
    other = Poller(scheduler.query, 30.0, board=board, target="t", floor=30.0)
    assert set(other.ask(["2"], one_off=True)) == {"2"}  # from the board: under the floor
    assert len(scheduler.rounds) == 1


def test_a_waiter_that_takes_the_round_keeps_its_wants_for_the_next_holder(
    board: PollBoard,
) -> None:
    scheduler = Scheduler()
    Poller(scheduler.query, 0.2, board=board, target="t").ask(["1"])
    assert _rows(board, "SELECT job_id FROM poll_wants") == [("1",)]


def test_the_newest_answer_of_each_id_is_served(board: PollBoard) -> None:
    board.publish("t", "x", _answered(["1", "2"], JobState.RUNNING), 100.0, 0.0)
    board.publish("t", "x", _answered(["2"], JobState.COMPLETED), 200.0, 0.0)
    found = board.answers("t", ["1", "2", "3"], 50.0)
    assert {i: (answer[0].state, at) for i, (answer, at) in found.items()} == {
        "1": (JobState.RUNNING, 100.0),
        "2": (JobState.COMPLETED, 200.0),
    }
    assert set(board.answers("t", ["1", "2"], 150.0)) == {"2"}  # "1" only older than asked
    assert board.answers("other", ["1"], 0.0) == {}


def test_an_id_answered_final_is_not_asked_again(board: PollBoard) -> None:
    scheduler = Scheduler()
    holder = Poller(scheduler.query, 0.2, board=board, target="t")
    other = Poller(scheduler.query, 0.2, board=board, target="t")
    holder.ask(["1"])
    other.ask(["2"])  # wanted in the holder's next round
    scheduler.states["2"] = JobState.COMPLETED
    time.sleep(0.25)
    holder.ask(["1"])
    assert sorted(scheduler.rounds[-1]) == ["1", "2"]
    time.sleep(0.25)
    holder.ask(["1"])  # "2" is still wanted (its want lives on) but ended
    assert scheduler.rounds[-1] == ["1"]


def test_forget_drops_the_ids_from_every_round_kept(board: PollBoard) -> None:
    board.publish("t", "x", _answered(["1", "2"], JobState.COMPLETED), time.time(), 0.0)
    board.forget("t", ["1"])
    assert set(board.answers("t", ["1", "2"], 0.0)) == {"2"}
    board.want("t", ["1", "2"], "w", time.time() + 60, 1.0)
    assert board.wanted("t", time.time())[0] == ["1"]  # no longer final: asked again


def test_rounds_nobody_can_take_are_dropped(
    board: PollBoard, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hpcbridge.store.polls.ROUNDS_KEPT_FOR", 10.0)
    now = time.time()
    running = _answered(["1"], JobState.RUNNING)
    board.publish("t", "x", running, now - 30, 0.0, slack=1.0)
    board.publish("t", "x", running, now - 5, 0.0, slack=1.0)
    board.publish("t", "x", running, now, 0.0, slack=1.0)
    assert [r[0] for r in _rows(board, "SELECT at FROM poll_rounds")] == [now - 5, now]
    board.want("t", ["1"], "w", now + 600, 60.0)  # a waiter of a minute's interval
    board.publish("t", "x", running, now + 1, 0.0, slack=1.0)
    assert len(_rows(board, "SELECT at FROM poll_rounds")) == 3  # kept for its gap


def test_a_copy_with_changes_is_what_replace_gives() -> None:
    moment = datetime(2026, 1, 2, tzinfo=timezone.utc)
    status = JobStatus("1", JobState.PENDING, reason="Priority", extra={"raw_id": "1"})
    changed = status.with_(state=JobState.RUNNING, as_of=moment)
    assert (changed.state, changed.as_of, changed.reason, changed.extra) == (
        JobState.RUNNING,
        moment,
        "Priority",
        {"raw_id": "1"},
    )
    assert status.state is JobState.PENDING and status.as_of is None
    with pytest.raises(TypeError, match="no field 'status'"):
        status.with_(status=JobState.RUNNING)
    seen = Observation(status).stamped(5.0).with_status(changed)
    assert (seen.status, seen.answered_at, seen.source) == (changed, 5.0, Source.SCHEDULER)


def test_a_state_folder_of_the_previous_releases_opens_and_shares_the_poll(
    tmp_path: Path,
) -> None:
    import sqlite3

    path = tmp_path / "jobs.db"
    with sqlite3.connect(str(path)) as db:  # the poll tables as the releases before made them
        db.executescript(
            "CREATE TABLE poll_answers (target TEXT NOT NULL, job_id TEXT NOT NULL, "
            "at REAL NOT NULL, final INTEGER NOT NULL, answer TEXT NOT NULL, "
            "PRIMARY KEY (target, job_id));"
            "CREATE TABLE poll_lease (target TEXT PRIMARY KEY, owner TEXT NOT NULL, "
            "until REAL NOT NULL, last_round REAL, duration REAL);"
            "CREATE TABLE poll_rounds (target TEXT NOT NULL, at REAL NOT NULL, "
            "answers TEXT NOT NULL, finals TEXT NOT NULL);"
        )
        # a process of the previous release polls (this one stands in: it lives), and
        # published a round: its answers are read as ours
        db.execute(
            "INSERT INTO poll_lease VALUES ('t', ?, ?, ?, NULL)",
            (f"{me()}:previous", time.time() + 600, time.time()),
        )
        entry = ["COMPLETED", 0, None, None, "COMPLETED", "", {}, None, time.time(), "answered"]
        db.execute(
            "INSERT INTO poll_rounds VALUES ('t', ?, ?, '[\"1\"]')",
            (time.time(), f'{{"1": {json.dumps(entry)}}}'),
        )
    scheduler = Scheduler()
    poller = Poller(scheduler.query, 30.0, board=PollBoard(JobStore(path)), target="t")
    found = poller.ask(["1"])
    assert found["1"].status.state is JobState.COMPLETED and scheduler.rounds == []
    assert set(poller.ask(["1", "2"])) == {"1"}  # "2" waits for the holder's next round
    wants = _rows(PollBoard(JobStore(path)), "SELECT job_id, owner FROM poll_wants")
    assert sorted(wants) == [("1", poller.owner), ("2", poller.owner)]  # the holder asks them
