"""A Slurm job followed over SSH while the login node's sshd restarts, or is down
for half a minute."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from hpcbridge import JobState
from hpcbridge.cli.exits import EXIT_JOB_NOT_COMPLETED, EXIT_OK
from tests.support.places import ssh_env
from tests.support.slurm_clusters import TARGETS, cluster_for, make_adapter
from tests.support.ssh import PrivateServer, make_executor, private_server, waiting_pids

pytestmark = [pytest.mark.slurm, pytest.mark.ssh]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    """Debian's 22.05: the SSH test user's commands are its own."""
    yield from cluster_for(TARGETS["22.05-cli"])


def test_wait_rides_out_an_sshd_restart(cluster, ssh_server, tmp_path):
    executor = make_executor(ssh_server, default_timeout=60.0, min_reconnect_interval=0.2)
    remote = executor.run(["mktemp", "-d", "/tmp/hpcbridge-fault.XXXXXXXX"]).stdout.strip()
    adapter = make_adapter(
        cluster,
        tmp_path,
        executor,
        remote_workdir=remote,
        command_env={"SLURM_CONF": cluster["SLURM_CONF"]},
    )
    script = tmp_path / "slow.sh"
    script.write_text("#!/bin/sh\nsleep 6\necho survived\n")
    script.chmod(0o755)
    job_id = adapter.submit_job(str(script), {"time": "5"})
    connections_before = executor.connection_count
    outcome = {}

    def follow() -> None:
        try:
            outcome["status"] = adapter.wait(job_id, poll_interval=1, timeout=180)
        except Exception as exc:  # reported below
            outcome["error"] = exc

    waiter = threading.Thread(target=follow)
    waiter.start()
    time.sleep(1.5)
    restarted = subprocess.run(
        ["bash", str(REPO / "containers/sshd/restart.sh")],
        env={**os.environ, "HPCBRIDGE_SSHD_STATE": ssh_server.state},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert restarted.returncode == 0, restarted.stderr
    waiter.join(200)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["status"].state is JobState.COMPLETED
    assert executor.connection_count > connections_before  # it really reconnected
    assert "survived" in adapter.get_job_logs(job_id)
    executor.run(["rm", "-rf", "--", remote])
    executor.close()


#: how long the login node's sshd is down in the outage test (seconds)
OUTAGE = 30.0


@pytest.fixture
def own_sshd(tmp_path: Path) -> Iterator[PrivateServer]:
    """An sshd of this test's own: stopping it leaves the shared one alone."""
    yield from private_server(tmp_path / "sshd")


def test_every_wait_rides_out_a_30_s_outage_of_the_login_node(
    cluster: Dict[str, str], own_sshd: PrivateServer, tmp_path: Path
) -> None:
    """``wait`` in Python, ``hpcbridge wait ID`` and ``hpcbridge submit --wait`` over
    SSH, while the login node's sshd (listener and sessions) is down for 30 s: each
    ends with its job's real end, learnt once the node is back."""
    server = own_sshd.server
    assert server is not None
    executor = make_executor(server, default_timeout=60.0, min_reconnect_interval=1.0)
    remote = executor.run(["mktemp", "-d", "/tmp/hpcbridge-outage.XXXXXXXX"]).stdout.strip()
    state = tmp_path / "state"
    adapter = make_adapter(
        cluster,
        tmp_path,
        executor,
        remote_workdir=remote,
        command_env={"SLURM_CONF": cluster["SLURM_CONF"]},
    )
    # The jobs end only once released, during the outage: no wait can end before it,
    # and each learns the end only from the node once it is back.  The SSH server is
    # this machine: the test writes the release itself while sshd is down.
    release = Path(remote) / "release"
    wait_for_release = (
        f"i=0; while [ ! -e {release} ] && [ $i -lt 600 ]; do sleep 0.5; i=$((i+1)); done\n"
    )
    survived = tmp_path / "survived.sh"
    survived.write_text(f"#!/bin/sh\n{wait_for_release}echo survived\n")
    failed = tmp_path / "failed.sh"
    failed.write_text(f"#!/bin/sh\n{wait_for_release}exit 3\n")
    job_id = adapter.submit_job(str(survived), {"time": "5"})
    connections_before = executor.connection_count
    outcome: Dict[str, Any] = {}

    def follow() -> None:
        try:
            outcome["status"] = adapter.wait(job_id, poll_interval=5, timeout=300)
        except Exception as exc:  # reported below
            outcome["error"] = exc
        outcome["ended"] = time.monotonic()

    env = {
        "PYTHONPATH": str(REPO),
        "HPCBRIDGE_SCHEDULER": "slurm",
        "HPCBRIDGE_SLURM_DRIVER": "cli",
        **ssh_env(server),
        "HPCBRIDGE_COMMAND_ENV": f"SLURM_CONF={cluster['SLURM_CONF']}",
        "HPCBRIDGE_REMOTE_WORKDIR": remote,
        "HPCBRIDGE_STATE_DIR": str(state),
    }
    follow_args = ["--json", "--poll-interval", "5", "--timeout", "300"]
    commands = {
        "wait": ["wait", job_id, *follow_args],
        "submit --wait": ["submit", str(failed), "--time", "5", "--wait", *follow_args],
    }
    waiter = threading.Thread(target=follow)
    waiter.start()
    clis = {
        name: subprocess.Popen(
            [sys.executable, "-m", "hpcbridge", *argv],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, argv in commands.items()
    }
    # Every wait has asked about its job before the node goes away.
    expected = {os.getpid(), *(cli.pid for cli in clis.values())}
    deadline = time.monotonic() + 180
    while not expected <= waiting_pids(state / "jobs.db"):
        exited = {name: cli.poll() for name, cli in clis.items() if cli.poll() is not None}
        assert not exited and time.monotonic() < deadline, (
            f"not every wait began: {exited}",
            {name: cli.stderr.read() if name in exited else "" for name, cli in clis.items()},
        )
        time.sleep(0.2)
    stopped = time.monotonic()
    own_sshd.stop()
    time.sleep(OUTAGE / 3)
    release.touch()  # the jobs end while the node is away
    time.sleep(OUTAGE - (time.monotonic() - stopped))
    down = time.monotonic() - stopped
    own_sshd.start()
    back = time.monotonic() - stopped
    waiter.join(300)
    said = {name: cli.communicate(timeout=300) for name, cli in clis.items()}
    print(
        f"sshd down {down:.1f} s (back {back:.1f} s after the stop); the Python wait ended "
        f"{outcome['ended'] - stopped:.1f} s after the stop; stderr: {said}"
    )
    assert "error" not in outcome, outcome.get("error")
    assert outcome["status"].state is JobState.COMPLETED
    assert executor.connection_count > connections_before  # it really reconnected
    assert "survived" in adapter.get_job_logs(job_id)
    for name, cli in clis.items():
        out, err = said[name]
        # One line when the node went away, one when it was back; no error.
        assert err.count("out of reach") == 1 and err.count("reachable again") == 1, (name, err)
        assert "hpcbridge: error" not in err, (name, err)
        final = json.loads(out)
        if name == "wait":
            assert cli.returncode == EXIT_OK, (name, err)
            assert final["job_id"] == job_id and final["state"] == "COMPLETED"
        else:
            assert cli.returncode == EXIT_JOB_NOT_COMPLETED, (name, err)
            assert final["state"] == "FAILED" and final["exit_code"] == 3
    executor.run(["rm", "-rf", "--", remote])
    executor.close()
    adapter.close()
