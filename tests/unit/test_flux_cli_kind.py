"""The job kind and name on the command line: ``jobs`` (table, ``--json``), ``status --json``."""

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hpcbridge.cli import main
from hpcbridge.cli.follow import with_kind
from hpcbridge.store.jobs import JobRecord, JobStore


def test_jobs_shows_the_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPCBRIDGE_STATE_DIR", str(tmp_path))
    store = JobStore(tmp_path / "jobs.db")
    now = datetime.now(timezone.utc)
    store.add(JobRecord("ƒ1", "flux", state="COMPLETED", submit_time=now, kind="plain"))
    store.add(JobRecord("7", "slurm", state="COMPLETED", submit_time=now))
    store.close()
    assert main(["jobs", "--json"]) == 0
    kinds = {item["job_id"]: item["kind"] for item in json.loads(capsys.readouterr().out)}
    assert kinds == {"ƒ1": "plain", "7": None}
    assert main(["jobs"]) == 0
    table = capsys.readouterr().out
    assert "flux (plain)" in table and "slurm " in table


def test_status_json_gets_the_recorded_kind() -> None:
    records = {"ƒ1": JobRecord("ƒ1", "flux", kind="batch"), "7": JobRecord("7", "slurm")}
    assert with_kind({"job_id": "ƒ1"}, records) == {"job_id": "ƒ1", "kind": "batch"}
    assert with_kind({"job_id": "7"}, records) == {"job_id": "7"}
    assert with_kind({"job_id": "9"}, records) == {"job_id": "9"}


def test_status_json_gets_the_recorded_name() -> None:
    from hpcbridge.cli.follow import with_record

    records = {
        "5_1": JobRecord("5_1", "slurm", job_name="t1.sh"),
        "ƒ1": JobRecord("ƒ1", "flux", job_name="t0.sh", kind="plain"),
        "7": JobRecord("7", "slurm"),
    }
    assert with_record({"job_id": "5_1"}, records) == {"job_id": "5_1", "job_name": "t1.sh"}
    assert with_record({"job_id": "ƒ1"}, records) == {
        "job_id": "ƒ1",
        "job_name": "t0.sh",
        "kind": "plain",
    }
    assert with_record({"job_id": "7"}, records) == {"job_id": "7"}
