"""``hpcbridge cost`` counts what the scheduler charged, each job once (issue 46, item 7): the
sacct and ``flux jobs`` parsers on recorded answers and on any text, a pack's allocation
counted with its tasks under it, mock jobs apart, the charge kept in an old store too."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcbridge.engine.cost import (
    CHARGED,
    MOCK,
    REQUESTED,
    job_cost,
    no_price_note,
    parse_day_or_time,
    report,
    total,
    within,
)
from hpcbridge.model import Charge
from hpcbridge.schedulers.flux.commands import charges_argv
from hpcbridge.schedulers.flux.instance_answers import parse_charges
from hpcbridge.schedulers.slurm.cluster import (
    parse_sacct_charges,
    parse_tres,
    sacct_charges_argv,
)
from hpcbridge.store.jobs import JobRecord, JobStore

DATA = Path(__file__).resolve().parents[1] / "data"
END = datetime(2026, 12, 5, 12, 0, tzinfo=timezone.utc)


def ran(job_id: str, scheduler: str, seconds: float, **fields: object) -> JobRecord:
    start = END - timedelta(seconds=seconds)
    return JobRecord(
        job_id,
        scheduler,
        host="login1",
        state="COMPLETED",
        submit_time=start,
        start_time=start,
        end_time=END,
        **fields,  # type: ignore[arg-type]
    )


# -- the parsers ---------------------------------------------------------------------------


def test_sacct_charges_are_what_slurm_allocated_recorded_on_22_05() -> None:
    """An --exclusive job of one task on a node of 8 CPUs is charged all 8 (CPUTimeRAW);
    one of a CPU, one (tests/data/slurm/charges/README.md)."""
    charges = parse_sacct_charges((DATA / "slurm" / "charges" / "sacct_charges.txt").read_text())
    assert charges == {
        "137": Charge(24.0, 0.0, 24.0),  # 8 CPUs x 3 s, billing 8 x 3 s
        "138": Charge(2.0, 0.0, 2.0),
    }


def test_sacct_charges_rows_by_hand() -> None:
    text = (
        "12|COMPLETED|10|20|billing=4,cpu=2,gres/gpu=1,mem=1000M,node=1\n"
        "13_2|RUNNING|5|5|cpu=1,mem=500M,node=1\n"
        "13_[3-9]|PENDING|0|0|\n"  # an array's waiting tasks: no job of their own
        "junk\n"
    )
    charges = parse_sacct_charges(text)
    assert charges == {
        "12": Charge(20.0, 10.0, 40.0),
        "13_2": Charge(5.0, 0.0, None, final=False),  # still growing: not kept
    }
    argv = sacct_charges_argv(["12", "13_2"])
    assert argv[:2] == ["sacct", "-X"]
    assert "--format=JobID,State,ElapsedRaw,CPUTimeRAW,AllocTRES" in argv
    assert parse_tres("billing=2,cpu=2,mem=1000M") == {"billing": 2.0, "cpu": 2.0}


def test_flux_charges_are_the_cores_of_r_times_run_time_recorded_on_0_88() -> None:
    """1 core, an --exclusive job's 2 (the whole node), a failed one, one that never ran."""
    recorded = DATA / "flux" / "jobs_charges_0.88.txt"
    runtimes = [float(line.split("|")[2]) for line in recorded.read_text().splitlines()]
    charges = list(parse_charges(recorded.read_text()).items())
    assert [job_id for job_id, _ in charges] == ["ƒSHEki3", "ƒZsZ5QT", "ƒf4WZcT", "ƒkwViRm"]
    cpu = [charge.cpu_seconds for _, charge in charges]
    assert cpu == [runtimes[0], 2 * runtimes[1], runtimes[2], 0.0]
    assert all(c.gpu_seconds is None and c.billing_seconds is None for _, c in charges)


def test_flux_charges_by_hand() -> None:
    charges = parse_charges("123456789|2|3.5\n987|1|0.0\nnot|a|job\n")
    assert [c.as_row() for c in charges.values()] == [(7.0, None, None), (0.0, None, None)]
    assert charges_argv("flux", ["ƒBukQL"])[-1] == "123456789"


@given(st.text())
def test_the_parsers_take_any_text(text: str) -> None:
    for charge in [*parse_sacct_charges(text).values(), *parse_charges(text).values()]:
        assert isinstance(charge, Charge)
    parse_tres(text)


@given(st.lists(st.tuples(st.integers(0, 10**7), st.integers(0, 256)), max_size=20))
def test_sacct_rows_give_cputimeraw_back(rows: list) -> None:
    text = "".join(
        f"{i + 1}|COMPLETED|{e}|{e * c}|cpu={c},node=1\n" for i, (e, c) in enumerate(rows)
    )
    charges = parse_sacct_charges(text)
    assert [charges[str(i + 1)].cpu_seconds for i in range(len(rows))] == [
        float(e * c) for e, c in rows
    ]


# -- counting --------------------------------------------------------------------------------


def test_a_charge_wins_over_the_request_and_a_mock_job_costs_nothing() -> None:
    exclusive = ran("7", "slurm", 10, ntasks=1, charged_cpu_seconds=20.0)
    asked = ran("8", "slurm", 10, ntasks=1)
    mock = ran("9", "mock", 3600, ntasks=4)
    assert job_cost(exclusive, 3600.0, 0.0).basis == CHARGED
    assert job_cost(exclusive, 3600.0, 0.0).cost == pytest.approx(20.0)
    assert job_cost(asked, 3600.0, 0.0).basis == REQUESTED
    assert job_cost(asked, 3600.0, 0.0).cost == pytest.approx(10.0)
    assert job_cost(mock, 3600.0, 0.0).basis == MOCK and job_cost(mock, 3600.0, 0.0).cost == 0


def test_a_pack_is_counted_once_its_tasks_under_its_allocation() -> None:
    allocation = ran("40", "slurm", 100, nodes=1, charged_cpu_seconds=200.0)
    tasks = [ran(f"ƒt{i}", "flux", 30, ntasks=1) for i in range(3)]
    stray = ran("ƒgone", "flux", 30, ntasks=1)  # its allocation is not among the records
    mock = ran("1", "mock", 60, ntasks=1)
    inside = {("flux", "login1", t.job_id): ("slurm", "login1", "40") for t in tasks}
    inside[("flux", "login1", "ƒgone")] = ("slurm", "login1", "41")
    counted = report([allocation, *tasks, stray, mock], 1.0, 0.0, inside, now=END)
    [row] = counted.rows
    assert row.job_id == "40" and [t.job_id for t in row.tasks] == [t.job_id for t in tasks]
    assert total(counted.rows)["cpu_hours"] == pytest.approx(200 / 3600)
    assert [m.job_id for m in counted.mock] == ["1"] and counted.mock_sources == [5]
    assert row.to_json()["tasks"][0]["cpu_hours"] == pytest.approx(30 / 3600, abs=1e-6)


def test_the_price_line_names_the_variables_only_when_no_price_is_set() -> None:
    note = no_price_note(0.0, 0.0)
    assert note and "HPCBRIDGE_CPU_COST_PER_HOUR" in note and "HPCBRIDGE_GPU_COST_PER_HOUR" in note
    assert no_price_note(0.05, 0.0) is None


def test_dates_filter_by_submit_time() -> None:
    since = parse_day_or_time("2026-12-05T11:00Z")
    until = parse_day_or_time("2026-12-05", end=True)
    assert until == datetime(2026, 12, 6).astimezone()
    record = ran("5", "slurm", 1800)  # submitted 11:30 UTC
    assert within(record, since, None) and within(record, None, until)
    assert not within(record, parse_day_or_time("2026-12-05T11:45+00:00"), None)
    with pytest.raises(ValueError, match="ISO date"):
        parse_day_or_time("yesterday")


# -- kept in the store -----------------------------------------------------------------------


def test_a_charge_is_kept_and_an_old_store_gets_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    old = sqlite3.connect(str(path))  # a store from before the charge was kept
    old.execute(
        "CREATE TABLE hpc_jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, "
        "scheduler TEXT NOT NULL, transport TEXT NOT NULL DEFAULT 'local', host TEXT NOT NULL "
        "DEFAULT '', flux_uri TEXT, job_name TEXT, state TEXT NOT NULL DEFAULT 'PENDING', "
        "native_state TEXT, reason TEXT, exit_code INTEGER, submit_time TEXT, start_time TEXT, "
        "end_time TEXT, nodes INTEGER, ntasks INTEGER, cpus_per_task INTEGER, gpus INTEGER, "
        "time_limit REAL, partition TEXT, qos TEXT, account TEXT, remote_dir TEXT, script TEXT, "
        "log_path TEXT, exit_file TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0, "
        "updated_at TEXT, UNIQUE (scheduler, host, job_id))"
    )
    old.execute("INSERT INTO hpc_jobs (job_id, scheduler, host) VALUES ('7', 'slurm', 'h')")
    old.commit()
    old.close()
    store = JobStore(path)
    assert store.get("7").charged_cpu_seconds is None  # type: ignore[union-attr]
    store.record_charges("slurm", "h", {"7": Charge(20.0, 0.0, 40.0).as_row()})
    kept = store.get("7")
    assert kept is not None and kept.charged_cpu_seconds == 20.0
    assert kept.charged_billing_seconds == 40.0
    store.close()
