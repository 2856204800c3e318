"""Accounting off: the wrapper's exit-code file still gives the final state.

The module starts a Slurm 22.05 cluster of its own without accounting (its own
state folder, ports and munge; ``containers/slurm/start.sh`` with
``HPCBRIDGE_SLURM_ACCOUNTING=0``) beside the default test cluster, which it
leaves alone, and stops it at the end - so it runs in any order.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Dict, Iterator, Optional

import pytest

from hpcbridge.config import Settings
from hpcbridge.model import JobState
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from hpcbridge.store import JobStore
from hpcbridge.transports.local import LocalExecutor
from tests.support.slurm_clusters import DEBIAN_STATE, SKIP, cluster_env

pytestmark = [pytest.mark.slurm]

SLURM_DIR = Path(__file__).resolve().parents[2] / "containers" / "slurm"
#: the cluster of this module: no accounting, ports 6917-6919
CLUSTER = {
    "HPCBRIDGE_SLURM_STATE": "/tmp/hpcbridge-slurm-noacct",
    "HPCBRIDGE_SLURM_ACCOUNTING": "0",
    "HPCBRIDGE_SLURM_CLUSTER": "hpcbnoacct",
    "HPCBRIDGE_SLURM_CTLD_PORT": "6917",
    "HPCBRIDGE_SLURM_SLURMD_PORT": "6918",
    "HPCBRIDGE_SLURM_DBD_PORT": "6919",
}


def read_env(state: str) -> Optional[Dict[str, str]]:
    env_file = Path(state) / "env.sh"
    if not env_file.exists():
        return None
    found: Dict[str, str] = {}
    for line in env_file.read_text().splitlines():
        parts = shlex.split(line, comments=True)
        if len(parts) == 2 and parts[0] == "export" and "=" in parts[1]:
            name, value = parts[1].split("=", 1)
            found[name] = value
    return found if found.get("SLURM_CONF") else None


def cluster_script(name: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SLURM_DIR / name)],
        env={**os.environ, **CLUSTER},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def no_accounting() -> Iterator[Dict[str, str]]:
    if cluster_env(DEBIAN_STATE) is None:
        pytest.skip(SKIP)  # Debian's Slurm is set up by the default cluster's start.sh
    if os.geteuid() != 0:
        pytest.skip("starting a Slurm cluster of its own needs root (containers/slurm/start.sh)")
    started = cluster_script("start.sh")
    try:
        assert started.returncode == 0, f"start.sh failed:\n{started.stdout}\n{started.stderr}"
        env = read_env(CLUSTER["HPCBRIDGE_SLURM_STATE"])
        assert env is not None and env.get("HPCBRIDGE_SLURM_ACCOUNTING") == "0"
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            yield env
    finally:
        cluster_script("stop.sh")


def squeue_knows(job_id: str) -> bool:
    """Whether this module's cluster still lists the job (SLURM_CONF is its own)."""
    out = subprocess.run(
        ["squeue", "--noheader", "--states=all", f"--jobs={job_id}", "--format=%i"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return bool(out.stdout.strip())


def test_exit_code_file_gives_the_final_state(
    no_accounting: Dict[str, str], tmp_path: Path
) -> None:
    settings = Settings.from_env(
        env=dict(no_accounting), state_dir=str(tmp_path / "state"), scheduler="slurm"
    )

    def adapter() -> RealSlurmAdapter:
        return RealSlurmAdapter(
            executor=LocalExecutor(),
            remote_workdir=str(tmp_path / "jobs"),
            settings=settings,
            store=JobStore(tmp_path / "jobs.db"),
        )

    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "ok.sh").write_text("#!/bin/sh\nexit 0\n")
    (scripts / "six.sh").write_text("#!/bin/sh\nexit 6\n")
    first = adapter()
    ok = first.submit_job(str(scripts / "ok.sh"))
    six = first.submit_job(str(scripts / "six.sh"))
    deadline = time.monotonic() + 180
    while squeue_knows(ok) or squeue_knows(six):  # gone from squeue; sacct has nothing
        assert time.monotonic() < deadline, "jobs never left squeue"
        time.sleep(2)
    sacct = subprocess.run(["sacct", "-j", ok], capture_output=True, text=True, timeout=30)
    assert "accounting storage is disabled" in (sacct.stdout + sacct.stderr).lower()
    later = adapter()  # another process, same records: nothing cached
    found = later.get_job_statuses([ok, six])
    assert found[ok].state is JobState.COMPLETED and found[ok].exit_code == 0
    assert found[six].state is JobState.FAILED and found[six].exit_code == 6
    assert "exit-code file" in found[six].reason
    record = later.store.get(six, "slurm")
    assert record is not None and record.state == "FAILED"
