"""hpcbridge.integrations.pipeline (submit, wait_and_fetch) on the mock scheduler.

No Prefect or MLflow needed: these are the plain functions the Prefect tasks wrap.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpcbridge import JobState, JobTimeoutError, ResourceError, Settings
from hpcbridge.integrations.pipeline import (
    ArtifactNotFoundError,
    JobFailedError,
    command_script_text,
    submit,
    submit_async,
    wait_and_fetch,
    wait_and_fetch_async,
)
from hpcbridge.store.jobs import JobStore
from tests.conftest import REPO

PIPELINE = REPO / "examples" / "pipeline"


def test_importing_hpcbridge_and_integrations_loads_neither_prefect_nor_mlflow():
    code = textwrap.dedent(
        """
        import sys
        import hpcbridge, hpcbridge.integrations, hpcbridge.integrations.pipeline
        loaded = sorted(name for name in ("prefect", "mlflow") if name in sys.modules)
        print(",".join(loaded) or "none")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "none"


def _run_script(text, tmp_path, *arguments):
    path = tmp_path / "command.sh"
    path.write_text(text)
    path.chmod(0o700)
    return subprocess.run(
        [str(path), *arguments], capture_output=True, text=True, timeout=30, cwd=tmp_path
    )


def test_command_text_runs_as_written_with_the_arguments(tmp_path):
    command = """printf '<%s>' "$1" "$2"; echo " it's \\"quoted\\" $((1 + 2))" """
    result = _run_script(command_script_text(command), tmp_path, "a b", "$(echo no)")
    assert result.returncode == 0, result.stderr
    assert result.stdout == """<a b><$(echo no)> it's "quoted" 3\n"""


def test_command_argv_is_never_interpreted_by_the_shell(tmp_path):
    marker = tmp_path / "pwned"
    text = command_script_text(["printf", "%s|", "a b", f"$(touch {marker})", "; rm -rf /x"])
    result = _run_script(text, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"a b|$(touch {marker})|; rm -rf /x|"
    assert not marker.exists()


def test_multiline_command_and_exit_code(tmp_path):
    result = _run_script(command_script_text("echo one\necho two >&2\nexit 4"), tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (4, "one\n", "two\n")


@pytest.mark.parametrize("bad", ["", "   ", "echo \0"])
def test_bad_commands_are_refused(bad):
    with pytest.raises(ValueError):
        command_script_text(bad)


def test_submit_a_command_then_wait_and_fetch_its_artifact(mock_adapter, tmp_path):
    job_id, remote = submit(
        command='printf "%s" "$1" > result.txt; echo "wrote $1"',
        arguments=["hello world"],
        artifact="result.txt",
        adapter=mock_adapter,
    )
    record = mock_adapter.store.get(job_id, "mock")
    assert record is not None and record.remote_dir
    assert remote == os.path.join(record.remote_dir, "result.txt")
    assert record.job_name == "command.sh"

    changes = []
    state, local = wait_and_fetch(
        job_id,
        remote,
        local_dir=tmp_path / "fetched",
        poll_interval=0.2,
        timeout=60,
        adapter=mock_adapter,
        on_change=changes.append,
    )
    assert state is JobState.COMPLETED and state == "COMPLETED"
    assert local == str(tmp_path / "fetched" / "result.txt")
    with open(local) as handle:
        assert handle.read() == "hello world"
    assert changes[-1].state is JobState.COMPLETED
    assert mock_adapter.store.get(job_id, "mock").state == "COMPLETED"


def test_settings_from_the_environment_and_a_given_remote_dir(state_dir, make_script, tmp_path):
    script = make_script("echo 42 > answer.txt\n")
    job_dir = tmp_path / "jobs" / "answer"
    job_id, remote = submit(
        script=script, remote_dir=str(job_dir), artifact="answer.txt", settings={}
    )
    assert remote == str(job_dir / "answer.txt")
    state, local = wait_and_fetch(job_id, remote, poll_interval=0.2, timeout=60, settings={})
    assert state is JobState.COMPLETED
    assert os.path.basename(os.path.dirname(local)).startswith("hpcbridge-artifact-")
    with open(local) as handle:
        assert handle.read() == "42\n"
    assert Settings.from_env().database_path.parent == state_dir  # the job was recorded there
    assert JobStore(state_dir / "jobs.db").get(job_id, "mock").state == "COMPLETED"


def test_a_failing_job_raises_with_state_exit_code_and_log(mock_adapter):
    job_id, remote = submit(
        command="echo 'loading data'; echo 'boom: out of memory' >&2; exit 3",
        adapter=mock_adapter,
    )
    with pytest.raises(JobFailedError) as caught:
        wait_and_fetch(job_id, remote, poll_interval=0.2, timeout=60, adapter=mock_adapter)
    error = caught.value
    assert (error.job_id, error.state, error.exit_code) == (job_id, JobState.FAILED, 3)
    assert "boom: out of memory" in error.log_tail
    message = str(error)
    assert f"mock job {job_id} ended FAILED" in message and "exit code 3" in message
    assert "boom: out of memory" in message
    copy = pickle.loads(pickle.dumps(error))  # Prefect may keep the exception in a state
    assert (copy.state, copy.exit_code, copy.log_tail, str(copy)) == (
        error.state,
        3,
        error.log_tail,
        message,
    )


def test_a_completed_job_without_its_artifact(mock_adapter):
    job_id, remote = submit(command="true", adapter=mock_adapter)
    with pytest.raises(ArtifactNotFoundError, match="model.pkl"):
        wait_and_fetch(job_id, remote, poll_interval=0.2, timeout=60, adapter=mock_adapter)


def test_remote_repo_reaches_the_job(state_dir, tmp_path):
    settings = {"remote_repo": "/opt/deployed/repo"}
    job_id, remote = submit(
        command='echo "$HPCBRIDGE_REMOTE_REPO" > repo.txt',
        artifact="repo.txt",
        settings=settings,
    )
    _, local = wait_and_fetch(job_id, remote, tmp_path, poll_interval=0.2, timeout=60)
    with open(local) as handle:
        assert handle.read() == "/opt/deployed/repo\n"


def test_timeout_then_cancel(mock_adapter):
    job_id, remote = submit(command="sleep 60", adapter=mock_adapter)
    try:
        with pytest.raises(JobTimeoutError):
            wait_and_fetch(job_id, remote, poll_interval=0.2, timeout=0.8, adapter=mock_adapter)
    finally:
        mock_adapter.cancel_job(job_id)
    with pytest.raises(JobFailedError) as caught:
        wait_and_fetch(job_id, remote, poll_interval=0.2, timeout=60, adapter=mock_adapter)
    assert caught.value.state is JobState.CANCELLED


def test_bad_requests_submit_nothing(mock_adapter, make_script):
    script = make_script("true\n")
    with pytest.raises(ValueError, match="exactly one"):
        submit(adapter=mock_adapter)
    with pytest.raises(ValueError, match="exactly one"):
        submit(script=script, command="true", adapter=mock_adapter)
    with pytest.raises(ValueError, match="list of strings"):
        submit(script=script, arguments="--dummy", adapter=mock_adapter)
    with pytest.raises(ValueError, match="artifact"):
        submit(script=script, artifact="out/", adapter=mock_adapter)
    with pytest.raises(ResourceError):
        submit(script=script, resources={"time": 90}, adapter=mock_adapter)
    with pytest.raises(ValueError, match="not both"):
        submit(script=script, adapter=mock_adapter, settings={})
    assert mock_adapter.store.list() == []


def test_the_example_job_script_trains_and_the_model_unpickles(mock_adapter, tmp_path):
    job_id, remote = submit(
        script=PIPELINE / "run.sh",
        arguments=["--dummy"],
        environment={"PIPELINE_DIR": str(PIPELINE), "PIPELINE_PYTHON": sys.executable},
        resources={"ntasks": 1, "time": "5"},
        adapter=mock_adapter,
    )
    state, local = wait_and_fetch(
        job_id, remote, tmp_path, poll_interval=0.2, timeout=120, adapter=mock_adapter
    )
    assert state is JobState.COMPLETED
    with open(local, "rb") as handle:
        model = pickle.load(handle)
    assert model["params"]["samples"] == 64 and model["params"]["dummy"] is True
    assert all(abs(got - want) < 0.2 for got, want in zip(model["weights"], (2, -1, 0.5)))
    assert model["metrics"]["test_r2"] > 0.9
    assert "run.sh: " in mock_adapter.get_job_logs(job_id)


def test_the_async_forms_wait_fetch_time_out_and_fail_like_the_blocking_ones(
    mock_adapter, tmp_path
):
    async def main():
        good = await submit_async(
            command='echo "$1" > out.txt',
            arguments=["async"],
            artifact="out.txt",
            adapter=mock_adapter,
        )
        slow = await submit_async(command="sleep 60", adapter=mock_adapter)
        bad = await submit_async(command="echo 'disk full' >&2; exit 4", adapter=mock_adapter)
        changes = []
        fetched = await wait_and_fetch_async(
            *good, tmp_path, timeout=60, adapter=mock_adapter, on_change=changes.append
        )
        with pytest.raises(JobTimeoutError, match="still unfinished after 0.5 s"):
            await wait_and_fetch_async(*slow, timeout=0.5, adapter=mock_adapter)
        mock_adapter.cancel_job(slow[0])
        failures = []
        for job in (slow, bad):
            with pytest.raises(JobFailedError) as caught:
                await wait_and_fetch_async(*job, timeout=60, adapter=mock_adapter)
            failures.append(caught.value)
        with pytest.raises(ValueError, match="not both"):
            await wait_and_fetch_async(*good, adapter=mock_adapter, settings={})
        return fetched, changes, failures

    (state, local), changes, (cancelled, failed) = asyncio.run(main())
    assert state is JobState.COMPLETED and Path(local).read_text() == "async\n"
    assert changes[-1].state is JobState.COMPLETED
    assert cancelled.state is JobState.CANCELLED
    assert (failed.state, failed.exit_code) == (JobState.FAILED, 4)
    assert "disk full" in failed.log_tail


def test_the_async_forms_make_and_close_an_adapter_from_the_settings(state_dir, tmp_path):
    async def main():
        job = await submit_async(command="echo 7 > seven.txt", artifact="seven.txt", settings={})
        return await wait_and_fetch_async(*job, tmp_path, timeout=60, settings={})

    state, local = asyncio.run(main())
    assert state is JobState.COMPLETED and Path(local).read_text() == "7\n"
