"""One status round's parsers: squeue and sacct answer only for the ids asked, read only
their rows, and never raise on what a scheduler (or a broken pipe) may print."""

from __future__ import annotations

import shlex
from datetime import timezone
from pathlib import Path
from typing import Dict, List

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcbridge.model import JobState, JobStatus
from hpcbridge.schedulers.slurm import ids as slurm_ids
from hpcbridge.schedulers.slurm import queries, status

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
UTC = timezone.utc


def recorded(name: str) -> str:
    assert (DATA / f"{name}.rc").read_text().strip() == "0"
    return (DATA / f"{name}.txt").read_text()


def full(found: Dict[str, JobStatus]) -> Dict[str, tuple]:
    """What a status says, ``extra`` included (equality leaves it out)."""
    return {job_id: (answer, answer.extra) for job_id, answer in found.items()}


# -- recorded rounds ----------------------------------------------------------------------

#: squeue_argv's own --Format (recorded: one line of tests/data/slurm/squeue_completing.txt)
#: and sacct_argv's own --format
DRIVER_RECORDINGS = [
    ("squeue_completing", status.parse_squeue),
    ("status_round/squeue_pending", status.parse_squeue),
    ("status_round/squeue_array", status.parse_squeue),
    ("status_round/sacct_cancelled", status.parse_sacct),
]


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        # recorded by id (as another user's jobs are asked): --me lists them all
        ("status_round/squeue_pending", lambda ids: queries.squeue_argv(ids, by_id=True)),
        ("status_round/squeue_array", queries.squeue_argv),
        ("status_round/sacct_cancelled", queries.sacct_argv),
    ],
)
def test_the_recorded_commands_are_the_drivers(name, argv) -> None:
    words = shlex.split((DATA / f"{name}.cmd").read_text())
    jobs = next(word for word in words if word.startswith("--jobs="))
    assert words == argv(jobs.split("=", 1)[1].split(","))


@pytest.mark.parametrize(("name", "parse"), DRIVER_RECORDINGS)
def test_asking_for_some_ids_answers_those_as_the_whole_output_does(name, parse) -> None:
    text = recorded(name)
    every = parse(text)
    assert every, f"{name}: the recording answers for no job"
    ids = sorted(every)
    some = ids[::2] + ["999999"]  # and one the output does not name
    found = parse(text, wanted=some)
    assert set(found) == set(ids[::2])
    assert full(found) == {job_id: full(every)[job_id] for job_id in found}


def test_a_recorded_round_of_many_pending_jobs() -> None:
    text = recorded("status_round/squeue_pending")
    found = status.parse_squeue(text)
    assert len(found) == len(text.splitlines()) >= 100
    for job_id, answer in found.items():
        assert answer.job_id == job_id and answer.state is JobState.PENDING
        assert answer.start_time is None and answer.end_time is None  # a forecast is no start
        assert answer.exit_code is None and answer.reason == "Dependency"
        assert answer.extra["raw_id"] == job_id


def test_a_recorded_pending_array_answers_for_each_task_asked() -> None:
    text = recorded("status_round/squeue_array")
    tasks = [line.split("|", 1)[0] for line in text.splitlines()]
    assert len(tasks) == 8 and all("_" in task for task in tasks)  # --array: a row per task
    array = tasks[0].split("_", 1)[0]
    found = status.parse_squeue(text, wanted=[*tasks[-2:], array])
    assert list(found) == tasks[-2:]  # the array's own id is no task
    assert all(answer.state is JobState.PENDING for answer in found.values())


def test_a_recorded_round_of_jobs_cancelled_while_pending() -> None:
    text = recorded("status_round/sacct_cancelled")
    ids = [line.split("|", 1)[0] for line in text.splitlines()]
    found = status.parse_sacct(text, wanted=ids)
    assert list(found) == ids
    for answer in found.values():
        assert answer.state is JobState.CANCELLED and answer.native_state.startswith("CANCELLED")
        assert answer.exit_code is None and answer.start_time is None  # it never ran
        assert answer.end_time is not None
        assert answer.reason == "cancelled while pending (Dependency)"


# -- rows and ids ---------------------------------------------------------------------------


def test_squeue_asks_by_id_up_to_a_limit_then_lists_the_users_jobs() -> None:
    few = [str(index) for index in range(queries.BY_USER_OVER)]
    many = [str(index) for index in range(queries.BY_USER_OVER + 1)]
    assert f"--jobs={','.join(few)}" in queries.squeue_argv(few)
    assert "--me" in queries.squeue_argv(many) and queries.by_user(many)
    assert f"--jobs={','.join(many)}" in queries.squeue_argv(many, by_id=True)
    tasks = [f"40_{index}" for index in range(200)]  # one entry: the array's id
    assert "--jobs=40" in queries.squeue_argv(tasks) and not queries.by_user(tasks)


def test_the_rows_of_jobs_not_asked_are_left_out() -> None:
    """What ``--me`` lists besides the ids asked: other jobs, other arrays' rows."""
    asked = "5|5|PENDING|Priority|N/A|N/A|0|\n13_[5-9]|13|PENDING|Priority|N/A|N/A|0|\n"
    others = (
        "6|6|RUNNING|None|2026-11-29T15:32:06|NONE|0|\n"
        "14_[1-3]|14|PENDING|Priority|N/A|N/A|0|\n"
        "15_2|16|RUNNING|None|2026-11-29T15:32:06|NONE|0|\n"
    )
    found = status.parse_squeue(others + asked + others, wanted=["13_6", "5", "16", "7"])
    assert list(found) == ["13_6", "5", "16"]
    assert found["16"].state is JobState.RUNNING  # an array task, by its own job id
    every = status.parse_squeue(asked + others)
    assert full(found) == {job_id: full(every)[job_id] for job_id in found}


def test_a_range_row_answers_only_for_the_tasks_asked() -> None:
    text = "13_[5-9%2]|13|PENDING|JobArrayTaskLimit|N/A|N/A|0|\n"
    assert list(status.parse_squeue(text, wanted=["13_7", "13_12"])) == ["13_7"]
    assert list(status.parse_squeue(text)) == [f"13_{index}" for index in range(5, 10)]


def test_a_running_task_answers_to_its_own_job_id_when_that_is_asked() -> None:
    text = "9_0|11|RUNNING|None|2026-11-29T15:32:06|NONE|0|\n"
    found = status.parse_squeue(text, wanted=["11"], zone=UTC)
    assert list(found) == ["11"] and found["11"].state is JobState.RUNNING
    assert found["11"].start_time is not None


def test_sacct_answers_a_task_asked_from_its_arrays_bare_row() -> None:
    text = "21|21|CANCELLED by 0|0:0|None|2026-12-03T07:55:31|None\n"
    found = status.parse_sacct(text, wanted=["21_0", "21_1"])
    assert list(found) == ["21_0", "21_1"]
    assert all(answer.state is JobState.CANCELLED for answer in found.values())
    assert list(status.parse_sacct(text)) == ["21"]


def test_only_what_a_state_keeps_is_read() -> None:
    # A pending job's StartTime is a forecast and its exit code meaningless: neither is
    # read, so a field Slurm leaves odd there cannot spoil the answer.
    text = "5|5|PENDING|Priority|2099-01-01T00:00:00|garbage|garbage|\n"
    answer = status.parse_squeue(text)["5"]
    assert answer.start_time is None and answer.end_time is None and answer.exit_code is None
    ended = "6|6|FAILED|NonZeroExitCode|2026-11-29T15:32:06|2026-11-29T15:32:07|768|\n"
    failed = status.parse_squeue(ended, zone=UTC)["6"]
    assert failed.exit_code == 3 and failed.end_time is not None


def test_job_list_keeps_the_order_and_names_each_id_once() -> None:
    ids = [str(index) for index in range(2000, 1000, -1)]
    assert slurm_ids.job_list(ids + ids[:10]) == ids
    tasks = [f"7_{index}" for index in range(60)]
    assert slurm_ids.job_list(["5", *tasks, "5", "8"]) == ["5", "7", "8"]


# -- arbitrary input ------------------------------------------------------------------------

CELLS = st.one_of(
    st.sampled_from(
        [
            "5",
            "9_0",
            "9_[1-3%2]",
            "9_[bad",
            "11",
            "PENDING",
            "RUNNING",
            "CANCELLED by 0",
            "COMPLETED",
            "FAILED",
            "TIMEOUT",
            "PD",
            "None",
            "N/A",
            "Unknown",
            "2026-11-29T15:32:06",
            "0:15",
            "768",
            "",
        ]
    ),
    st.text(max_size=12),
)
LINES = st.lists(CELLS, max_size=9).map("|".join)
OUTPUTS = st.one_of(st.lists(LINES, max_size=12).map("\n".join), st.text(max_size=300))
IDS = st.lists(st.sampled_from(["5", "9_0", "9_1", "9_2", "11", "12_4", "x"]), max_size=5)


def well_formed(found: Dict[str, JobStatus], wanted: List[str] = None) -> None:
    for job_id, answer in found.items():
        assert isinstance(answer, JobStatus) and answer.job_id == job_id
        assert isinstance(answer.state, JobState)
        if not answer.state.is_terminal:
            assert answer.exit_code is None and answer.end_time is None
    if wanted is not None:
        assert set(found) <= set(wanted)


@given(OUTPUTS, IDS)
def test_any_squeue_output_gives_statuses(text: str, wanted: List[str]) -> None:
    well_formed(status.parse_squeue(text, zone=UTC))
    well_formed(status.parse_squeue(text, zone=UTC, wanted=wanted), wanted)


@given(OUTPUTS, IDS)
def test_any_sacct_output_gives_statuses(text: str, wanted: List[str]) -> None:
    every = status.parse_sacct(text, zone=UTC)
    well_formed(every)
    found = status.parse_sacct(text, zone=UTC, wanted=wanted)
    well_formed(found, wanted)
    # what the whole output says of an id, asking for it says too
    assert all(found[job_id] == every[job_id] for job_id in found if job_id in every)


@given(OUTPUTS)
def test_any_light_squeue_output_gives_states(text: str) -> None:
    states = queries.parse_squeue_states(text)
    assert all(isinstance(key, str) and isinstance(value, str) for key, value in states.items())
