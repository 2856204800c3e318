"""Accounting off: the wrapper's exit-code file still gives the final state.

Runs last (file name): it restarts the test cluster with
``HPCBRIDGE_SLURM_ACCOUNTING=0`` and restores the normal cluster (stop +
start) at the end, whatever happened.
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
from tests.integration.test_slurm_adapter import squeue_knows

pytestmark = [pytest.mark.slurm]

SLURM_DIR = Path(__file__).resolve().parents[2] / "containers" / "slurm"
STATE = Path(os.environ.get("HPCBRIDGE_SLURM_STATE", "/tmp/hpcbridge-slurm"))
SKIP = "Slurm test cluster not running: start containers/slurm/start.sh"


def read_env() -> Optional[Dict[str, str]]:
    env_file = STATE / "env.sh"
    if not env_file.exists():
        return None
    found: Dict[str, str] = {}
    for line in env_file.read_text().splitlines():
        parts = shlex.split(line, comments=True)
        if len(parts) == 2 and parts[0] == "export" and "=" in parts[1]:
            name, value = parts[1].split("=", 1)
            found[name] = value
    return found if found.get("SLURM_CONF") else None


def cluster_script(name: str, accounting: str) -> None:
    env = {
        **os.environ,
        "HPCBRIDGE_SLURM_ACCOUNTING": accounting,
        "HPCBRIDGE_SLURM_STATE": str(STATE),
    }
    result = subprocess.run(
        ["bash", str(SLURM_DIR / name)], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="module")
def no_accounting() -> Iterator[Dict[str, str]]:
    before = read_env()
    if before is None:
        pytest.skip(SKIP)
    try:
        cluster_script("stop.sh", "1")
        cluster_script("start.sh", "0")
        env = read_env()
        assert env is not None and env.get("HPCBRIDGE_SLURM_ACCOUNTING") == "0"
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            yield env
    finally:
        cluster_script("stop.sh", "0")
        cluster_script("start.sh", "1")


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
