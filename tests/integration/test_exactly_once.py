"""A submission whose answer is lost ends with exactly one job: adopted by its key.

Real faults on a Slurm 22.05 cluster of the module's own: its slurmctld paused
with SIGSTOP past ``MessageTimeout`` while ``sbatch`` waits for its answer (the
request is queued and becomes a job once the controller runs again), the SSH
connection cut while ``sbatch`` runs (on both SSH backends: paramiko's session
ended at sshd; the OpenSSH backend's local ``ssh`` of that one command killed, its
master left up, or its master killed), and the controller stopped outright (the
request never reaches it: sent again).  Each time the queue is asked, by the key in
the job's comment, how many jobs the submission made.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, Iterator, List

import pytest

from hpcbridge.model import JobState
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from hpcbridge.settings.config import Settings
from hpcbridge.store.jobs import JobStore
from hpcbridge.transports.local import LocalExecutor
from tests.conftest import _remote_dir
from tests.support.openssh import make_openssh_executor, skip_without_ssh, socket_folder
from tests.support.slurm_clusters import SLURM_DIR, own_cluster, run_slurm
from tests.support.ssh import SKIP_REASON, find_test_server

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

#: slurmctld's MessageTimeout on the test clusters (Slurm's default)
MESSAGE_TIMEOUT = 10.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    with own_cluster("once", 6947) as env:
        yield env


def controller_pid(cluster: Dict[str, str]) -> int:
    state = Path(cluster["SLURM_CONF"]).parent.parent
    return int((state / "run" / "slurmctld.pid").read_text().strip())


def adapter_for(cluster: Dict[str, str], root: Path, executor: Any = None, **kw: Any) -> Any:
    settings = Settings.from_env(
        env={},
        state_dir=str(root / "state"),
        scheduler="slurm",
        poll_interval=1.0,
        min_poll_interval=0.0,  # the cluster is the test's own
    )
    return RealSlurmAdapter(
        executor=executor or LocalExecutor(default_timeout=60),
        settings=settings,
        store=JobStore(root / "state" / "jobs.db"),
        command_env={"SLURM_CONF": cluster["SLURM_CONF"]},
        driver="cli",
        **kw,
    )


def write_script(folder: Path, body: str = "sleep 1\n") -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "job.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def jobs_with_key(cluster: Dict[str, str], key: str) -> List[str]:
    """The jobs (array ids for an array) whose comment carries the submission's key."""
    result = run_slurm(
        ["squeue", "--noheader", "--states=all", "--format=%F|%k"], cluster, timeout=60
    )
    assert result.returncode == 0, result.stderr
    rows = {line.split("|")[0] for line in result.stdout.split() if line.endswith(f":{key}")}
    return sorted(rows)


def key_of(adapter: Any, job_id: str) -> str:
    record = adapter.store.get(job_id, "slurm", adapter.host_label)
    assert record is not None and record.exit_file
    return Path(record.exit_file).name.split(".")[0]  # the wrapper's token


def paused_controller(cluster: Dict[str, str], seconds: float) -> threading.Thread:
    """SIGSTOP slurmctld once no job is completing, SIGCONT it after ``seconds``."""
    # A job whose steps still report their end (the extern step, a few seconds behind
    # the batch script) to a paused controller is "not ending with signals": slurmd then
    # drains the node ("Kill task failed") and no later job runs.
    deadline = time.monotonic() + 120
    while run_slurm(["squeue", "-h", "-t", "CG", "-o", "%i"], cluster, timeout=60).stdout.strip():
        assert time.monotonic() < deadline, "a job of an earlier case is still completing"
        time.sleep(0.5)
    pid = controller_pid(cluster)
    os.kill(pid, signal.SIGSTOP)

    def resume() -> None:
        time.sleep(seconds)
        os.kill(pid, signal.SIGCONT)

    thread = threading.Thread(target=resume)
    thread.start()
    return thread


@pytest.mark.parametrize("count", [1, 20], ids=["job", "array"])
def test_answer_lost_to_a_paused_controller_adopts_the_one_job(
    cluster: Dict[str, str], tmp_path: Path, count: int, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = adapter_for(cluster, tmp_path)
    script = write_script(tmp_path / "scripts")
    adapter.open().driver.max_batch()  # MaxArraySize asked now: the pause is sbatch's alone
    resumed = paused_controller(cluster, MESSAGE_TIMEOUT + 6)
    try:
        with caplog.at_level(logging.INFO, logger="hpcbridge"):
            ids = adapter.submit_many([script] * count)
    finally:
        resumed.join()
    assert "its answer was lost; adopted job" in caplog.text
    assert len(ids) == count
    key = key_of(adapter, ids[0])
    assert jobs_with_key(cluster, key) == [ids[0].split("_")[0]]  # exactly one job (array)
    final = adapter.wait_all(ids, poll_interval=1, timeout=120)
    assert {status.state for status in final.values()} == {JobState.COMPLETED}


def own_ssh_client(control_path: str, word: str) -> int:
    """The pid of this process's own ``ssh`` child that runs ``word`` through the master at
    ``control_path`` (0 while there is none)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode("utf-8", "replace").split("\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile
        remote = [arg for arg in argv if arg][-1:]
        if (
            parent == os.getpid()
            and f"ControlPath={control_path}" in argv
            and remote
            and re.search(rf"\b{word}\b", remote[0])
        ):
            return int(entry.name)
    return 0


@pytest.fixture(params=["paramiko", "openssh", "openssh-master"])
def ssh_path(request: pytest.FixtureRequest) -> Iterator[SimpleNamespace]:
    """An SSH backend's executor, a folder of the SSH user's, and ``cut()``: ends the
    connection that carries a running ``sbatch``.  paramiko: its session at sshd
    (containers/sshd).  openssh (containers/sshd-totp, after the session's one login):
    the local ``ssh`` of that one command killed, as when a command's client dies; the
    master, the user's login, stays up, and the look-up by key rides it.
    openssh-master (containers/sshd, a master of the case's own): the master killed; the
    look-up opens a new one (a key, no second factor)."""
    if request.param == "paramiko":
        user = request.getfixturevalue("ssh_server").user
        yield SimpleNamespace(
            executor=request.getfixturevalue("ssh_executor"),
            remote_dir=request.getfixturevalue("ssh_remote_dir"),
            cut=lambda: subprocess.run(["pkill", "-f", f"sshd: {user}"], check=False),
        )
    elif request.param == "openssh":
        executor = request.getfixturevalue("openssh_executor")

        def cut() -> None:
            deadline = time.monotonic() + 30
            while not (pid := own_ssh_client(executor.plan.control_path, "sbatch")):
                assert time.monotonic() < deadline, "no ssh ran sbatch"
                time.sleep(0.2)
            time.sleep(2)  # sbatch has sent its request to the paused controller
            os.kill(pid, signal.SIGKILL)

        remote_dir = request.getfixturevalue("openssh_remote_dir")
        yield SimpleNamespace(executor=executor, remote_dir=remote_dir, cut=cut)
    else:
        skip_without_ssh()
        server = find_test_server()
        if server is None:
            pytest.skip(SKIP_REASON)
        for runtime in socket_folder():
            own = make_openssh_executor(server, runtime, default_timeout=60.0)
            try:
                for remote_dir in _remote_dir(own):
                    cut = functools.partial(kill_master, own)
                    yield SimpleNamespace(executor=own, remote_dir=remote_dir, cut=cut)
            finally:
                own.logout()


def kill_master(executor: Any) -> None:
    """SIGKILL the OpenSSH executor's master connection (``ssh -O check`` names its pid)."""
    state = executor.master()
    found = re.search(r"pid=(\d+)", state.words)
    assert state.up and found, state.words
    os.kill(int(found.group(1)), signal.SIGKILL)


def test_answer_lost_to_a_cut_ssh_connection_adopts_the_one_job(
    cluster: Dict[str, str],
    ssh_path: SimpleNamespace,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter = adapter_for(cluster, tmp_path, ssh_path.executor, remote_workdir=ssh_path.remote_dir)
    script = write_script(tmp_path / "scripts")
    resumed = paused_controller(cluster, MESSAGE_TIMEOUT + 4)
    cuts: List[BaseException] = []

    def cut() -> None:
        # sbatch is waiting for the paused controller: end the SSH connection under it.
        time.sleep(3)
        try:
            ssh_path.cut()
        except BaseException as exc:  # told to the test below
            cuts.append(exc)

    cutter = threading.Thread(target=cut)
    cutter.start()
    try:
        with caplog.at_level(logging.INFO, logger="hpcbridge"):
            job_id = adapter.submit_job(script)
    finally:
        cutter.join()
        resumed.join()
    assert not cuts, cuts
    assert "dropped while sbatch was running" in caplog.text
    assert "adopted job" in caplog.text
    key = key_of(adapter, job_id)
    assert jobs_with_key(cluster, key) == [job_id]
    assert adapter.wait(job_id, poll_interval=1, timeout=120).state is JobState.COMPLETED


def test_a_request_that_never_reached_the_controller_is_sent_once_more(
    cluster: Dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = adapter_for(cluster, tmp_path)
    script = write_script(tmp_path / "scripts")
    env = {**os.environ, **cluster}
    stop = subprocess.run(
        ["bash", str(SLURM_DIR / "restart-ctld.sh"), "stop"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert stop.returncode == 0, stop.stderr

    def start_again() -> None:
        time.sleep(25)  # past sbatch's own attempts to connect
        subprocess.run(
            ["bash", str(SLURM_DIR / "restart-ctld.sh"), "start"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    starter = threading.Thread(target=start_again)
    starter.start()
    try:
        with caplog.at_level(logging.INFO, logger="hpcbridge"):
            job_id = adapter.submit_job(script)
    finally:
        starter.join()
    assert "did not reach slurmctld" in caplog.text
    key = key_of(adapter, job_id)
    assert jobs_with_key(cluster, key) == [job_id]
    assert adapter.wait(job_id, poll_interval=1, timeout=120).state is JobState.COMPLETED
