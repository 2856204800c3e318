"""Sweeps through the Slurm 22.05 test cluster's own cap: the test users' associations
at ``MaxSubmitJobs=50`` (``sacctmgr``) for this module, as they were afterwards.

- 600 jobs, a hello->bye pair per parameter, fed with no cap given: the cap is read
  from the cluster (50); every job COMPLETED; never more than 50 of the user's jobs
  queued (``squeue`` sampled all along, each array task counted); no refusal reaches
  the caller.
- The same over SSH as the test user, the feeding process killed with SIGKILL halfway:
  ``hpcbridge wait SWEEP`` in a new process finishes it - 600 jobs ran (``sacct``),
  each parameter's hello and bye once.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from hpcbridge.engine.sweeping import Sweep
from hpcbridge.model import JobState
from hpcbridge.store.jobs import JobStore
from hpcbridge.store.sweeps import SweepBook
from tests.conftest import REPO
from tests.support.pairs import PAIRS, add_pairs
from tests.support.slurm_clusters import (
    TARGETS,
    cluster_for,
    make_adapter,
    run_slurm,
)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

CAP = 50
SSH_USER = os.environ.get("HPCBRIDGE_SSH_TEST_USER", "hpcbtest")
#: squeue's states of a job that counts against MaxSubmitJobs (not ended yet)
QUEUED = "PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED,REQUEUED,RESIZING"


@pytest.fixture(scope="module")
def capped() -> Iterator[Dict[str, str]]:
    """The default cluster, with root's and the test user's MaxSubmitJobs at 50."""
    for env in cluster_for(TARGETS["22.05-cli"]):
        if "HPCBRIDGE_SLURM_CLUSTER" not in env:
            pytest.skip("the test cluster's env file names no cluster (start.sh, accounting)")
        set_cap(env, str(CAP))
        try:
            time.sleep(1)  # slurmdbd pushes the change to slurmctld
            yield env
        finally:
            set_cap(env, "-1")


def set_cap(env: Dict[str, str], value: str) -> None:
    """MaxSubmitJobs of root's and the test user's associations (-1: none)."""
    where = ["where", f"name=root,{SSH_USER}", f"cluster={env['HPCBRIDGE_SLURM_CLUSTER']}"]
    argv = ["sacctmgr", "-i", "modify", "user", *where, "set", f"MaxSubmitJobs={value}"]
    done = run_slurm(argv, env)
    assert done.returncode == 0, done.stdout + done.stderr


class QueueSampler:
    """The most jobs of ``user`` not ended, by ``squeue`` every half second."""

    def __init__(self, env: Dict[str, str], user: str) -> None:
        self.env, self.user = env, user
        self.samples: List[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> QueueSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        argv = ["squeue", "--noheader", "--array", f"--user={self.user}"]
        argv += [f"--states={QUEUED}", "--format=%i"]
        while not self._stop.is_set():
            out = run_slurm(argv, self.env, timeout=30)
            if out.returncode == 0:
                self.samples.append(len(out.stdout.split()))
            self._stop.wait(0.5)

    @property
    def peak(self) -> int:
        return max(self.samples, default=0)


def scripts(folder: Path, ran: str) -> Dict[str, str]:
    """hello.sh and bye.sh of this run, each noting its parameter in ``ran``."""
    folder.mkdir(parents=True, exist_ok=True)
    made = {}
    for word in ("hello", "bye"):
        path = folder / f"{word}-{os.getpid()}.sh"
        path.write_text(f'#!/bin/sh\necho "{word} $1" >> {shlex.quote(ran)}\n')
        path.chmod(0o755)
        made[word] = str(path)
    return made


def assert_each_once(ran: str) -> None:
    lines = sorted(Path(ran).read_text().splitlines())
    wanted = sorted(f"{word} {i}" for word in ("hello", "bye") for i in range(PAIRS))
    assert lines == wanted, f"{len(lines)} runs noted, {len(set(lines))} distinct"


def test_the_cap_is_read_from_the_cluster_and_never_passed(
    capped: Dict[str, str], tmp_path: Path
) -> None:
    adapter = make_adapter(capped, tmp_path)
    assert adapter.open().driver.queue_limit() == CAP  # sacctmgr: the association's cap
    ran = str(tmp_path / "ran")
    sweep = Sweep(adapter, "pairs")  # no cap given
    add_pairs(sweep, scripts(tmp_path / "scripts", ran))
    with QueueSampler(capped, "root") as sampler:
        final = sweep.wait(poll_interval=1, timeout=1200)
    assert len(final) == 2 * PAIRS
    assert {status.state for status in final.values()} == {JobState.COMPLETED}
    assert sampler.samples and sampler.peak <= CAP, sampler.peak
    assert sampler.peak >= CAP - 10, f"fed below the cap: at most {sampler.peak} queued"
    assert_each_once(ran)
    adapter.close()


FEEDER = textwrap.dedent(
    """
    import sys
    from hpcbridge import get_scheduler_adapter
    from hpcbridge.engine.sweeping import Sweep
    from tests.support.pairs import add_pairs
    hello, bye = sys.argv[1:3]
    sweep = Sweep(get_scheduler_adapter(), "killed")
    add_pairs(sweep, {"hello": hello, "bye": bye})
    sweep.submit()
    """
)


def ssh_env(capped: Dict[str, str], server: Any, workdir: str, state: Path) -> Dict[str, str]:
    """What a process needs to feed the sweep over SSH as the test user."""
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HPCBRIDGE_SCHEDULER": "slurm",
        "HPCBRIDGE_SLURM_DRIVER": "cli",
        "HPCBRIDGE_TRANSPORT": "ssh",
        "HPCBRIDGE_SSH_HOST": server.host,
        "HPCBRIDGE_SSH_PORT": str(server.port),
        "HPCBRIDGE_SSH_USER": server.user,
        "HPCBRIDGE_SSH_KEY": server.key,
        "HPCBRIDGE_SSH_KNOWN_HOSTS": server.known_hosts,
        "HPCBRIDGE_COMMAND_ENV": f"SLURM_CONF={capped['SLURM_CONF']}",
        "HPCBRIDGE_REMOTE_WORKDIR": workdir,
        "HPCBRIDGE_STATE_DIR": str(state),
        "HPCBRIDGE_POLL_INTERVAL": "1",
    }


def test_over_ssh_a_feeder_killed_halfway_is_finished_by_hpcbridge_wait(
    capped: Dict[str, str], ssh_server: Any, ssh_executor: Any, ssh_remote_dir: str, tmp_path: Path
) -> None:
    # The scripts and what they note live where the jobs run: the test user's side.
    ran = f"{ssh_remote_dir}/ran"
    made = {word: f"{ssh_remote_dir}/{word}-{os.getpid()}.sh" for word in ("hello", "bye")}
    for word, path in made.items():
        ssh_executor.write_text(path, f'#!/bin/sh\necho "{word} $1" >> {shlex.quote(ran)}\n')
        assert ssh_executor.run(["chmod", "755", path]).ok
    state = tmp_path / "state"
    env = ssh_env(capped, ssh_server, ssh_remote_dir, state)
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    with QueueSampler(capped, SSH_USER) as sampler:
        feeder = subprocess.Popen(
            [sys.executable, "-c", FEEDER, made["hello"], made["bye"]], env=env, cwd=REPO
        )
        deadline = time.monotonic() + 600
        while _sent(state) < PAIRS:  # halfway: every hello sent, no bye yet
            assert feeder.poll() is None, f"the feeder ended early (rc {feeder.returncode})"
            assert time.monotonic() < deadline, "the feeder never got halfway"
            time.sleep(0.5)
        feeder.send_signal(signal.SIGKILL)
        feeder.wait()
        left = 2 * PAIRS - _sent(state)
        assert left > 0, "the feeder sent everything before it was killed"
        waited = subprocess.run(
            [sys.executable, "-m", "hpcbridge", "wait", "killed", "--timeout", "1200"],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=1300,
        )
    assert waited.returncode == 0, waited.stdout[-2000:] + waited.stderr[-2000:]
    assert sampler.samples and sampler.peak <= CAP, sampler.peak
    assert "Limit" not in waited.stderr, waited.stderr[-2000:]  # no refusal shown
    noted = ssh_executor.read_text(ran)
    lines = sorted(noted.splitlines())
    wanted = sorted(f"{word} {i}" for word in ("hello", "bye") for i in range(PAIRS))
    assert lines == wanted, f"{len(lines)} runs noted, {len(set(lines))} distinct"
    assert _sacct_completed(capped, started) == 2 * PAIRS
    # status NAME: the sweep's state and counts in one line (issue 46.5)
    status = subprocess.run(
        [sys.executable, "-m", "hpcbridge", "status", "killed"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    assert f"killed: sweep of {2 * PAIRS}, fed: {2 * PAIRS} COMPLETED" in status.stdout


def _sent(state: Path) -> int:
    """How many of the sweep's tasks have an id, from its store (0 before it is made)."""
    path = state / "jobs.db"
    if not path.exists():
        return 0
    try:
        book = SweepBook(JobStore(path))
        return len(book.job_ids("killed"))
    except Exception:  # noqa: BLE001 - the feeder is still creating the store
        return 0


def _sacct_completed(env: Dict[str, str], started: str) -> int:
    """The test user's jobs that ran since ``started`` (each array task once), by sacct:
    its records reach slurmdbd a moment after each end."""
    argv = ["sacct", "--noheader", "--parsable2", "-X", f"--user={SSH_USER}"]
    argv += ["--starttime", started, "--format=JobID,JobName,State"]
    count, deadline = -1, time.monotonic() + 60
    while time.monotonic() < deadline:
        out = run_slurm(argv, env, timeout=60)
        assert out.returncode == 0, out.stderr
        rows = [line.split("|") for line in out.stdout.splitlines() if line]
        names = (f"hello-{os.getpid()}.sh", f"bye-{os.getpid()}.sh")
        mine = [row for row in rows if row[1] in names]
        count = sum(row[2] == "COMPLETED" for row in mine)
        if count >= 2 * PAIRS:
            break
        time.sleep(2)
    return count
