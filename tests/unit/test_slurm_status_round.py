"""One status round's parsers: squeue and sacct answer only for the ids asked, read only
their rows, and never raise on what a scheduler (or a broken pipe) may print."""

from __future__ import annotations

from datetime import timezone
from pathlib import Path
from typing import Dict, List

from hypothesis import given
from hypothesis import strategies as st

from hpcbridge.model import JobState, JobStatus
from hpcbridge.schedulers.slurm import status

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
UTC = timezone.utc


def recorded(name: str) -> str:
    assert (DATA / f"{name}.rc").read_text().strip() == "0"
    return (DATA / f"{name}.txt").read_text()


def full(found: Dict[str, JobStatus]) -> Dict[str, tuple]:
    """What a status says, ``extra`` included (equality leaves it out)."""
    return {job_id: (answer, answer.extra) for job_id, answer in found.items()}


# -- rows and ids ---------------------------------------------------------------------------


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
    assert status.job_list(ids + ids[:10]) == ids
    tasks = [f"7_{index}" for index in range(60)]
    assert status.job_list(["5", *tasks, "5", "8"]) == ["5", "7", "8"]


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
    states = status.parse_squeue_states(text)
    assert all(isinstance(key, str) and isinstance(value, str) for key, value in states.items())
