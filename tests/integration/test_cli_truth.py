"""The command tells the truth about every job (mock scheduler, each call a new process).

``jobs``/``cost`` ask the schedulers before printing (``--cached`` does not),
an id nobody knows exits 4, ``cancel`` of an ended job says how it ended, and
output cut short by the reader (``| head``) ends quietly.
"""

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from hpcbridge.store.jobs import JobRecord, JobStore
from tests.conftest import REPO
from tests.support.cli import hpcbridge

HELLO = str(REPO / "examples" / "hello.sh")
HOST = os.uname().nodename


def mock_states(state_dir, job_ids):
    """The states the mock's supervisors wrote (read directly: no hpcbridge call)."""
    found = {}
    for job_id in job_ids:
        try:
            text = (state_dir / "mock" / "jobs" / job_id / "state.json").read_text()
            found[job_id] = json.loads(text)["state"]
        except (OSError, ValueError, KeyError):
            found[job_id] = None
    return found


def wait_for_mock_end(state_dir, job_ids, timeout=300.0):
    deadline = time.monotonic() + timeout
    ended = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}
    while True:
        states = mock_states(state_dir, job_ids)
        if all(state in ended for state in states.values()):
            return states
        assert time.monotonic() < deadline, states
        time.sleep(0.3)


def listed(*flags, env=None):
    result = hpcbridge("jobs", "--json", *flags, env=env)
    assert result.returncode == 0, result.stderr
    return {job["job_id"]: job for job in json.loads(result.stdout)}


# -- jobs / cost ask the schedulers --------------------------------------------------------


def test_jobs_shows_a_finished_job_completed_without_a_status_call(state_dir):
    job_id = hpcbridge("submit", HELLO, check=True).stdout.strip()
    assert wait_for_mock_end(state_dir, [job_id]) == {job_id: "COMPLETED"}
    stored = listed("--cached")[job_id]
    assert stored["state"] == "PENDING"  # the store has not heard yet
    assert stored["stale"] is True and "--cached" in stored["stale_reason"]
    assert "PENDING (cached)" in hpcbridge("jobs", "--cached", check=True).stdout
    live = listed()[job_id]
    assert live["state"] == "COMPLETED" and live["exit_code"] == 0
    assert live["stale"] is False and live["stale_reason"] is None
    # what was learnt is recorded: the store now says COMPLETED too
    assert listed("--cached")[job_id]["state"] == "COMPLETED"
    assert JobStore(state_dir / "jobs.db").get(job_id, "mock").state == "COMPLETED"


def test_jobs_state_filter_uses_the_live_states(state_dir):
    job_id = hpcbridge("submit", HELLO, check=True).stdout.strip()
    wait_for_mock_end(state_dir, [job_id])
    assert hpcbridge("jobs", "--json", "--state", "PENDING", "--cached").stdout.count(job_id)
    assert json.loads(hpcbridge("jobs", "--json", "--state", "PENDING").stdout) == []
    completed = json.loads(hpcbridge("jobs", "--json", "--state", "COMPLETED").stdout)
    assert [job["job_id"] for job in completed] == [job_id]


def test_200_jobs_submitted_by_8_processes_are_listed_in_their_true_states(
    state_dir, make_script, tmp_path
):
    script = make_script('[ "$1" = fail ] && exit 3; echo "task $1"')
    args_file = tmp_path / "args.txt"
    args_file.write_text("".join(f"{index}\n" for index in range(24)) + "fail\n")

    def submit(_):
        return hpcbridge(
            "submit-many", script, "--args-file", str(args_file), check=True, timeout=300
        )

    with ThreadPoolExecutor(8) as pool:
        ids = [line for result in pool.map(submit, range(8)) for line in result.stdout.split()]
    assert len(ids) == len(set(ids)) == 200
    truth = wait_for_mock_end(state_dir, ids, timeout=600)
    jobs = listed()
    assert len(jobs) == 200
    assert {job_id: job["state"] for job_id, job in jobs.items()} == truth
    assert sorted(truth.values()).count("FAILED") == 8
    assert not any(job["stale"] for job in jobs.values())


def test_an_unreachable_scheduler_keeps_its_jobs_last_state_marked(state_dir, tmp_path):
    finished = hpcbridge("submit", HELLO, check=True).stdout.strip()
    wait_for_mock_end(state_dir, [finished])
    store = JobStore(state_dir / "jobs.db")
    store.add(JobRecord(job_id="8123", scheduler="slurm", host=HOST, state="RUNNING", ntasks=2))
    store.close()
    empty = tmp_path / "empty-path"
    empty.mkdir()
    # squeue and sacct cannot run: the Slurm query fails at once, nothing can hang
    env = {"HPCBRIDGE_COMMAND_ENV": f"PATH={empty}", "HPCBRIDGE_SLURM_DRIVER": "cli"}
    started = time.monotonic()
    jobs = listed(env=env)
    assert jobs[finished]["state"] == "COMPLETED" and jobs[finished]["stale"] is False
    slurm = jobs["8123"]
    assert slurm["state"] == "RUNNING" and slurm["stale"] is True
    assert "squeue" in slurm["stale_reason"]
    table = hpcbridge("jobs", env=env, check=True).stdout.splitlines()
    [row] = [line for line in table if line.startswith("8123 ")]
    [finished_row] = [line for line in table if line.startswith(f"{finished} ")]
    assert "RUNNING (cached [1])" in row
    # the reason is a note under the table: it does not widen the STATE column
    assert table[-1].startswith("[1] cached: ") and "squeue" in table[-1]
    assert len(row) < 100 and finished_row.index("COMPLETED") == row.index("RUNNING")
    assert finished_row.split("COMPLETED")[1].startswith("  "), finished_row
    cost = json.loads(hpcbridge("cost", "--json", env=env, check=True).stdout)
    by_id = {row["job_id"]: row for row in cost["jobs"] + cost["mock_jobs"]}
    assert by_id["8123"]["stale"] is True and by_id[finished]["stale"] is False
    assert by_id[finished]["state"] == "COMPLETED"
    assert time.monotonic() - started < 60


def test_cost_refreshes_too(state_dir):
    job_id = hpcbridge("submit", HELLO, check=True).stdout.strip()
    wait_for_mock_end(state_dir, [job_id])
    cached = json.loads(hpcbridge("cost", "--json", "--cached", check=True).stdout)
    [job] = cached["mock_jobs"]
    assert job["state"] == "PENDING" and cached["mock_total"]["cpu_hours"] == 0
    live = json.loads(hpcbridge("cost", "--json", check=True).stdout)
    [job] = live["mock_jobs"]
    assert job["state"] == "COMPLETED" and job["stale"] is False


# -- exact answers for ids -------------------------------------------------------------------


def _one_line_error(result):
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpcbridge: error: "), result.stderr
    return lines[0]


def test_an_id_nobody_knows_exits_4_with_what_to_do(state_dir):
    for command in (["status", "999"], ["status", "999", "--json"], ["cancel", "999"]):
        result = hpcbridge(*command)
        assert result.returncode == 4, (command, result.stderr)
        assert result.stdout == ""
        line = _one_line_error(result)
        assert "999" in line and "hpcbridge jobs" in line and "--scheduler" in line
    for command in (
        ["wait", "999", "--poll-interval", "0.1"],
        ["logs", "999"],
        ["logs", "999", "-f"],
    ):
        result = hpcbridge(*command)
        assert result.returncode == 4 and "999" in _one_line_error(result)


def test_status_of_known_and_unknown_ids_prints_the_known_and_exits_4(state_dir):
    job_id = hpcbridge("submit", HELLO, "--wait", "--poll-interval", "0.3", check=True)
    job_id = job_id.stdout.split()[0]
    result = hpcbridge("status", job_id, "999")
    assert result.returncode == 4
    assert result.stdout.split()[:2] == [job_id, "COMPLETED"]
    assert "no job 999" in _one_line_error(result)


def test_cancel_of_an_ended_job_says_how_it_ended_and_asks_no_scheduler(state_dir, make_script):
    failed = hpcbridge("submit", make_script("exit 3"), check=True).stdout.strip()
    wait_for_mock_end(state_dir, [failed])
    # the record still says PENDING: the live state is read, then nothing is cancelled
    result = hpcbridge("cancel", failed)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{failed} already ended FAILED (exit 3): nothing to cancel"
    # now the record says FAILED: the answer comes from it
    again = hpcbridge("cancel", failed)
    assert again.returncode == 0 and "already ended FAILED" in again.stdout
    assert not (state_dir / "mock" / "jobs" / failed / "cancel").exists()
    record = JobStore(state_dir / "jobs.db").get(failed, "mock")
    assert record.state == "FAILED" and record.cancel_requested is False


def test_cancel_of_a_running_and_an_unknown_job(state_dir, make_script):
    running = hpcbridge("submit", make_script("sleep 60"), check=True).stdout.strip()
    result = hpcbridge("cancel", running, "999")
    assert result.returncode == 4
    assert result.stdout.strip() == f"{running} cancel requested"
    assert "no job 999" in _one_line_error(result)
    waited = hpcbridge("wait", running, "--poll-interval", "0.3", "--json")
    assert json.loads(waited.stdout)["state"] == "CANCELLED"


# -- output cut short by the reader ------------------------------------------------------------


def _read_then_close(argv, lines, env=None):
    """Run the command with stdout on a pipe, read ``lines`` lines, close the pipe."""
    process = subprocess.Popen(
        [sys.executable, "-m", "hpcbridge", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    got = [process.stdout.readline() for _ in range(lines)]
    process.stdout.close()
    try:
        stderr = process.stderr.read()
        code = process.wait(timeout=120)
    finally:
        process.kill()
    return got, code, stderr.decode()


def test_logs_follow_into_a_pipe_closed_early_ends_quietly(state_dir, make_script):
    script = make_script(
        'i=0; while [ $i -lt 400 ]; do echo "line $i"; i=$((i+1)); sleep 0.02; done'
    )
    job_id = hpcbridge("submit", script, check=True).stdout.strip()
    got, code, stderr = _read_then_close(["logs", job_id, "--follow"], 3)
    assert [line.split()[0] for line in got] == [b"line"] * 3
    assert code in (0, 141) and stderr == ""
    hpcbridge("cancel", job_id)


def test_jobs_into_a_pipe_closed_after_one_line_ends_quietly(state_dir):
    store = JobStore(state_dir / "jobs.db")
    store.add_many(
        JobRecord(job_id=str(index), scheduler="mock", host=HOST, state="COMPLETED", exit_code=0)
        for index in range(1, 3001)
    )
    store.close()
    # Every row, more than a pipe holds (64 KiB): the default 500 fit, and then the
    # command rightly goes on to say on stderr that it showed 500 of 3000.
    got, code, stderr = _read_then_close(["jobs", "--all"], 1)
    assert got[0].startswith(b"JOB ID")
    assert code in (0, 141) and stderr == ""
