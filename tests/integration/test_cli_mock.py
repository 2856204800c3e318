"""The ``hpcbridge`` command, each call a new process, against the mock scheduler."""

import json
import os
import time

import pytest

from hpcbridge.store.jobs import JobRecord, JobStore
from tests.conftest import REPO
from tests.support.cli import JSON_KEYS, hpcbridge

HELLO = str(REPO / "examples" / "hello.sh")


def test_readme_quickstart(state_dir):
    submitted = hpcbridge("submit", HELLO, "--wait", "--poll-interval", "0.5")
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.split()[0]
    assert "COMPLETED" in submitted.stderr  # each state change is shown
    logs = hpcbridge("logs", job_id, check=True)
    assert "hello from" in logs.stdout
    listing = hpcbridge("jobs", check=True)
    row = [line for line in listing.stdout.splitlines() if line.startswith(job_id + " ")]
    assert row and "COMPLETED" in row[0]


def test_a_misspelt_variable_is_warned_of_once_and_ignored(state_dir):
    """``HPCBRIDGE_SCHEDULAR=slurm``: one warning naming HPCBRIDGE_SCHEDULER; the job goes
    where the settings really point (the mock) - a warning, not a refusal (issue 46)."""
    env = {"HPCBRIDGE_SCHEDULAR": "slurm"}
    submitted = hpcbridge("submit", HELLO, "--wait", "--poll-interval", "0.3", env=env)
    assert submitted.returncode == 0, submitted.stderr
    warned = [line for line in submitted.stderr.splitlines() if "SCHEDULAR" in line]
    assert warned == [
        "WARNING hpcbridge: HPCBRIDGE_SCHEDULAR is not a setting of hpcbridge and is "
        "ignored: did you mean HPCBRIDGE_SCHEDULER?"
    ]
    job_id = submitted.stdout.split()[0]
    status = json.loads(hpcbridge("status", job_id, "--json", check=True).stdout)
    assert status["state"] == "COMPLETED"


def test_failed_job_exit_and_json(state_dir, make_script):
    script = make_script("exit 3")
    result = hpcbridge("submit", script, "--wait", "--poll-interval", "0.3")
    assert result.returncode == 1
    job_id = result.stdout.split()[0]
    status = json.loads(hpcbridge("status", job_id, "--json", check=True).stdout)
    assert status["state"] == "FAILED"
    assert status["exit_code"] == 3
    assert set(status) == {*JSON_KEYS, "job_name"}  # job_name: from the job's record
    assert status["job_name"] == os.path.basename(script)
    assert status["start_time"].startswith("20")  # ISO 8601


def test_cancel_and_wait_from_other_processes(state_dir, make_script):
    job_id = hpcbridge("submit", make_script("sleep 60"), check=True).stdout.strip()
    deadline = time.monotonic() + 30
    while json.loads(hpcbridge("status", job_id, "--json").stdout)["state"] != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert hpcbridge("cancel", job_id).returncode == 0
    waited = hpcbridge("wait", job_id, "--poll-interval", "0.3", "--json")
    assert waited.returncode == 1
    assert json.loads(waited.stdout)["state"] == "CANCELLED"


def test_time_limit(state_dir, make_script):
    result = hpcbridge(
        "submit",
        make_script("sleep 60"),
        "--time",
        "0:02",
        "--wait",
        "--json",
        "--poll-interval",
        "0.5",
    )
    assert result.returncode == 1
    assert json.loads(result.stdout)["state"] == "TIMEOUT"


@pytest.fixture
def x_sh(tmp_path, monkeypatch):
    """The seed's ``x.sh``, in the folder the command runs in (a dry run reads it)."""
    (tmp_path / "x.sh").write_text("#!/bin/sh\necho x\n")
    monkeypatch.chdir(tmp_path)


def test_dry_run_slurm_seed_example(state_dir, x_sh):
    result = hpcbridge(
        "submit",
        "x.sh",
        "--dry-run",
        "--scheduler",
        "slurm",
        "--time",
        "2:00:00",
        "--nodes",
        "2",
        "--gpus",
        "0",
        "--mem",
        "4G",
    )
    assert result.returncode == 0, result.stderr
    line = result.stdout
    assert line.startswith("sbatch")
    for flag in ("--time=2:00:00", "--nodes=2", "--mem=4G"):
        assert flag in line
    assert "--gpus" not in line


def test_dry_run_flux_seed_example(state_dir, x_sh):
    result = hpcbridge(
        "submit",
        "x.sh",
        "--dry-run",
        "--scheduler",
        "flux",
        "--time",
        "2:00:00",
        "--nodes",
        "2",
        "--gpus",
        "0",
        "--mem",
        "4G",
    )
    assert result.returncode == 0, result.stderr
    line = result.stdout
    assert "flux" in line and "batch" in line
    assert "-N2" in line.replace("-N 2", "-N2")
    assert "7200s" in line
    assert "4G" not in line and "--mem" not in line
    assert " -g" not in line and "--gpus" not in line


def test_dry_run_submits_nothing(state_dir):
    assert hpcbridge("submit", HELLO, "--dry-run").returncode == 0
    assert json.loads(hpcbridge("jobs", "--json").stdout) == []


def test_errors_are_one_line(state_dir):
    result = hpcbridge("submit", HELLO, "--nodes", "0")
    assert result.returncode == 2
    assert result.stderr.startswith("hpcbridge: error:") and "nodes" in result.stderr
    assert "Traceback" not in result.stderr
    missing = hpcbridge("submit", "/nonexistent/run.sh")
    assert missing.returncode == 3 and "not found" in missing.stderr
    unknown = hpcbridge("status", "424242", "--json")
    assert unknown.returncode == 4 and unknown.stdout == ""
    assert unknown.stderr.count("\n") == 1 and "no job 424242" in unknown.stderr
    waited = hpcbridge("wait", "424242", "--poll-interval", "0.1")
    assert waited.returncode == 4 and "424242" in waited.stderr


def test_bad_setting_names_the_variable(state_dir, monkeypatch):
    monkeypatch.setenv("EXAMLOPS_HPC_SCHEDULER", "pbs")
    result = hpcbridge("submit", HELLO)
    assert result.returncode == 2
    assert "EXAMLOPS_HPC_SCHEDULER" in result.stderr


def test_cost_and_doctor(state_dir, make_script, monkeypatch):
    monkeypatch.setenv("HPCBRIDGE_CPU_COST_PER_HOUR", "3.6")
    nap = make_script("sleep 1\n")
    hpcbridge("submit", nap, "--wait", "--poll-interval", "0.3", check=True)
    answer = hpcbridge("cost", "--json", check=True)
    cost = json.loads(answer.stdout)
    assert cost["prices"]["cpu_per_hour"] == 3.6 and "no price" not in answer.stderr
    # A mock job is apart from the real ones, charged nothing: the TOTAL is the real jobs'.
    assert cost["jobs"] == [] and cost["total"]["cpu_hours"] == 0
    [job] = cost["mock_jobs"]
    assert job["basis"] == "mock" and job["cost"] == 0
    # One CPU for the second the job slept (and its start-up).
    assert 0.9 / 3600 <= cost["mock_total"]["cpu_hours"] < 10 / 3600  # an mtime lags a tick
    table = hpcbridge("cost", check=True).stdout.splitlines()
    assert table[1].startswith("TOTAL") and table[-1].startswith("MOCK")
    monkeypatch.delenv("HPCBRIDGE_CPU_COST_PER_HOUR")
    unpriced = hpcbridge("cost", check=True)
    assert "HPCBRIDGE_CPU_COST_PER_HOUR" in unpriced.stderr
    assert "HPCBRIDGE_GPU_COST_PER_HOUR" in unpriced.stderr
    doctor = hpcbridge("doctor", check=True)
    assert "mock scheduler" in doctor.stdout
    # a flag is named as typed; the job count is in the singular for one
    flagged = hpcbridge("doctor", "--scheduler", "mock", "--transport", "local", check=True)
    assert "scheduler=mock (--scheduler), transport=local (--transport)" in flagged.stdout
    assert "(1 job)" in flagged.stdout


@pytest.mark.parametrize("flag", ["--help", "submit --help"])
def test_help_documents_exit_codes(flag):
    result = hpcbridge(*flag.split(), check=True)
    assert "exit codes:" in result.stdout


def test_env_flag_and_remote_repo_reach_the_job(state_dir, make_script, monkeypatch):
    monkeypatch.setenv("HPCBRIDGE_REMOTE_REPO", "/deployed/repo")
    script = make_script('echo "greeting=$GREETING repo=$HPCBRIDGE_REMOTE_REPO"')
    result = hpcbridge(
        "submit", script, "--env", "GREETING=hello there", "--wait", "--poll-interval", "0.3"
    )
    assert result.returncode == 0, result.stderr
    logs = hpcbridge("logs", result.stdout.split()[0], check=True).stdout
    assert "greeting=hello there repo=/deployed/repo" in logs
    bad = hpcbridge("submit", script, "--env", "not an assignment")
    assert bad.returncode == 2 and "NAME=VALUE" in bad.stderr


def test_short_flags_and_newest_jobs(state_dir):
    dry = hpcbridge("submit", HELLO, "--dry-run", "--scheduler", "slurm", "-t", "10", "-N", "2")
    assert "--time=0:10:00" in dry.stdout and "--nodes=2" in dry.stdout
    for _ in range(3):
        hpcbridge("submit", HELLO, check=True)
    newest = json.loads(hpcbridge("jobs", "--json", "--limit", "2", check=True).stdout)
    assert [job["job_id"] for job in newest] == ["2", "3"]


def test_a_recorded_flux_job_is_found_by_its_decimal_and_ascii_ids(state_dir):
    flux_id = "\u0192cAyxmV"  # ƒcAyxmV, 23085449216 in decimal
    store = JobStore(state_dir / "jobs.db")
    store.add(
        JobRecord(
            job_id=flux_id,
            scheduler="flux",
            host=os.uname().nodename,
            flux_uri=f"local://{state_dir}/no-broker",
        )
    )
    store.close()
    quick = {"HPCBRIDGE_COMMAND_TIMEOUT": "20", "HPCBRIDGE_UNKNOWN_LIMIT": "2"}
    for typed in ("23085449216", "fcAyxmV"):
        result = hpcbridge("status", typed, "--json", env=quick)
        # Flux is asked (with no broker there it may answer UNKNOWN or fail), never the mock.
        assert "mock job" not in result.stdout + result.stderr
        if result.returncode == 0:
            assert json.loads(result.stdout)["job_id"] == flux_id
        else:
            assert "flux" in result.stderr.lower()
    waited = hpcbridge("wait", "23085449216", "--poll-interval", "0.1", env=quick)
    assert "mock job" not in waited.stdout + waited.stderr
