"""The job kind (Flux batch or plain job): the default by instance, the setting,
the record (with the column added to an older database) and the other
schedulers ignoring the choice with one log line."""

import logging
import sqlite3
from pathlib import Path

import pytest

from hpcbridge import Settings
from hpcbridge.schedulers.flux.adapter import FluxAdapter
from hpcbridge.schedulers.flux.instance import UriSetting, policy_by_name
from hpcbridge.schedulers.flux.planning import choose_kind, launcher_for
from hpcbridge.schedulers.flux.request import JobChoice, JobKind
from hpcbridge.schedulers.mock import MockAdapter
from hpcbridge.store.jobs import JobRecord, JobStore

SYSTEM = UriSetting(None, "the system instance")
NAMED = UriSetting("local:///tmp/f/local-0", "HPCBRIDGE_FLUX_URI")


def test_defaults_by_instance_setting_and_keyword() -> None:
    plain = Settings.from_env({})
    assert choose_kind(None, plain, SYSTEM).kind is JobKind.BATCH
    assert choose_kind(None, plain, NAMED).kind is JobKind.PLAIN
    forced = Settings.from_env({"HPCBRIDGE_FLUX_NESTED": "1"})
    assert choose_kind(None, forced, NAMED).kind is JobKind.BATCH
    assert "HPCBRIDGE_FLUX_NESTED" in choose_kind(None, forced, NAMED).reason
    assert choose_kind(False, forced, SYSTEM).kind is JobKind.PLAIN
    assert Settings.from_env({"HPCBRIDGE_FLUX_NESTED": "0"}).flux_nested is False


def test_the_flux_adapter_reads_nested_and_refuses_other_keywords(tmp_path: Path) -> None:
    settings = Settings.from_env({"HPCBRIDGE_STATE_DIR": str(tmp_path / "state")})
    adapter = FluxAdapter(settings=settings, uri="local:///tmp/f/local-0")  # nothing opened
    named = adapter.job_options({})
    assert isinstance(named, JobChoice) and named.kind is JobKind.PLAIN
    assert adapter.job_options({"nested": True}) == JobChoice(JobKind.BATCH, "nested= asked for it")
    with pytest.raises(TypeError, match="flux: unexpected submission keyword 'nodes'"):
        adapter.job_options({"nested": True, "nodes": 2})
    adapter.close()


def test_the_launcher_by_kind_and_release() -> None:
    batch, plain = JobChoice(JobKind.BATCH, "asked"), JobChoice(JobKind.PLAIN, "asked")
    assert launcher_for("flux", policy_by_name("0.88"), batch) == "flux run"
    assert (
        launcher_for("/opt/f/bin/flux", policy_by_name("0.26"), None) == "/opt/f/bin/flux mini run"
    )
    assert launcher_for("flux", policy_by_name("0.88"), plain) == ""


def test_an_older_database_gets_the_kind_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE hpc_jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, "
            "scheduler TEXT NOT NULL, transport TEXT NOT NULL DEFAULT 'local', host TEXT NOT NULL "
            "DEFAULT '', flux_uri TEXT, job_name TEXT, state TEXT NOT NULL DEFAULT 'PENDING', "
            "native_state TEXT, reason TEXT, exit_code INTEGER, submit_time TEXT, start_time TEXT, "
            "end_time TEXT, nodes INTEGER, ntasks INTEGER, cpus_per_task INTEGER, gpus INTEGER, "
            "time_limit REAL, partition TEXT, qos TEXT, account TEXT, remote_dir TEXT, "
            "script TEXT, log_path TEXT, exit_file TEXT, "
            "cancel_requested INTEGER NOT NULL DEFAULT 0, "
            "updated_at TEXT, UNIQUE (scheduler, host, job_id))"
        )
        connection.execute("INSERT INTO hpc_jobs (job_id, scheduler) VALUES ('7', 'slurm')")
    store = JobStore(path)
    old = store.get("7", "slurm", "")
    assert old is not None and old.kind is None
    store.add(JobRecord("ƒ1", "flux", kind="plain"))
    assert store.get("ƒ1", "flux", "").kind == "plain"  # type: ignore[union-attr]
    store.close()


def test_mock_accepts_nested_and_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    settings = Settings.from_env({"HPCBRIDGE_STATE_DIR": str(tmp_path / "state")})
    adapter = MockAdapter(settings=settings)
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        first = adapter.submit_job(script, nested=False)
        adapter.submit_many([script, script], nested=True)
    assert sum("does not apply" in record.message for record in caplog.records) == 1
    record = adapter.store.get(first, "mock", adapter.host_label)
    assert record is not None and record.kind is None
    adapter.wait_all([first], poll_interval=0.1, timeout=30)
    adapter.close()
