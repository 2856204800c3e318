"""The mock scheduler runs real detached processes: these tests run real jobs."""

import os
import time

import pytest

from hpcbridge import JobNotFoundError, JobState, JobSubmissionError, JobTimeoutError, ResourceError


def test_completed_with_times_and_logs(mock_adapter, make_script):
    script = make_script('echo "hello $1"; echo to-stderr >&2')
    job_id = mock_adapter.submit_job(script, {"job_name": "hi"}, arguments=["world"])
    log_path = mock_adapter.wait_until_complete(job_id, poll_interval=0.5, timeout=60)
    status = mock_adapter.get_job_status(job_id)
    assert status.state is JobState.COMPLETED
    assert status.exit_code == 0
    assert status.start_time is not None and status.end_time >= status.start_time
    assert os.path.basename(log_path) == f"mock-{job_id}.out"
    logs = mock_adapter.get_job_logs(job_id)
    assert "hello world" in logs and "to-stderr" in logs


def test_failed_exit_code(mock_adapter, make_script):
    job_id = mock_adapter.submit_job(make_script("exit 3"))
    status = mock_adapter.wait(job_id, poll_interval=0.5, timeout=60)
    assert status.state is JobState.FAILED
    assert status.exit_code == 3


def test_script_without_shebang_runs_with_sh(mock_adapter, tmp_path):
    script = tmp_path / "plain.sh"
    script.write_text("echo plain-ok\n")
    job_id = mock_adapter.submit_job(str(script))
    assert mock_adapter.wait(job_id, poll_interval=0.5, timeout=60).state is JobState.COMPLETED
    assert "plain-ok" in mock_adapter.get_job_logs(job_id)


def test_cancel_running_job(mock_adapter, make_script):
    job_id = mock_adapter.submit_job(make_script("echo started; sleep 60"))
    deadline = time.monotonic() + 30
    while mock_adapter.get_job_status(job_id).state is not JobState.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    mock_adapter.cancel_job(job_id)
    status = mock_adapter.wait(job_id, poll_interval=0.5, timeout=30)
    assert status.state is JobState.CANCELLED


def test_time_limit_gives_timeout(mock_adapter, make_script):
    job_id = mock_adapter.submit_job(make_script("sleep 60"), {"time": "0:02"})
    status = mock_adapter.wait(job_id, poll_interval=0.5, timeout=60)
    assert status.state is JobState.TIMEOUT


def test_dependency_waits_for_parent(mock_adapter, make_script, tmp_path):
    marker = tmp_path / "parent-done"
    parent = mock_adapter.submit_job(make_script(f"sleep 2; touch '{marker}'", "parent.sh"))
    child = mock_adapter.submit_job(
        make_script(f"test -e '{marker}'", "child.sh"), depends_on=parent
    )
    time.sleep(0.5)
    assert mock_adapter.get_job_status(child).state is JobState.PENDING
    final = mock_adapter.wait_all([parent, child], poll_interval=0.5, timeout=60)
    assert final[child].state is JobState.COMPLETED


def test_failed_dependency_is_never_satisfied(mock_adapter, make_script):
    parent = mock_adapter.submit_job(make_script("sleep 1; exit 1", "parent.sh"))
    child = mock_adapter.submit_job(make_script("true", "child.sh"), depends_on=[parent])
    status = mock_adapter.wait(child, poll_interval=0.5, timeout=60)
    assert status.state is JobState.CANCELLED
    assert "DependencyNeverSatisfied" in status.reason


def _staged(state_dir):
    """The job folders and mock jobs that exist: what a submission leaves behind."""
    folders = state_dir / "jobs"
    mock_jobs = state_dir / "mock" / "jobs"
    return sorted(
        str(path) for root in (folders, mock_jobs) if root.is_dir() for path in root.iterdir()
    )


def test_a_never_existing_parent_is_refused_before_anything_is_staged(
    mock_adapter, make_script, state_dir
):
    script = make_script("true")
    before = _staged(state_dir)
    with pytest.raises(JobSubmissionError, match="parent job 99999 cannot be found"):
        mock_adapter.submit_job(script, depends_on="99999")
    with pytest.raises(JobSubmissionError, match="99999"):
        mock_adapter.submit_many([script, script], depends_on=["99999"])
    assert _staged(state_dir) == before
    assert mock_adapter.store.list() == []


def test_a_parent_that_already_failed_is_refused_and_a_completed_one_satisfied(
    mock_adapter, make_script, state_dir
):
    failed = mock_adapter.submit_job(make_script("exit 3", "fail.sh"))
    done = mock_adapter.submit_job(make_script("true", "ok.sh"))
    mock_adapter.wait_all([failed, done], poll_interval=0.2, timeout=60)
    before = _staged(state_dir)
    with pytest.raises(JobSubmissionError, match=f"parent job {failed} already ended FAILED"):
        mock_adapter.submit_job(make_script("true", "child.sh"), depends_on=[done, failed])
    assert _staged(state_dir) == before
    child = mock_adapter.submit_job(make_script("true", "child.sh"), depends_on=[done])
    assert mock_adapter.wait(child, poll_interval=0.2, timeout=60).state is JobState.COMPLETED


def test_unknown_job_raises_after_streak(mock_adapter):
    with pytest.raises(JobNotFoundError, match="999"):
        mock_adapter.wait("999", poll_interval=0.1, timeout=30)


def test_overall_deadline(mock_adapter, make_script):
    job_id = mock_adapter.submit_job(make_script("sleep 30"))
    with pytest.raises(JobTimeoutError):
        mock_adapter.wait(job_id, poll_interval=0.2, timeout=1)
    mock_adapter.cancel_job(job_id)


def test_missing_script(mock_adapter, tmp_path):
    with pytest.raises(JobSubmissionError, match="not found"):
        mock_adapter.submit_job(str(tmp_path / "nope.sh"))


def test_bad_resources_submit_nothing(mock_adapter, make_script):
    with pytest.raises(ResourceError):
        mock_adapter.submit_job(make_script("true"), {"nodes": -1})
    assert mock_adapter.store.list() == []


def test_hostile_paths_and_arguments_are_literal(mock_adapter, tmp_path):
    # No slash, so it can name folders too; an executed "touch owned" would leave
    # a file named "owned" in some working directory under tmp_path.
    hostile = "; touch owned $(touch owned) `touch owned` 'q' \"d\"\nnl"
    folder = tmp_path / f"dir {hostile}"
    folder.mkdir()
    script = folder / "run it; $(x).sh"
    script.write_text('#!/bin/sh\nprintf "%s" "$1" > got\n')
    remote = str(tmp_path / f"remote {hostile}")
    job_id = mock_adapter.submit_job(
        str(script), {"job_name": hostile}, remote_dir=remote, arguments=[hostile]
    )
    assert mock_adapter.wait(job_id, poll_interval=0.3, timeout=60).state is JobState.COMPLETED
    assert (tmp_path / f"remote {hostile}" / "got").read_text() == hostile
    assert not [path for path in tmp_path.rglob("owned")]
    assert not os.path.exists("owned")


def test_submit_many_bounded_by_slots(state_dir, make_script):
    from hpcbridge import MockAdapter, Settings

    adapter = MockAdapter(settings=Settings.from_env({}, state_dir=str(state_dir)), slots=2)
    script = make_script('sleep 1; echo "task $1"')
    ids = adapter.submit_many([(script, [str(index)]) for index in range(6)])
    assert len(ids) == len(set(ids)) == 6
    time.sleep(0.5)
    states = [status.state for status in adapter.get_job_statuses(ids).values()]
    assert states.count(JobState.RUNNING) <= 2
    final = adapter.wait_all(ids, poll_interval=0.3, timeout=60)
    assert all(status.state is JobState.COMPLETED for status in final.values())
    assert "task 4" in adapter.get_job_logs(ids[4])


def test_state_survives_a_new_process(mock_adapter, make_script, state_dir):
    """A second adapter (another process's view) follows the first one's job."""
    from hpcbridge import MockAdapter, Settings

    job_id = mock_adapter.submit_job(make_script("exit 4"))
    other = MockAdapter(settings=Settings.from_env({}, state_dir=str(state_dir)))
    status = other.wait(job_id, poll_interval=0.3, timeout=60)
    assert (status.state, status.exit_code) == (JobState.FAILED, 4)
    assert other.store.get(job_id).state == "FAILED"


def test_a_submission_runs_under_one_supervisor_in_order_and_a_cancel_ends_one_job(
    state_dir, make_script
):
    import json

    from hpcbridge import MockAdapter, Settings

    adapter = MockAdapter(settings=Settings.from_env({}, state_dir=str(state_dir)), slots=1)
    script = make_script('[ "$1" != 0 ] || sleep 60')
    ids = adapter.submit_many([(script, [str(index)]) for index in range(4)])
    while adapter.get_job_status(ids[0]).state is not JobState.RUNNING:
        time.sleep(0.1)
    assert adapter.get_job_status(ids[1]).state is JobState.PENDING  # behind it, one slot
    adapter.cancel_job(ids[0])
    final = adapter.wait_all(ids, poll_interval=0.3, timeout=60)
    assert [final[job_id].state for job_id in ids] == [JobState.CANCELLED] + [
        JobState.COMPLETED
    ] * 3
    states = [json.loads((state_dir / "mock" / "jobs" / i / "state.json").read_text()) for i in ids]
    assert len({state["supervisor_pid"] for state in states}) == 1
    starts = [state["start_time"] for state in states]
    assert starts == sorted(starts)  # the slot taken in the submission's order


def test_a_supervisor_that_cannot_start_leaves_no_job_behind(
    mock_adapter, make_script, state_dir, monkeypatch
):
    import json
    import sys

    from hpcbridge.schedulers.mock import MockDriver

    failing = [sys.executable, "-c", "import sys; sys.exit(3)"]
    monkeypatch.setattr(MockDriver, "_runner_argv", lambda self, job_dirs: failing)
    with pytest.raises(JobSubmissionError, match="supervisor did not start"):
        mock_adapter.submit_many([make_script("true")] * 3)
    assert mock_adapter.store.list() == []
    assert not list((state_dir / "mock" / "keys").iterdir())  # none found as submitted
    jobs = sorted((state_dir / "mock" / "jobs").iterdir())
    assert len(jobs) == 3
    assert {json.loads((job / "state.json").read_text())["state"] for job in jobs} == {"FAILED"}
