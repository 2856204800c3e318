"""A Slurm job followed over SSH while the login node's sshd restarts."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest

from hpcbridge import JobState
from tests.support.slurm_clusters import TARGETS, cluster_for, make_adapter
from tests.support.ssh import make_executor

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
