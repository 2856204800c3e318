"""The example pipeline for real: a Prefect flow (local, ephemeral) and an MLflow SQLite store.

Prefect runs against a temporary local server on a throw-away SQLite database
(``prefect_test_harness``, one for the whole module: it takes seconds to
start); MLflow writes to a SQLite database in the test's folder (its default
kind of store), with the artifacts beside it.  The mock-mode
test runs the job as a real local process; the Slurm test submits to the real
test cluster (``containers/slurm``) and skips, saying why, when it is absent.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import pickle
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

prefect = pytest.importorskip(
    "prefect", reason="prefect is not installed (pip install 'hpcbridge[prefect]')"
)
mlflow = pytest.importorskip(
    "mlflow", reason="mlflow is not installed (pip install 'hpcbridge[mlflow]')"
)

from mlflow.tracking import MlflowClient  # noqa: E402

from hpcbridge import JobState, SchedulerUnavailableError  # noqa: E402
from hpcbridge.integrations.mlflow import job_tags, tag_run  # noqa: E402
from hpcbridge.integrations.pipeline import JobFailedError  # noqa: E402
from hpcbridge.integrations.prefect import (  # noqa: E402
    slurm_submit_task,
    slurm_wait_task,
    submit_task,
    submit_task_async,
    wait_task,
    wait_task_async,
)
from hpcbridge.schedulers.mock import MockDriver  # noqa: E402
from hpcbridge.store.jobs import JobRecord, JobStore  # noqa: E402
from tests.conftest import REPO  # noqa: E402

PIPELINE = REPO / "examples" / "pipeline"
SLURM_ENV_FILE = Path("/tmp/hpcbridge-slurm/env.sh")

#: no telemetry from Prefect or MLflow (there is no network here anyway)
QUIET = {
    "DO_NOT_TRACK": "true",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
}


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory):
    """One temporary Prefect server (SQLite in a temp folder) for the module."""
    from prefect.settings import PREFECT_HOME, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    patch = pytest.MonkeyPatch()
    for name, value in QUIET.items():
        patch.setenv(name, value)
    patch.delenv("PREFECT_API_URL", raising=False)
    home = tmp_path_factory.mktemp("prefect-home")
    try:
        with contextlib.ExitStack() as stack:  # (parenthesized "with" needs Python 3.10)
            stack.enter_context(temporary_settings(updates={PREFECT_HOME: str(home)}))
            stack.enter_context(prefect_test_harness(server_startup_timeout=120))
            yield
    finally:
        patch.undo()


def _load(name):
    """examples/pipeline/NAME.py, imported as a module."""
    spec = importlib.util.spec_from_file_location(f"hpcbridge_example_{name}", PIPELINE / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example():
    """examples/pipeline/flow.py, imported as a module."""
    return _load("flow.py")


@pytest.fixture(scope="module")
def sweep_example():
    """examples/pipeline/sweep.py, imported as a module."""
    return _load("sweep.py")


@pytest.fixture
def tracking(tmp_path, monkeypatch):
    """A fresh MLflow SQLite store; ends any run a failed test left open.

    MLflow puts artifacts in ``./mlruns`` beside a SQLite store it creates: the
    test's folder is the current one, so nothing lands in the repository.
    """
    monkeypatch.chdir(tmp_path)
    uri = "sqlite:///" + str(tmp_path / "mlflow.db")
    mlflow.set_tracking_uri(uri)
    yield uri
    while mlflow.active_run() is not None:
        mlflow.end_run()


def _check_logged_run(result, tracking_uri, scheduler):
    client = MlflowClient(tracking_uri=tracking_uri)
    run = client.get_run(result["run_id"])
    tags = run.data.tags
    job_id = result["job_id"]
    assert tags["hpc_job_id"] == job_id
    assert tags["hpc_scheduler"] == scheduler
    assert tags["slurm_job_id"] == job_id
    assert tags["hpc_state"] == "COMPLETED" and tags["hpc_exit_code"] == "0"
    assert float(tags["hpc_cpu_hours"]) >= 0 and float(tags["hpc_gpu_hours"]) == 0
    assert run.data.params["samples"] == "64" and run.data.params["dummy"] == "True"
    assert run.data.metrics["test_r2"] > 0.9
    assert [item.path for item in client.list_artifacts(result["run_id"])] == ["model.pkl"]
    # the fetched artifact unpickles, and so does the copy MLflow keeps
    downloaded = client.download_artifacts(result["run_id"], "model.pkl", result["local_dir"])
    for path in (result["model_path"], downloaded):
        with open(path, "rb") as handle:
            model = pickle.load(handle)
        assert model["kind"] == "linear" and model["params"]["dummy"] is True
        assert all(abs(got - want) < 0.2 for got, want in zip(model["weights"], (2, -1, 0.5)))


def test_the_source_system_names_are_the_same_tasks():
    assert slurm_submit_task is submit_task and slurm_wait_task is wait_task


def test_mock_pipeline_end_to_end(prefect_server, example, state_dir, tracking, tmp_path):
    fetched = tmp_path / "fetched"
    result = example.training_pipeline(
        dummy=True,
        tracking_uri=tracking,
        experiment="pipeline-mock",
        poll_interval=0.3,
        timeout=120,
        local_dir=str(fetched),
    )
    result["local_dir"] = str(tmp_path / "downloaded")
    os.makedirs(result["local_dir"])
    assert result["state"] == "COMPLETED"
    assert result["model_path"] == str(fetched / "model.pkl")
    record = JobStore(state_dir / "jobs.db").get(result["job_id"], "mock")
    assert record is not None and record.state == "COMPLETED"
    assert result["remote_model"] == os.path.join(record.remote_dir, "model.pkl")
    assert os.path.isfile(result["remote_model"])  # the job really ran and wrote it
    _check_logged_run(result, tracking, "mock")


def test_a_failing_job_makes_wait_task_raise(prefect_server, state_dir):
    @prefect.flow(name="failing-training")
    def failing_training():
        job_id, remote = submit_task(
            command="echo 'epoch 1'; echo 'CUDA error: no device' >&2; exit 7",
            resources={"ntasks": 1, "time": "1"},
        )
        return wait_task(job_id, remote, poll_interval=0.3, timeout=60)

    with pytest.raises(JobFailedError) as caught:
        failing_training()
    error = caught.value
    assert error.state is JobState.FAILED and error.exit_code == 7
    assert "CUDA error: no device" in error.log_tail
    assert "ended FAILED" in str(error) and "exit code 7" in str(error)
    record = JobStore(state_dir / "jobs.db").get(error.job_id, "mock")
    assert record.state == "FAILED" and record.exit_code == 7


def test_the_async_tasks_submit_wait_and_raise_on_a_failed_job(prefect_server, state_dir):
    @prefect.flow(name="async-tasks")
    async def two_jobs():
        good = await submit_task_async(command="echo fine > out.txt", artifact="out.txt")
        bad = await submit_task_async(command="echo 'no GPU' >&2; exit 5")
        state, local = await wait_task_async(*good, timeout=60)
        with pytest.raises(JobFailedError) as caught:
            await wait_task_async(*bad, timeout=60)
        return state, local, caught.value

    state, local, error = asyncio.run(two_jobs())
    assert state is JobState.COMPLETED and Path(local).read_text() == "fine\n"
    assert (error.state, error.exit_code) == (JobState.FAILED, 5)
    assert "no GPU" in error.log_tail


def test_the_async_sweep_flow_awaits_100_jobs_on_one_follower(
    prefect_server, sweep_example, state_dir, tmp_path, monkeypatch
):
    interval = 0.5
    monkeypatch.setenv("HPCBRIDGE_POLL_INTERVAL", str(interval))
    rounds, query = [], MockDriver.query

    def counted(driver, job_ids):
        rounds.append(time.monotonic())
        return query(driver, job_ids)

    monkeypatch.setattr(MockDriver, "query", counted)
    most, stop = [0], threading.Event()

    def sample():  # how many follower threads at once, while the flow runs
        while not stop.wait(0.05):
            alive = sum(t.name.startswith("hpcbridge-follower") for t in threading.enumerate())
            most[0] = max(most[0], alive)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.monotonic()
    try:
        result = asyncio.run(sweep_example.sweep(trials=100, local_dir=str(tmp_path), timeout=300))
    finally:
        stop.set()
        sampler.join()
    waited = time.monotonic() - started
    assert result["trials"] == 100 and result["states"] == {"COMPLETED": 100}
    assert sorted(score["value"] for score in result["scores"]) == list(range(100))
    assert all(score["loss"] == (score["value"] - 42) ** 2 for score in result["scores"])
    assert result["best"]["value"] == 42 and result["best"]["loss"] == 0
    best = result["best"]["job_id"]
    assert (tmp_path / best / "score.txt").read_text() == "42 0\n"
    assert most[0] == 1  # one thread followed the 100 awaited jobs
    # ... asking the mock as one waiter would (those that ended first were read from
    # their exit-code files: a round of questions is asked only while some are running)
    assert len(rounds) <= waited / interval + 2, (len(rounds), waited)


def test_the_example_flow_stops_at_a_failed_training_job(
    prefect_server, example, state_dir, tracking
):
    with pytest.raises(JobFailedError) as caught:
        example.training_pipeline(
            dummy=True,
            extra_arguments=["--fail"],
            tracking_uri=tracking,
            experiment="pipeline-failing",
            poll_interval=0.3,
            timeout=120,
        )
    assert caught.value.state is JobState.FAILED and caught.value.exit_code == 3
    assert "failing on purpose" in caught.value.log_tail
    assert MlflowClient(tracking_uri=tracking).get_experiment_by_name("pipeline-failing") is None


def test_tag_run_prices_the_job_from_the_store(state_dir, tracking, monkeypatch):
    from datetime import datetime, timedelta, timezone

    store = JobStore(state_dir / "jobs.db")
    end = datetime(2026, 1, 2, 12, 0, tzinfo=timezone.utc)
    store.add(
        JobRecord(
            job_id="4242",
            scheduler="slurm",
            state="COMPLETED",
            exit_code=0,
            ntasks=2,
            cpus_per_task=2,
            gpus=1,
            start_time=end - timedelta(hours=2),
            end_time=end,
        )
    )
    settings = {"cpu_cost_per_hour": 0.5, "gpu_cost_per_hour": 3.0}
    client = MlflowClient(tracking_uri=tracking)
    experiment = client.create_experiment("tagging")
    run_id = client.create_run(experiment).info.run_id

    tags = tag_run(4242, run_id=run_id, scheduler="slurm", store=store, settings=settings)
    logged = client.get_run(run_id).data.tags
    # 2 tasks x 2 CPUs x 2 h = 8 CPU-hours; 1 GPU x 2 h = 2 GPU-hours; 8 x 0.5 + 2 x 3 = 10
    expected = {
        "hpc_job_id": "4242",
        "hpc_scheduler": "slurm",
        "slurm_job_id": "4242",
        "hpc_state": "COMPLETED",
        "hpc_exit_code": "0",
        "hpc_cpu_hours": "8",
        "hpc_gpu_hours": "2",
        "hpc_cost": "10",
    }
    assert tags == expected
    assert {key: logged[key] for key in expected} == expected

    # the active run, with the settings (and store) from the environment
    monkeypatch.setenv("HPCBRIDGE_CPU_COST_PER_HOUR", "1.5")
    with mlflow.start_run(experiment_id=experiment) as active:
        tag_run("4242", scheduler="slurm")
    assert client.get_run(active.info.run_id).data.tags["hpc_cost"] == "12"


def test_tag_run_needs_a_run_and_tags_unknown_jobs_by_id(state_dir, tracking):
    with pytest.raises(RuntimeError, match="no active MLflow run"):
        tag_run("1")
    assert job_tags("99", scheduler="flux") == {
        "hpc_job_id": "99",
        "hpc_scheduler": "flux",
        "slurm_job_id": "99",
    }


# -- Slurm ---------------------------------------------------------------------------


def _slurm_conf():
    conf = os.environ.get("SLURM_CONF")
    if not conf and SLURM_ENV_FILE.is_file():
        for line in SLURM_ENV_FILE.read_text().splitlines():
            words = shlex.split(line.strip())
            if len(words) == 2 and words[0] == "export" and words[1].startswith("SLURM_CONF="):
                conf = words[1].partition("=")[2]
    return conf if conf and os.path.isfile(conf) else None


def _slurm_cluster():
    """SLURM_CONF of the running test cluster, or None."""
    conf = _slurm_conf()
    if conf is None or shutil.which("sinfo") is None:
        return None
    try:
        probe = subprocess.run(
            ["sinfo", "-h", "-o", "%a"],
            env={**os.environ, "SLURM_CONF": conf},
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return conf if probe.returncode == 0 and "up" in probe.stdout else None


@pytest.fixture(scope="module")
def slurm_conf():
    """SLURM_CONF of the running test cluster (checked before Prefect's server starts)."""
    conf = _slurm_cluster()
    if conf is None:
        pytest.skip("Slurm test cluster not running")
    return conf


@pytest.mark.slurm
def test_slurm_pipeline_end_to_end(
    slurm_conf, prefect_server, example, state_dir, tracking, tmp_path, monkeypatch
):
    monkeypatch.setenv("SLURM_CONF", slurm_conf)
    from hpcbridge import get_scheduler_adapter

    try:
        get_scheduler_adapter(scheduler="slurm").close()
    except SchedulerUnavailableError as exc:
        pytest.skip(f"the Slurm driver is not usable: {exc}")

    try:
        result = example.training_pipeline(
            dummy=True,
            resources={"ntasks": 1, "time": "5", "job_name": "hpcb-pipeline"},
            settings={"scheduler": "slurm"},
            tracking_uri=tracking,
            experiment="pipeline-slurm",
            poll_interval=1.0,
            timeout=300,
            local_dir=str(tmp_path / "fetched"),
        )
    except SchedulerUnavailableError as exc:
        pytest.skip(f"the Slurm driver is not usable: {exc}")
    result["local_dir"] = str(tmp_path / "downloaded")
    os.makedirs(result["local_dir"])
    assert result["state"] == "COMPLETED"
    assert result["job_id"].isdigit()
    record = JobStore(state_dir / "jobs.db").get(result["job_id"], "slurm")
    assert record is not None and record.state == "COMPLETED"
    assert record.job_name == "hpcb-pipeline"
    _check_logged_run(result, tracking, "slurm")


# -- the README's command --------------------------------------------------------------


@pytest.mark.slow
def test_the_readme_command_in_prefect_ephemeral_mode(state_dir, tmp_path):
    """``python examples/pipeline/flow.py --dummy``: no server, no harness, as a user runs it."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PREFECT_", "MLFLOW_")) and key != "PYTEST_CURRENT_TEST"
    }
    env.update(QUIET, PREFECT_HOME=str(tmp_path / "prefect-home"))
    # Prefect gives its temporary server 20 s to start; a busy two-core machine needs more.
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "180"
    result = subprocess.run(
        [sys.executable, str(PIPELINE / "flow.py"), "--dummy", "--poll-interval", "0.3"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    summary = json.loads(result.stdout)
    assert summary["state"] == "COMPLETED"
    assert summary["tracking_uri"] == "sqlite:///" + str(tmp_path / "mlflow.db")
    assert (tmp_path / "mlflow.db").is_file()
    assert not list(tmp_path.rglob("meta.yaml"))  # what a file store would have written
    tags = MlflowClient(tracking_uri=summary["tracking_uri"]).get_run(summary["run_id"]).data.tags
    assert tags["hpc_job_id"] == tags["slurm_job_id"] == summary["job_id"]
    assert tags["hpc_scheduler"] == "mock"
