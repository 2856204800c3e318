"""``$HPCBRIDGE_LAUNCHER`` on the Slurm 22.05 test cluster: ``srun`` inside the
batch job, so one script says ``$HPCBRIDGE_LAUNCHER -n 2 hostname`` on every
scheduler (the Flux case is in test_flux_adapter.py).  ``nested=`` is accepted
and does not apply."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterator

import pytest

from hpcbridge.model import JobState
from tests.support.slurm_clusters import TARGETS, cluster_for, make_adapter

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    yield from cluster_for(TARGETS["22.05-cli"])


def test_launcher_runs_two_tasks_under_srun(cluster: Dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / "launch.sh"
    script.write_text(
        '#!/bin/sh\necho "launcher=$HPCBRIDGE_LAUNCHER"\n$HPCBRIDGE_LAUNCHER -n 2 hostname\n'
    )
    script.chmod(0o755)
    adapter = make_adapter(cluster, tmp_path)
    try:
        job_id = adapter.submit_job(script, {"ntasks": 2, "time": "60"}, nested=True)
        status = adapter.wait(job_id, poll_interval=1, timeout=120)
        logs = adapter.get_job_logs(job_id)
        record = adapter.store.get(job_id, "slurm", adapter.host_label)
    finally:
        adapter.store.close()
    assert status.state is JobState.COMPLETED, logs
    lines = logs.splitlines()
    assert lines[0] == "launcher=srun"
    # the test cluster's nodes run on this machine: hostname is ours or the node's name
    assert len(lines[1:]) == 2 and len(set(lines[1:])) == 1, logs
    assert record is not None and record.kind is None
