"""Accounting off: the wrapper's exit-code file still gives the final state.

The module starts a Slurm 22.05 cluster of its own without accounting (its own
state folder, ports and munge; ``containers/slurm/start.sh`` with
``HPCBRIDGE_SLURM_ACCOUNTING=0``) beside the default test cluster, which it
leaves alone, and stops it at the end - so it runs in any order.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest

from hpcbridge.model import JobState
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from hpcbridge.settings.config import Settings
from hpcbridge.store.jobs import JobStore
from hpcbridge.transports.local import LocalExecutor
from tests.support.slurm_clusters import own_cluster

pytestmark = [pytest.mark.slurm]


@pytest.fixture(scope="module")
def no_accounting() -> Iterator[Dict[str, str]]:
    with own_cluster("noacct", 6917) as env:
        assert env.get("HPCBRIDGE_SLURM_ACCOUNTING") == "0"
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            yield env


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
        env=dict(no_accounting),
        state_dir=str(tmp_path / "state"),
        scheduler="slurm",
        min_poll_interval=0.0,  # the cluster is the test's own
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
