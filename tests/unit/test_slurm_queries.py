"""The Slurm drivers' questions (slurm/queries.py) and pyslurm's records read as sacct's rows
(slurm/pyslurm_records.py): the order queue -> history -> UNKNOWN written once, the
answers' verdicts (asked again, not asked now, no history), and any reply or record giving
statuses or the project's own errors, never another exception."""

from __future__ import annotations

import types
from typing import Any, Dict, List, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbridge.engine.driver import Again, CannotAsk, NotAskedNow
from hpcbridge.model import JobState, JobStatus
from hpcbridge.schedulers.slurm import pyslurm_records as records
from hpcbridge.schedulers.slurm import queries
from hpcbridge.transports.base import CommandResult

SETTINGS = settings(max_examples=60, deadline=None)


def reply(code: int, out: str = "", err: str = "") -> CommandResult:
    return CommandResult(["squeue"], code, out, err)


def done(job_id: str) -> JobStatus:
    return JobStatus(job_id, JobState.COMPLETED, exit_code=0)


def test_the_queue_then_the_history_then_unknown() -> None:
    asked: List[Sequence[str]] = []

    def live(ids: List[str]) -> Dict[str, JobStatus]:
        asked.append(("live", *ids))
        return {"1": done("1")}

    def history(asked_ids: List[str], wanted: List[str]) -> Dict[str, JobStatus]:
        asked.append(("history", *asked_ids))
        return {"2": done("2")} if "2" in asked_ids else {"7_3": done("7_3")}

    found = queries.statuses(["1", "2", "7_3", "9", "1"], live, history)
    assert list(found) == ["1", "2", "7_3", "9"]
    assert found["9"].state is JobState.UNKNOWN and found["9"].reason == queries.NOT_FOUND
    # the task the history had no record of is asked again under its array's id
    assert asked == [("live", "1", "2", "7_3", "9"), ("history", "2", "7_3", "9"), ("history", "7")]


def test_no_history_is_asked_once_per_round() -> None:
    calls: List[str] = []

    def history(asked_ids: List[str], wanted: List[str]) -> Dict[str, JobStatus]:
        calls.append("sacct")
        raise queries.NoHistory("accounting storage is disabled", True)

    found = queries.statuses(["5_1"], lambda ids: {}, history)
    assert found["5_1"].state is JobState.UNKNOWN and calls == ["sacct"]


def test_past_the_limit_one_squeue_lists_the_users_jobs_and_the_rest_are_asked_by_id() -> None:
    """``by_user`` decides for the squeue argv, its chunk and the look by id alike."""
    few = [str(index) for index in range(queries.BY_USER_OVER)]
    many = [str(index) for index in range(queries.BY_USER_OVER + 1)]
    assert queries.squeue_chunk(few, 7) == 7 and queries.squeue_chunk(many, 7) == len(many)
    by_id: List[List[str]] = []

    def looked(ids: List[str]) -> Dict[str, JobStatus]:
        by_id.append(ids)
        return {}

    for ids in (few, many):
        queries.statuses(ids, lambda ids: {}, lambda asked, wanted: {}, looked)
    assert by_id == [many]  # a list of ids asked by id already: no second look


def test_squeue_verdicts() -> None:
    with pytest.raises(Again) as busy:
        queries.squeue_reply(reply(1, err="squeue: error: Unable to contact slurm controller"), [])
    assert isinstance(busy.value.error, NotAskedNow)
    with pytest.raises(NotAskedNow, match="Access denied"):
        queries.squeue_reply(reply(1, err="squeue: error: Access denied"), ["1"])
    purged = "slurm_load_jobs error: Invalid job id specified"
    assert queries.squeue_reply(reply(1, err=purged), ["1"]) == {}


def test_the_light_round_asks_in_full_only_what_changed() -> None:
    last = {"1": JobStatus("1", JobState.PENDING, native_state="PENDING")}
    last["2"] = JobStatus("2", JobState.PENDING, native_state="PENDING")
    same, to_ask = queries.light_round(["1", "2", "3"], last, {"1": "PENDING", "2": "RUNNING"})
    assert list(same) == ["1"] and to_ask == ["2"]  # 3 left the queue: the history says
    assert queries.light_round(["1"], last, None) == ({}, ["1"])
    with pytest.raises(queries.NoAnswer):
        queries.states_reply(reply(1, err="squeue: unrecognized option '--only-job-state'"))


def test_a_key_lookup_that_cannot_tell() -> None:
    with pytest.raises(CannotAsk):
        queries.keys_reply(reply(1, err="squeue: error: Access denied"), ["k"])
    with pytest.raises(Again):
        queries.keys_reply(reply(1, err="Socket timed out on send/recv operation"), ["k"])
    rows = "41|hpcbridge:a\n42_[0-3]|hpcbridge:b\n43|other\n"
    assert queries.keys_reply(reply(0, rows), ["a", "b", "c"]) == {"a": "41", "b": "42"}


@SETTINGS
@given(st.integers(0, 255), st.text(max_size=60), st.text(max_size=60))
def test_any_reply_is_statuses_or_a_verdict(code: int, out: str, err: str) -> None:
    for parse in (queries.squeue_reply, queries.sacct_reply):
        try:
            found = parse(reply(code, out, err), ["1", "2_3"])
        except (Again, NotAskedNow, queries.NoHistory):
            continue
        assert set(found) <= {"1", "2_3"}
    try:
        assert isinstance(queries.keys_reply(reply(code, out, err), ["k"]), dict)
    except (Again, CannotAsk):
        pass


# -- pyslurm's records as rows -------------------------------------------------------

_VALUE = st.one_of(st.none(), st.integers(-5, 2**31), st.text(max_size=8))


def job(**attributes: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(**attributes)


@SETTINGS
@given(
    st.fixed_dictionaries(
        {},
        optional={
            name: _VALUE
            for name in (
                "id",
                "array_id",
                "array_task_id",
                "array_tasks_waiting",
                "state",
                "state_reason",
                "exit_code",
                "exit_code_signal",
                "start_time",
                "end_time",
            )
        },
    ),
    st.booleans(),
)
def test_any_record_gives_statuses_never_an_error(fields: Dict[str, Any], history: bool) -> None:
    wanted = ["1", "2_0", str(fields.get("id")), f"{fields.get('array_id')}_0"]
    found = records.statuses_from_jobs([job(**fields)], wanted, history=history)
    assert set(found) <= set(wanted)


def test_a_record_reads_as_the_sacct_row_of_its_job() -> None:
    ended = job(id=7, array_id=None, state="FAILED", exit_code=0, exit_code_signal=9)
    ended.start_time, ended.end_time, ended.state_reason = 1_800_000_000, 1_800_000_060, "a|b"
    row = records.sacct_rows([ended])
    assert row.split("|")[:4] == ["7", "7", "FAILED", "0:9"]
    status = records.statuses_from_jobs([ended], ["7"])["7"]
    assert status.exit_code == 137 and status.reason == "a/b"
