"""The tasks of a Slurm array cancelled before they started: sacct has no row of their
own, only the array's (``123_[0-1]``, or its bare id ``123`` just after the cancel).
The parser maps that row onto each task; recorded from Slurm 22.05 and 25.11
(``tests/data/slurm/array_cancel/record.sh``)."""

from __future__ import annotations

import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Sequence

import pytest

from hpcbridge.model import JobState
from hpcbridge.schedulers.slurm import queries, status
from hpcbridge.schedulers.slurm.cli_driver import SlurmCliDriver
from hpcbridge.schedulers.slurm.pyslurm_records import statuses_from_jobs
from hpcbridge.transports.base import CommandResult

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm" / "array_cancel"
LABELS = ("2205", "2511")


def jobs_of(label: str) -> Dict[str, str]:
    path = DATA / f"{label}_jobs.txt"
    if not path.exists():
        pytest.skip(f"no recording of Slurm {label} in {DATA}")
    return dict(line.split("=", 1) for line in path.read_text().split())


def recording(label: str, name: str) -> str:
    assert (DATA / f"{label}_{name}.rc").read_text().strip() == "0"
    return (DATA / f"{label}_{name}.txt").read_text()


def tasks(array: str, count: int) -> List[str]:
    return [f"{array}_{index}" for index in range(count)]


@pytest.mark.parametrize("label", LABELS)
def test_the_recorded_command_is_the_drivers(label: str) -> None:
    jobs = jobs_of(label)
    argv = shlex.split((DATA / f"{label}_pending_base.cmd").read_text())
    assert argv == queries.sacct_argv([jobs["pending"]])
    argv = shlex.split((DATA / f"{label}_half_tasks.cmd").read_text())
    assert argv == queries.sacct_argv(tasks(jobs["half"], 4))


@pytest.mark.parametrize("label", LABELS)
@pytest.mark.parametrize("case", ["pending", "at_once"])
@pytest.mark.parametrize("when", ["_now", ""])
def test_tasks_that_never_started_are_cancelled_by_the_arrays_row(
    label: str, case: str, when: str
) -> None:
    jobs = jobs_of(label)
    wanted = tasks(jobs[case], 2)
    asked = DATA / f"{label}_{case}_tasks{when}.txt"
    if asked.exists():  # asked by the tasks' ids, sacct has nothing
        assert status.parse_sacct(asked.read_text(), wanted=wanted) == {}
    found = status.parse_sacct(recording(label, f"{case}_base{when}"), wanted=wanted)
    for task in wanted:
        assert found[task].state is JobState.CANCELLED, found
        assert found[task].job_id == task
        assert found[task].native_state.startswith("CANCELLED")
    text = recording(label, f"{case}_base{when}")
    if "[" not in text:  # the bare id: without the tasks asked for, it answers for itself
        assert set(status.parse_sacct(text)) == {jobs[case]}


@pytest.mark.parametrize("label", LABELS)
@pytest.mark.parametrize(("case", "count"), [("half", 4), ("third", 3), ("cpus", 3)])
def test_tasks_that_ran_keep_their_own_rows(label: str, case: str, count: int) -> None:
    jobs = jobs_of(label)
    wanted = tasks(jobs[case], count)
    own = status.parse_sacct(recording(label, f"{case}_tasks"), wanted=wanted)
    found = status.parse_sacct(recording(label, f"{case}_base"), wanted=wanted)
    assert {task: found[task].state for task in wanted} == dict.fromkeys(wanted, JobState.CANCELLED)
    for task, answer in own.items():  # a task's own row wins over the array's range
        assert found[task] == answer


#: seen on 22.05.8 (tasks 0 and 1 running, 2 pending for CPUs, then scancel): the array's
#: row keeps the whole range beside the rows of the tasks that ran
STALE_RANGE = (
    "9_0|10|CANCELLED by 0|0:0|2026-12-03T07:55:30|2026-12-03T07:55:31|None\n"
    "9_1|11|CANCELLED by 0|0:0|2026-12-03T07:55:30|2026-12-03T07:55:31|None\n"
    "9_[0-2]|9|CANCELLED by 0|0:0|None|2026-12-03T07:55:31|None\n"
)


def test_a_range_row_never_hides_the_row_of_a_task_that_ran() -> None:
    found = status.parse_sacct(STALE_RANGE, wanted=["9_0", "9_1", "9_2"])
    assert found["9_0"].start_time is not None and found["9_0"].extra["raw_id"] == "10"
    assert found["9_1"].start_time is not None
    assert found["9_2"].state is JobState.CANCELLED and found["9_2"].start_time is None


class Executor:
    """sacct by the tasks' ids says nothing; by the array's id, the array's row."""

    kind, host, is_local = "local", "testhost", True

    def __init__(self, by_tasks: str, by_array: str) -> None:
        self.by_tasks, self.by_array = by_tasks, by_array
        self.calls: List[List[str]] = []

    def run(self, argv: Sequence[str], timeout: Optional[float] = None, **_: Any) -> CommandResult:
        self.calls.append(list(argv))
        if argv[0] == "squeue":
            return CommandResult(list(argv), 0, "", "")
        out = self.by_tasks if "_" in argv[4] else self.by_array
        return CommandResult(list(argv), 0, out, "")


@pytest.mark.parametrize("label", LABELS)
def test_the_cli_driver_asks_the_array_when_sacct_has_no_task_row(label: str) -> None:
    jobs = jobs_of(label)
    wanted = tasks(jobs["pending"], 2)
    executor = Executor(recording(label, "pending_tasks_now"), recording(label, "pending_base_now"))
    driver = SlurmCliDriver(executor, query_retries=0.0, light_rounds=False)
    found = driver.query(wanted)
    assert {task: found[task].state for task in wanted} == dict.fromkeys(wanted, JobState.CANCELLED)
    assert [call[0] for call in executor.calls] == ["squeue", "sacct", "sacct"]
    assert executor.calls[-1] == queries.sacct_argv([jobs["pending"]])


def test_the_cli_driver_asks_sacct_once_for_plain_jobs() -> None:
    executor = Executor("", "")
    driver = SlurmCliDriver(executor, query_retries=0.0, light_rounds=False)
    assert driver.query(["999999"])["999999"].state is JobState.UNKNOWN
    assert [call[0] for call in executor.calls] == ["squeue", "sacct"]


def db_job(**fields: Any) -> Any:
    """A ``pyslurm.db.Job`` as slurmdbd gives it (only the fields hpcbridge reads)."""
    base = dict(array_id=None, array_task_id=None, array_tasks_waiting=None, start_time=None)
    base.update(end_time=1764748000, exit_code=0, exit_code_signal=0, state_reason="None")
    base.update(fields)
    return SimpleNamespace(**base)


#: pyslurm 25.11.2 on Slurm 25.11.7, db.Jobs.load of two arrays cancelled pending: the
#: waiting rest is slurmdbd's hex bitmap (slurmctld's jobs give "0-3")
@pytest.mark.parametrize("waiting", [None, "0-1", "0x3"])
def test_pyslurm_history_maps_the_arrays_record_onto_each_task(waiting: Optional[str]) -> None:
    record = db_job(id=31, array_id=31, array_tasks_waiting=waiting, state="CANCELLED")
    found = statuses_from_jobs([record], ["31_0", "31_1"], history=True)
    assert {job_id: s.state for job_id, s in found.items()} == {
        "31_0": JobState.CANCELLED,
        "31_1": JobState.CANCELLED,
    }


def test_pyslurm_a_task_that_ran_keeps_its_own_record() -> None:
    ran = db_job(id=10, array_id=9, array_task_id=1, state="CANCELLED", start_time=1764747990)
    rest = db_job(id=9, array_id=9, array_tasks_waiting="0x7", state="CANCELLED")
    for order in ([ran, rest], [rest, ran]):
        found = statuses_from_jobs(order, ["9_1", "9_2"], history=True)
        assert found["9_1"].extra["raw_id"] == "10" and found["9_1"].start_time is not None
        assert found["9_2"].state is JobState.CANCELLED


def test_pyslurm_live_jobs_never_lend_a_tasks_record_to_another() -> None:
    task0 = db_job(id=5, array_id=5, state="COMPLETED", start_time=1764747990)
    assert set(statuses_from_jobs([task0], ["5_0", "5_3"])) == {"5_0"}


def test_pyslurm_a_hex_waiting_mask_names_its_tasks() -> None:
    record = db_job(id=12380, array_id=12380, array_tasks_waiting="0x4", state="CANCELLED")
    assert set(statuses_from_jobs([record], ["12380_1", "12380_2"])) == {"12380_2"}
