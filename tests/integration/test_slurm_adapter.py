"""RealSlurmAdapter against the real Slurm test clusters (containers/slurm).

Every case runs against each target of ``tests.support.slurm_clusters.TARGETS``: Debian's
Slurm 22.05 with the CLI driver (locally and over SSH: paramiko, and the OpenSSH backend
after one ``hpcbridge login`` to containers/sshd-totp), and a Slurm 25.11 built
under ``/opt/slurm-25.11`` with the pyslurm driver and with the CLI driver (locally, and
over the OpenSSH backend with its commands first on the remote PATH).  A
target whose cluster (or pyslurm) is absent skips, saying why.  Start them with
``bash containers/slurm/start.sh`` and
``HPCBRIDGE_SLURM_PREFIX=/opt/slurm-25.11 bash containers/slurm/start.sh``.

Two slow things run in the background from the start of each target and are
checked at its end: the one TIMEOUT job (~100 s: limits are enforced every
30 s) and a job left to be purged from squeue (MinJobAge=10 s, but slurmctld
purges only about once a minute).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from hpcbridge.engine.driver import NotAskedNow
from hpcbridge.errors import JobNotFoundError, JobSubmissionError
from hpcbridge.model import FROM_FILE, JobState, JobStatus
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from tests.support.slurm_clusters import (
    OPENSSH_TARGETS,
    TARGETS,
    Target,
    cluster_for,
    executor_for,
    jobs_named,
    make_adapter,
    remote_command_env,
    squeue_knows,
    staged_folders,
)

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
SLURM_DIR = REPO / "containers" / "slurm"

# -- the clusters ------------------------------------------------------------------


@pytest.fixture(scope="module", params=[*TARGETS, *OPENSSH_TARGETS])
def target(request: pytest.FixtureRequest) -> Target:
    """Every case runs once per target (the fixture groups the cases by target), and
    over the OpenSSH backend too."""
    return {**TARGETS, **OPENSSH_TARGETS}[request.param]


def local_only(target: Target) -> None:
    """Cases that build their own local adapter run once per cluster and driver."""
    if target.transport != "local":
        local = target.label.removesuffix(f"-{target.transport}")
        pytest.skip(f"a local case: it runs in {local}")


@pytest.fixture(scope="module")
def cluster(target: Target) -> Iterator[Dict[str, str]]:
    """The environment of the target's cluster, set in the process while its cases run."""
    yield from cluster_for(target)


@pytest.fixture
def adapter(
    request: pytest.FixtureRequest, cluster: Dict[str, str], target: Target, tmp_path: Path
) -> Iterator[RealSlurmAdapter]:
    transport = target.transport
    # Over SSH the remote session may not have the cluster's SLURM_CONF (nor its release's
    # commands first on PATH): pass them.
    command_env = None if transport == "local" else remote_command_env(cluster)
    # Over SSH the jobs belong to the unprivileged test user: their folders must be its own.
    workdir = None if transport == "local" else request.getfixturevalue(f"{transport}_remote_dir")
    made = make_adapter(
        cluster,
        tmp_path,
        executor_for(transport, request),
        remote_workdir=workdir,
        command_env=command_env,
    )
    yield made
    made.store.close()


@pytest.fixture
def script(tmp_path: Path) -> Callable[..., str]:
    """``script("exit 3")`` -> path of a small shell script with that body."""
    counter = [0]

    def write(body: str, name: Optional[str] = None) -> str:
        counter[0] += 1
        path = tmp_path / "scripts" / (name or f"job{counter[0]}.sh")
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
        return str(path)

    return write


def wait_for_state(
    adapter: RealSlurmAdapter, job_id: str, state: JobState, timeout: float = 60
) -> JobStatus:
    deadline = time.monotonic() + timeout
    while True:
        status = adapter.get_job_status(job_id)
        if status.state is state or time.monotonic() > deadline:
            return status
        time.sleep(0.3)


# -- the slow jobs, started first -------------------------------------------------------

TIMEOUT_TEST = "test_time_limit_gives_timeout"


@pytest.fixture(scope="module")
def background_root(target: Target, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the slow jobs' own adapter, one per target."""
    return tmp_path_factory.mktemp(f"slurm-background-{target.label}")


@pytest.fixture(scope="module", autouse=True)
def background(
    cluster: Dict[str, str],
    target: Target,
    background_root: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Dict[str, Any]]:
    """Submit the TIMEOUT job and the job to be purged before anything else."""
    root = background_root
    own = make_adapter(cluster, root)
    scripts = root / "scripts"
    scripts.mkdir()
    jobs: Dict[str, Any] = {"adapter": own, "root": root}
    selected = {
        item.originalname for item in request.session.items if item.module is request.module
    }
    if target.transport != "local":
        selected = set()  # the slow checks are local cases
    if TIMEOUT_TEST in selected:
        sleeper = scripts / "sleep300.sh"
        sleeper.write_text("#!/bin/sh\necho started\nsleep 300\n")
        jobs["timeout"] = own.submit_job(str(sleeper), {"time": "1"})  # one minute
    if "test_purged_job_is_reported_from_sacct" in selected:
        five = scripts / "exit5.sh"
        five.write_text("#!/bin/sh\nexit 5\n")
        jobs["purged"] = own.submit_job(str(five))
    yield jobs
    for key in ("timeout", "purged"):
        if key in jobs:
            own.cancel_job(jobs[key])
    own.store.close()


# -- single jobs --------------------------------------------------------------------------


def test_exit_zero_is_completed_with_times(adapter: RealSlurmAdapter, script) -> None:
    job_id = adapter.submit_job(script("echo hello; exit 0"), {"time": "5"})
    assert job_id.isdigit()
    status = adapter.wait(job_id, poll_interval=1, timeout=120)
    assert status.state is JobState.COMPLETED and status.exit_code == 0
    assert status.start_time is not None and status.end_time is not None
    assert status.start_time.tzinfo is not None
    assert status.start_time <= status.end_time
    assert abs(time.time() - status.end_time.timestamp()) < 120  # local time read right


def test_exit_three_is_failed(adapter: RealSlurmAdapter, script) -> None:
    job_id = adapter.submit_job(script("sleep 1; exit 3"))
    seen: List[JobStatus] = []
    status = adapter.wait_all(
        [job_id], poll_interval=0.1, timeout=120, on_poll=lambda now: seen.append(now[job_id])
    )[job_id]
    assert status.state is JobState.FAILED and status.exit_code == 3
    # The wait ended on the exit-code file, maybe while Slurm still says COMPLETING: a
    # fresh client (no record) has the scheduler's answer only, RUNNING until then.
    fresh, deadline = fresh_adapter(adapter), time.monotonic() + 60
    while not (again := fresh.get_job_status(job_id)).is_terminal:
        assert time.monotonic() < deadline, again
        time.sleep(0.5)
    assert again.state is JobState.FAILED and again.exit_code == 3
    assert again.reason == "NonZeroExitCode"
    # on the way (COMPLETING, Slurm's reason already NonZeroExitCode) it is RUNNING, no reason
    assert all(item.reason == "" for item in seen if item.state is JobState.RUNNING), seen


def test_logs(adapter: RealSlurmAdapter, script) -> None:
    job_id = adapter.submit_job(script("echo hello from slurm; echo oops >&2"))
    log_path = adapter.wait_until_complete(job_id, poll_interval=1, timeout=120)
    assert log_path.endswith(f"/slurm-{job_id}.out")
    deadline = time.monotonic() + 10
    while "oops" not in adapter.get_job_logs(job_id) and time.monotonic() < deadline:
        time.sleep(0.2)  # output files are flushed by slurmstepd at the end
    logs = adapter.get_job_logs(job_id)
    assert "hello from slurm" in logs and "oops" in logs


def test_train_wait_fetch_the_artifact(adapter: RealSlurmAdapter, script, tmp_path: Path) -> None:
    """Stage run.sh up, submit, wait, fetch <remote_dir>/model.pkl back
    (docs/guides/ssh-train-wait-fetch.md)."""
    remote_dir = adapter.executor.abspath(f"{adapter.remote_workdir}/train-run")
    job_id = adapter.submit_job(
        script("printf 'weights %s' \"$1\" > model.pkl", name="run.sh"),
        {"job_name": "train", "time": "5", "ntasks": 1},
        remote_dir=remote_dir,
        arguments=["42"],
    )
    adapter.wait_until_complete(job_id, poll_interval=1, timeout=120)
    assert adapter.get_job_status(job_id).state is JobState.COMPLETED
    local = tmp_path / "fetched.pkl"
    adapter.executor.get(f"{remote_dir}/model.pkl", str(local))
    assert local.read_text() == "weights 42"


def test_hostile_names_and_paths_are_literal(adapter: RealSlurmAdapter, tmp_path: Path) -> None:
    # No slash, so it can name folders; an executed "touch owned" leaves a file somewhere.
    hostile = "; touch owned $(touch owned) `touch owned` 'q' \"d\" sp ace\nnl"
    folder = tmp_path / f"scripts {hostile}"
    folder.mkdir()
    job_script = folder / f"run {hostile}.sh"
    job_script.write_text('#!/bin/sh\nprintf "%s" "$SLURM_JOB_NAME" > name.txt\n')
    job_script.chmod(0o755)
    remote_dir = adapter.executor.abspath(f"{adapter.remote_workdir}/dir {hostile}")
    job_id = adapter.submit_job(
        str(job_script), {"job_name": hostile, "time": "5"}, remote_dir=remote_dir
    )
    status = adapter.wait(job_id, poll_interval=1, timeout=120)
    assert status.state is JobState.COMPLETED, status
    # Slurm keeps the job name as given (it may replace the newline in its records).
    recorded = adapter.executor.read_text(f"{remote_dir}/name.txt")
    assert recorded.replace("\n", " ") in (hostile, hostile.replace("\n", " "))
    found = adapter.executor.run(["find", adapter.remote_workdir, "-name", "owned"])
    assert found.ok and found.stdout.strip() == ""
    assert not list(tmp_path.rglob("owned"))


def test_running_job_cancelled(adapter: RealSlurmAdapter, script) -> None:
    job_id = adapter.submit_job(script("echo started; sleep 120"))
    assert wait_for_state(adapter, job_id, JobState.RUNNING).state is JobState.RUNNING
    # RUNNING comes before the script starts (reason Prolog): a cancel then ends it with 0
    deadline = time.monotonic() + 60
    while "started" not in adapter.get_job_logs(job_id):
        assert time.monotonic() < deadline, "the script never started"
        time.sleep(0.3)
    adapter.cancel_job(job_id)
    status = adapter.wait(job_id, poll_interval=1, timeout=60)
    assert status.state is JobState.CANCELLED and status.exit_code == 143, status
    assert status.native_state.startswith("CANCELLED")
    adapter.cancel_job(job_id)  # again, now finished: no error


def test_a_job_cancelled_right_after_its_submission_reads_as_cancelled(
    adapter: RealSlurmAdapter, script
) -> None:
    # Slurm records a job cancelled as it starts as started and ended in one second, 0:0
    job_id = adapter.submit_job(script("sleep 120"))
    adapter.cancel_job(job_id)
    final = adapter.wait(job_id, poll_interval=1, timeout=60)
    assert final.state is JobState.CANCELLED and final.exit_code is None, final
    assert final.reason.startswith("cancelled"), final


def test_dependency_holds_the_child(adapter: RealSlurmAdapter, script) -> None:
    # The parent runs until its gate appears (made where the jobs run): however slow the
    # child's submission, the child is seen held behind a running parent.
    gate = adapter.executor.abspath(f"{adapter.remote_workdir}/gate-{uuid.uuid4().hex[:8]}")
    body = f"while [ ! -e {shlex.quote(gate)} ]; do sleep 0.2; done"
    parent = adapter.submit_job(script(body), {"time": "5"})
    child = adapter.submit_job(script("exit 0"), depends_on=parent)
    seen: List[JobStatus] = []
    released_at = time.monotonic() + 60  # at the latest: the case then fails saying why
    while True:
        both = adapter.get_job_statuses([parent, child])  # one squeue: one snapshot
        parent_status, child_status = both[parent], both[child]
        seen.append(child_status)
        if parent_status.state is not JobState.COMPLETED:
            assert child_status.state is JobState.PENDING, child_status
            assert child_status.reason in ("Dependency", "None", ""), child_status
        held = parent_status.state is JobState.RUNNING and child_status.reason == "Dependency"
        if held or time.monotonic() > released_at:
            adapter.executor.run(["touch", gate])
        if parent_status.is_terminal:
            break
        time.sleep(0.5)
    assert parent_status.state is JobState.COMPLETED
    assert any(status.reason == "Dependency" for status in seen)
    final = adapter.wait(child, poll_interval=1, timeout=60)
    assert final.state is JobState.COMPLETED
    assert final.start_time and parent_status.end_time
    # Slurm records whole seconds; a start read from the wrapper's file is finer (x.99
    # beside the parent's end recorded as x+1)
    assert final.start_time >= parent_status.end_time - timedelta(seconds=1)


def test_failed_parent_cancels_the_child(adapter: RealSlurmAdapter, script) -> None:
    # --kill-on-invalid-dep: without it the child would wait forever (PENDING,
    # DependencyNeverSatisfied) and so would anyone waiting on it.  The parent is
    # still running when the child goes in (one that already failed is refused).
    parent = adapter.submit_job(script("sleep 3; exit 1"))
    child = adapter.submit_job(script("exit 0"), depends_on=[parent])
    final = adapter.wait_all([parent, child], poll_interval=1, timeout=60)
    assert final[parent].state is JobState.FAILED
    assert final[child].state is JobState.CANCELLED
    assert final[child].reason == "DependencyNeverSatisfied"
    assert final[child].exit_code is None and final[child].start_time is None  # it never ran


def test_a_job_cancelled_while_pending_has_no_exit_code(adapter: RealSlurmAdapter, script) -> None:
    # Slurm: CANCELLED, 0:0, a start at the cancel and its pending reason (Dependency)
    parent = adapter.submit_job(script("sleep 30"))
    child = adapter.submit_job(script("exit 0"), depends_on=parent)
    assert wait_for_state(adapter, child, JobState.PENDING).state is JobState.PENDING
    adapter.cancel_job(child)
    final = adapter.wait(child, poll_interval=1, timeout=60)
    assert (final.state, final.exit_code, final.start_time) == (JobState.CANCELLED, None, None)
    assert final.reason == "cancelled while pending (Dependency)", final
    adapter.cancel_job(parent)


def test_a_never_existing_parent_is_refused_and_nothing_submitted(
    adapter: RealSlurmAdapter, script
) -> None:
    # Slurm 22.05 itself takes --dependency=afterok:<an id it never had> and runs the job.
    name = f"hpcb-never-{os.getpid()}-{time.monotonic_ns()}"
    with pytest.raises(JobSubmissionError, match="parent job 987654321 cannot be found"):
        adapter.submit_job(script("true"), {"job_name": name}, depends_on="987654321")
    with pytest.raises(JobSubmissionError, match="987654321"):
        adapter.submit_many([script("true")] * 2, {"job_name": name}, depends_on=["987654321"])
    assert staged_folders(adapter.executor, adapter.remote_workdir) == []
    assert jobs_named(name) == []
    assert adapter.store.list() == []


def test_a_parent_that_already_failed_is_refused_a_completed_one_satisfied(
    adapter: RealSlurmAdapter, script
) -> None:
    failed = adapter.submit_job(script("exit 3"))
    done = adapter.submit_job(script("true"))
    adapter.wait_all([failed, done], poll_interval=1, timeout=120)
    folders = staged_folders(adapter.executor, adapter.remote_workdir)
    name = f"hpcb-failed-parent-{os.getpid()}-{time.monotonic_ns()}"
    with pytest.raises(JobSubmissionError, match=f"parent job {failed} already ended FAILED"):
        adapter.submit_job(script("true"), {"job_name": name}, depends_on=[done, failed])
    assert staged_folders(adapter.executor, adapter.remote_workdir) == folders
    assert jobs_named(name) == []
    child = adapter.submit_job(script("true"), depends_on=[done])
    assert adapter.wait(child, poll_interval=1, timeout=120).state is JobState.COMPLETED


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({"partition": "nosuchpart"}, "Invalid partition name specified"),
        ({"account": "nosuchacct"}, "Invalid account or account/partition combination specified"),
        ({"qos": "nosuchqos"}, "Invalid qos specification"),
        ({"partition": "short", "time": "10"}, "Requested time limit is invalid"),
    ],
    ids=["partition", "account", "qos", "time"],
)
def test_bad_submission_carries_slurms_message(
    adapter: RealSlurmAdapter, script, resources: Dict[str, str], message: str
) -> None:
    accounting = os.environ.get("HPCBRIDGE_SLURM_ACCOUNTING", "1") != "0"
    if (resources.get("account") or resources.get("qos")) and not accounting:
        pytest.skip("accounts and QOS are enforced only with accounting")

    def staged() -> List[str]:
        listed = adapter.executor.run(["ls", "-A", "--", adapter.stager.workdir])
        return sorted(listed.stdout.split())

    before = staged()
    with pytest.raises(JobSubmissionError) as caught:
        adapter.submit_job(script("true"), resources)
    assert message in str(caught.value)
    assert message in caught.value.scheduler_message
    assert staged() == before  # the refused job's folder is gone (none pile up on a login node)


def test_never_existing_id_is_not_found_after_the_streak(adapter: RealSlurmAdapter) -> None:
    adapter.unknown_limit = 3
    started = time.monotonic()
    with pytest.raises(JobNotFoundError, match="3 times in a row"):
        adapter.wait_until_complete("987654321", poll_interval=0.5)
    assert time.monotonic() - started < 30


def test_controller_restart_while_waiting(
    adapter: RealSlurmAdapter, script, cluster: Dict[str, str], target: Target
) -> None:
    if target.label.startswith("25.11-cli"):  # the CLI's outage handling runs in 22.05's
        pytest.skip("the CLI driver rides a restart out in 22.05-cli; 25.11 runs pyslurm's")
    if target.label.endswith("-openssh"):  # the same failed squeues, carried by ssh
        pytest.skip("a restart is ridden out alike over both SSH backends: run in 22.05-cli-ssh")
    adapter.unknown_limit = 60  # the restart takes a few seconds of failed queries
    # The job outlives the outage: its exit-code file (which the adapter reads for any
    # job the scheduler cannot answer for) appears only once slurmctld is back, whatever
    # the restart takes on a loaded machine - the job ends when the test releases it
    # (or after 150 s).  The SSH test server is this machine: its files are ours too.
    tag = uuid.uuid4().hex[:8]
    marker = Path(adapter.remote_workdir) / f"started-{tag}"
    release = Path(adapter.remote_workdir) / f"release-{tag}"
    job_id = adapter.submit_job(
        script(
            f"touch {marker}; i=0\n"
            f"while [ ! -e {release} ] && [ $i -lt 300 ]; do sleep 0.5; i=$((i+1)); done\n"
            "exit 2"
        )
    )
    assert wait_for_state(adapter, job_id, JobState.RUNNING).state is JobState.RUNNING
    # RUNNING begins with the prolog: a controller stopped before the batch script was
    # launched may lose the launch (the job then stays RUNNING with nothing running).
    deadline = time.monotonic() + 60
    while not adapter.executor.exists(str(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    restarted: Dict[str, Any] = {}

    def ctld(action: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(SLURM_DIR / "restart-ctld.sh"), action],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, **cluster},
        )

    def restart() -> None:
        # Down for longer than one squeue's own retries (~9 s before "Unable
        # to contact slurm controller"), so that the wait does see failures.
        time.sleep(1)
        try:
            stopped = ctld("stop")
            down_since = time.monotonic()
            time.sleep(14)
            restarted["down"] = (down_since, time.monotonic())
            restarted["result"] = ctld("start") if stopped.returncode == 0 else stopped
            restarted["done"] = time.monotonic()
        finally:
            release.touch()

    observed: List[JobStatus] = []
    not_asked: List[str] = []
    driver = adapter.open().driver
    # No retries inside a round: each failed round is seen by the wait loop, which
    # rides the outage out itself (retries within a round have tests of their own).
    getattr(driver, "cli", driver).query_retries = 0.0  # pyslurm's driver uses its CLI's
    real_query = driver.query

    rounds: List[Tuple[float, float]] = []

    def query(job_ids: List[str]) -> Dict[str, JobStatus]:
        started = time.monotonic()
        try:
            answers = real_query(job_ids)
        except NotAskedNow as exc:  # the controller could not be asked: a round all the same
            rounds.append((started, time.monotonic()))
            not_asked.append(str(exc))
            raise
        rounds.append((started, time.monotonic()))
        observed.extend(answers.values())
        return answers

    driver.query = query  # type: ignore[method-assign]
    thread = threading.Thread(target=restart)
    thread.start()
    try:
        status = adapter.wait(job_id, poll_interval=1, timeout=150)
        ended = time.monotonic()
    finally:
        thread.join()
    result = restarted["result"]
    assert result.returncode == 0, result.stderr
    assert restarted["done"] <= ended, "the wait ended before slurmctld was back"
    assert status.state is JobState.FAILED and status.exit_code == 2
    # Either the driver could not ask during the outage (NotAskedNow, "Unable to
    # contact"), or squeue kept retrying its connection until slurmctld was back: a
    # round ran while it was down.  No answer was UNKNOWN for it either way.
    assert not [seen for seen in observed if seen.state is JobState.UNKNOWN], observed
    stopped, starting = restarted["down"]
    met = [(a - stopped, b - stopped) for a, b in rounds if a < starting and b > stopped]
    assert not_asked or met, ("no round ran while slurmctld was down", stopped, rounds)
    # Slurm's words for it (slurmrestd's jobs/state says "Unspecified error" meanwhile)
    causes = ["Unable to contact slurm controller"]
    if driver.name == "rest":
        causes.append("Unspecified error")
    if not_asked:
        assert any(cause in said for said in not_asked for cause in causes), not_asked


# -- bulk submission -------------------------------------------------------------------------


def count_runs(adapter: RealSlurmAdapter, monkeypatch: pytest.MonkeyPatch) -> List[List[str]]:
    calls: List[List[str]] = []
    real_run = adapter.executor.run

    def run(argv, *args: Any, **kwargs: Any):
        calls.append(list(argv))
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(adapter.executor, "run", run)
    return calls


def slurm_commands(calls: List[List[str]]) -> List[List[str]]:
    """The commands that asked Slurm: not ``scontrol --version`` (once), nor the exact
    times of the exit-code files found (``stat``, over SSH)."""
    return [call for call in calls if call[:2] != ["scontrol", "--version"] and call[0] != "stat"]


def test_two_hundred_jobs_array_two_commands_per_poll(
    adapter: RealSlurmAdapter, script, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_runs(adapter, monkeypatch)
    ids = adapter.submit_many([script("true", name="trivial.sh")] * 200)
    assert len(ids) == 200 and len(set(ids)) == 200
    array_id = ids[0].split("_")[0]
    assert ids == [f"{array_id}_{index}" for index in range(200)]
    sbatch_calls = [call for call in calls if call[0] == "sbatch"]
    cli = adapter.open().driver.name == "cli"
    if cli:
        assert len(sbatch_calls) == 1 and "--array=0-199" in sbatch_calls[0]
    else:  # pyslurm, REST: one array, no command at all
        assert sbatch_calls == []
    per_poll = 2 if cli else 0
    deadline = time.monotonic() + 180
    polls = 0
    while True:
        calls.clear()
        statuses = adapter.get_job_statuses(ids)
        polls += 1
        asked = slurm_commands(calls)
        assert len(asked) <= per_poll, [call[0] for call in calls]
        if all(status.is_terminal for status in statuses.values()):
            break
        assert time.monotonic() < deadline, "200 jobs did not finish in time"
        time.sleep(1)
    assert {status.state for status in statuses.values()} == {JobState.COMPLETED}
    assert polls >= 1
    fresh = fresh_adapter(adapter)
    calls.clear()
    again = fresh.get_job_statuses(ids)  # no records here: all asked of Slurm
    asked = slurm_commands(calls)
    assert len(asked) <= per_poll and {s.state for s in again.values()} == {JobState.COMPLETED}


def test_submit_many_failing_task_and_task_cancel(adapter: RealSlurmAdapter, script) -> None:
    ok = script("echo task $SLURM_ARRAY_TASK_ID; exit 0", name="ok.sh")
    bad = script('echo "bad $1"; exit 7', name="bad.sh")
    slow = script("sleep 120", name="slow.sh")
    # one name for all: one array (each script's own name would make a submission each)
    ids = adapter.submit_many([ok, (bad, ["arg one"]), slow, ok], {"job_name": "mixed"})
    assert len({job_id.split("_")[0] for job_id in ids}) == 1
    assert wait_for_state(adapter, ids[2], JobState.RUNNING).state is JobState.RUNNING
    adapter.cancel_job(ids[2])
    final = adapter.wait_all(ids, poll_interval=1, timeout=120)
    assert final[ids[0]].state is JobState.COMPLETED
    assert final[ids[1]].state is JobState.FAILED and final[ids[1]].exit_code == 7
    assert final[ids[2]].state is JobState.CANCELLED
    assert final[ids[3]].state is JobState.COMPLETED
    assert "bad arg one" in adapter.get_job_logs(ids[1])
    assert adapter.log_path(ids[3]).endswith(f"/slurm-{ids[3]}.out")
    assert "task 3" in adapter.get_job_logs(ids[3])


def test_array_tasks_ignore_an_inherited_task_index(
    cluster: Dict[str, str],
    target: Target,
    script,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local_only(target)
    # hpcbridge run inside a job it submitted one by one sees that job's index
    monkeypatch.setenv("HPCBRIDGE_TASK_INDEX", "1")
    own = make_adapter(cluster, tmp_path)
    # And no login shell before each task: sbatch sets SLURM_GET_USER_ENV=1 for any
    # --export but a bare ALL, and slurmd then runs `su - USER` to load its environment.
    body = 'echo ran {} "${{SLURM_GET_USER_ENV:-no-login}}"'
    ids = own.submit_many([script(body.format(name), name=f"{name}.sh") for name in "abc"])
    final = own.wait_all(ids, poll_interval=1, timeout=120)
    assert {status.state for status in final.values()} == {JobState.COMPLETED}
    logs = [own.get_job_logs(job_id).strip() for job_id in ids]
    assert logs == ["ran a no-login", "ran b no-login", "ran c no-login"]
    own.store.close()


def fresh_adapter(adapter: RealSlurmAdapter, name: str = "fresh") -> RealSlurmAdapter:
    """An adapter with no records of its own, the same driver and transport."""
    same = {"HPCBRIDGE_SLURM_DRIVER": adapter.open().driver.name}
    if adapter.settings.slurm_rest_url:  # the REST driver's slurmrestd
        same["HPCBRIDGE_SLURM_REST_URL"] = adapter.settings.slurm_rest_url
    return make_adapter(
        same,
        Path(adapter.settings.state_path).parent / name,
        executor=adapter.executor,
        command_env=adapter.command_env,  # SLURM_CONF, over SSH
    )


def test_array_task_zero_runs_long_while_task_one_is_cancelled(
    adapter: RealSlurmAdapter, script, cluster: Dict[str, str]
) -> None:
    # pyslurm reports task 0 without its task id: it must still be found, live and in history
    pair = [script("sleep 8", name="long.sh"), script("sleep 300")]
    ids = adapter.submit_many(pair, {"job_name": "pair"})  # one name: one array
    assert ids[0].endswith("_0") and ids[1].endswith("_1")
    assert wait_for_state(adapter, ids[0], JobState.RUNNING).state is JobState.RUNNING
    assert wait_for_state(adapter, ids[1], JobState.RUNNING).state is JobState.RUNNING
    adapter.cancel_job(ids[1])
    final = adapter.wait_all(ids, poll_interval=1, timeout=120)
    assert final[ids[0]].state is JobState.COMPLETED and final[ids[0]].exit_code == 0
    # Its end is seen first from the scheduler or from the exit-code file, times either way.
    assert final[ids[0]].native_state in ("COMPLETED", FROM_FILE)
    assert final[ids[0]].start_time and final[ids[0]].end_time
    assert final[ids[1]].state is JobState.CANCELLED
    if cluster.get("HPCBRIDGE_SLURM_ACCOUNTING") != "0":
        # A fresh adapter has only Slurm to ask: COMPLETING a moment past the file's end.
        again = wait_for_state(fresh_adapter(adapter), ids[0], JobState.COMPLETED, timeout=30)
        assert again.state is JobState.COMPLETED and again.native_state == "COMPLETED"


@pytest.mark.parametrize(
    ("body", "code"), [("exit 130", 130), ("kill -9 $$", 137)], ids=["exit-130", "kill-9"]
)
def test_exit_codes_of_128_and_above(
    adapter: RealSlurmAdapter, script, body: str, code: int
) -> None:
    job_id = adapter.submit_job(script(body))
    status = adapter.wait(job_id, poll_interval=1, timeout=120)
    assert status.state is JobState.FAILED and status.exit_code == code, status
    assert status.native_state == "FAILED"
    again = fresh_adapter(adapter).get_job_status(job_id)  # no record: the scheduler's answer
    assert again.state is JobState.FAILED and again.exit_code == code, again


def test_dependency_on_array_tasks(adapter: RealSlurmAdapter, script) -> None:
    ids = adapter.submit_many([script("sleep 2")] * 3)
    child = adapter.submit_job(script("exit 0"), depends_on=ids)
    assert adapter.get_job_status(child).state is JobState.PENDING
    final = adapter.wait_all([*ids, child], poll_interval=1, timeout=120)
    assert {status.state for status in final.values()} == {JobState.COMPLETED}


# -- the slow checks, last ----------------------------------------------------------------------


def test_purged_job_is_reported_from_sacct(
    background: Dict[str, Any], cluster: Dict[str, str], target: Target
) -> None:
    local_only(target)
    if cluster.get("HPCBRIDGE_SLURM_ACCOUNTING") == "0":
        pytest.skip("the cluster runs without accounting")
    job_id = background["purged"]
    deadline = time.monotonic() + 150
    while squeue_knows(job_id):  # MinJobAge=10 s, purged on slurmctld's next sweep
        assert time.monotonic() < deadline, f"job {job_id} never left squeue"
        time.sleep(2)
    fresh = make_adapter(cluster, background["root"] / "fresh")  # no record, no cache
    assert fresh.open().driver.name == cluster["HPCBRIDGE_SLURM_DRIVER"]
    status = fresh.get_job_status(job_id)
    assert status.state is JobState.FAILED and status.exit_code == 5
    assert status.end_time is not None


@pytest.mark.slow
def test_time_limit_gives_timeout(background: Dict[str, Any], target: Target) -> None:
    local_only(target)
    own: RealSlurmAdapter = background["adapter"]
    status = own.wait(background["timeout"], poll_interval=3, timeout=200)
    assert status.state is JobState.TIMEOUT
    assert status.native_state == "TIMEOUT"
    assert status.start_time and status.end_time
    assert 55 <= (status.end_time - status.start_time).total_seconds() <= 130
