import multiprocessing
import sqlite3
from datetime import datetime, timedelta, timezone

import pytest

from hpcbridge import JobState, JobStatus
from hpcbridge.engine.cost import job_cost
from hpcbridge.store import jobs as store_jobs
from hpcbridge.store.jobs import JobRecord, JobStore, retry_locked


def _writer(path, worker, count):
    store = JobStore(path)
    for index in range(count):
        job_id = f"{worker}-{index}"
        store.add(JobRecord(job_id=job_id, scheduler="mock", host="h"))
        store.update_status("mock", "h", JobStatus(job_id, JobState.RUNNING))
        store.update_status("mock", "h", JobStatus(job_id, JobState.COMPLETED, exit_code=0))


def test_concurrent_writers_lose_nothing(tmp_path):
    path = str(tmp_path / "jobs.db")
    JobStore(path)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, worker, 60)) for worker in range(6)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
        assert process.exitcode == 0
    records = JobStore(path).list()
    assert len(records) == 6 * 60
    assert {record.state for record in records} == {"COMPLETED"}


def test_roundtrip_and_unknown_not_written(tmp_path):
    store = JobStore(tmp_path / "db.sqlite")
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    store.add(
        JobRecord(job_id="7", scheduler="slurm", host="h", nodes=2, gpus=1, submit_time=start)
    )
    store.update_status("slurm", "h", JobStatus("7", JobState.RUNNING, start_time=start))
    store.update_status("slurm", "h", JobStatus("7", JobState.UNKNOWN))
    record = store.get("7")
    assert record.state == "RUNNING"
    assert record.start_time == start
    assert record.nodes == 2
    store.mark_cancel_requested("slurm", "h", ["7"])
    assert store.get("7", "slurm", "h").cancel_requested
    assert store.get("7", "mock") is None
    assert [r.job_id for r in store.list(state="running")] == ["7"]


def test_cost_attribution():
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    record = JobRecord(
        job_id="1",
        scheduler="slurm",
        ntasks=4,
        cpus_per_task=2,
        gpus=1,
        start_time=start,
        end_time=start + timedelta(hours=1, minutes=30),
    )
    cost = job_cost(record, cpu_price=0.5, gpu_price=2.0)
    assert cost.cpu_hours == 12.0
    assert cost.gpu_hours == 1.5
    assert cost.cost == 12.0 * 0.5 + 1.5 * 2.0


def test_constructor_creates_no_file(tmp_path):
    path = tmp_path / "state" / "jobs.db"
    store = JobStore(path)
    assert not path.exists() and not path.parent.exists()
    assert store.get("1") is None  # the first use opens (and creates) it
    assert path.exists()


def _count_selects(store):
    selects = []
    store._connect().set_trace_callback(
        lambda statement: selects.append(statement) if statement.startswith("SELECT") else None
    )
    return selects


def test_get_many_of_500_ids_is_one_query(tmp_path):
    store = JobStore(tmp_path / "jobs.db")
    store.add_many(JobRecord(job_id=str(i), scheduler="slurm", host="h") for i in range(600))
    selects = _count_selects(store)
    found = store.get_many("slurm", "h", [str(i) for i in range(500)])
    assert len(selects) == 1
    assert sorted(found, key=int) == [str(i) for i in range(500)]
    assert store.get_many("slurm", "other", ["1"]) == {}
    selects.clear()
    assert len(store.get_many("slurm", "h", [str(i) for i in range(2000)])) == 600
    assert len(selects) == 3  # chunked under SQLite's variable limit


def test_find_across_schedulers_and_hosts_newest_first(tmp_path):
    store = JobStore(tmp_path / "jobs.db")
    store.add(JobRecord(job_id="5", scheduler="slurm", host="a"))
    store.add(JobRecord(job_id="\u0192cAyxmV", scheduler="flux", host="b", flux_uri="local:///x"))
    store.add(JobRecord(job_id="5", scheduler="mock", host="c"))
    found = store.find(["5", "\u0192cAyxmV", "404"])
    assert [(r.scheduler, r.host) for r in found] == [("mock", "c"), ("flux", "b"), ("slurm", "a")]
    assert found[1].flux_uri == "local:///x"
    assert store.find([]) == []


def test_statuses_are_the_records_last_states(tmp_path):
    store = JobStore(tmp_path / "jobs.db")
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    store.add_many(JobRecord(job_id=str(i), scheduler="slurm", host="h") for i in range(3))
    store.update_status("slurm", "h", JobStatus("1", JobState.RUNNING, start_time=start))
    store.update_status(
        "slurm", "h", JobStatus("2", JobState.FAILED, exit_code=3, native_state="FAILED")
    )
    found = store.statuses("slurm", "h", ["0", "1", "2", "9"])
    assert set(found) == {"0", "1", "2"}
    assert found["0"].state is JobState.PENDING
    assert found["1"].state is JobState.RUNNING and found["1"].start_time == start
    assert (found["2"].state, found["2"].exit_code) == (JobState.FAILED, 3)
    assert store.statuses("slurm", "other", ["1"]) == {}


def test_a_database_of_an_older_release_gets_the_new_columns_and_keeps_its_rows(tmp_path):
    import sqlite3

    from hpcbridge.store.records import SCHEMA
    from hpcbridge.store.sweeps import SweepBook

    path = tmp_path / "jobs.db"
    # the tables as the first release made them: no kind, no reach
    old = SCHEMA.replace("    kind            TEXT,\n    reach           TEXT,\n", "")
    assert old != SCHEMA
    with sqlite3.connect(str(path)) as db:
        db.executescript(old)
        db.execute("INSERT INTO hpc_jobs (job_id, scheduler) VALUES ('7', 'slurm')")
        db.execute(
            "CREATE TABLE sweeps (name TEXT PRIMARY KEY, scheduler TEXT NOT NULL, "
            "transport TEXT NOT NULL, host TEXT NOT NULL, flux_uri TEXT, folder TEXT NOT NULL, "
            "max_queued INTEGER, steps TEXT NOT NULL, total INTEGER NOT NULL, "
            "created TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'feeding', "
            "feeder TEXT NOT NULL DEFAULT '', beat REAL NOT NULL DEFAULT 0)"
        )
        db.execute(
            "INSERT INTO sweeps (name, scheduler, transport, host, folder, steps, total, created) "
            "VALUES ('s', 'slurm', 'ssh', 'me@h:22', '/w', '[]', 0, 'now')"
        )
    store = JobStore(path)
    assert store.get("7", "slurm", "").reach is None
    store.add(JobRecord(job_id="8", scheduler="slurm", reach='{"ssh_host": "alias"}'))
    assert store.get("8", "slurm", "").reach == '{"ssh_host": "alias"}'
    assert SweepBook(store).get("s").reach is None


def _locked_then(answers):
    """An action that raises each exception of ``answers`` in turn, then returns "done"."""
    calls = []

    def action():
        calls.append(1)
        if len(calls) <= len(answers):
            raise answers[len(calls) - 1]
        return "done"

    return action, calls


def test_a_locked_statement_is_tried_again_until_it_goes_through():
    action, calls = _locked_then([sqlite3.OperationalError("database is locked")] * 2)
    assert retry_locked(action) == "done"
    assert len(calls) == 3


def test_another_sqlite_error_is_raised_at_once():
    action, calls = _locked_then([sqlite3.OperationalError("no such table: hpc_jobs")])
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        retry_locked(action)
    assert len(calls) == 1


def test_a_lock_past_the_budget_raises_sqlites_error(monkeypatch):
    monkeypatch.setattr(store_jobs, "BUSY_BUDGET", 0.05)
    action, calls = _locked_then([sqlite3.OperationalError("database is locked")] * 10_000)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        retry_locked(action)
    assert len(calls) > 1
