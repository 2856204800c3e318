"""An id the narrowing (``HPCBRIDGE_SCHEDULER=slurm``) leaves unrecorded, though it is
recorded on the mock, is asked of the real Slurm 22.05 saying so first: the job asked
may be someone else's, and the user's own job is left alone (issue 32 point 6)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, Iterator

import pytest

from tests.support.cli import hpcbridge_in
from tests.support.slurm_clusters import TARGETS, cluster_for

pytestmark = [pytest.mark.slurm]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    yield from cluster_for(TARGETS["22.05-cli"])


def test_a_mock_jobs_id_asked_of_slurm_says_where_it_is_recorded(
    cluster: Dict[str, str], tmp_path: Path
) -> None:
    dropped = ("HPCBRIDGE_", "EXAMLOPS_", "SLURM_", "FLUX_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    env.update(cluster, HPCBRIDGE_STATE_DIR=str(tmp_path / "state"))
    env["HPCBRIDGE_MIN_POLL_INTERVAL"] = "0"
    script = tmp_path / "long.sh"
    script.write_text("#!/bin/sh\nsleep 60\n")
    script.chmod(0o755)
    submitted = hpcbridge_in(env, "submit", str(script))  # on the mock, the default
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    try:
        asked = hpcbridge_in({**env, "HPCBRIDGE_SCHEDULER": "slurm"}, "status", job_id)
        first = asked.stderr.splitlines()[0]
        assert first == (
            f"hpcbridge: job {job_id} is not recorded on slurm here; asking slurm for it "
            f"(yours is recorded elsewhere: hpcbridge status {job_id} --scheduler mock)"
        ), asked.stderr
        # whatever Slurm said of its own job of that id, the user's own is untouched
        own = json.loads(hpcbridge_in(env, "status", job_id, "--json").stdout)
        assert own["state"] in ("PENDING", "RUNNING"), own
    finally:
        hpcbridge_in(env, "cancel", job_id)


def test_with_no_scheduler_chosen_a_recorded_job_is_asked_where_it_is_without_a_word(
    cluster: Dict[str, str], tmp_path: Path
) -> None:
    """HPCBRIDGE_SCHEDULER unset: nothing was chosen that the record overrides, so status,
    logs, wait and cancel of Slurm jobs say nothing of where they ask (issue 46, item 8)."""
    dropped = ("HPCBRIDGE_", "EXAMLOPS_", "SLURM_", "FLUX_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    env.update(cluster, HPCBRIDGE_STATE_DIR=str(tmp_path / "state"))
    script = tmp_path / "quick.sh"
    script.write_text("#!/bin/sh\necho quick\n")
    script.chmod(0o755)
    slurm = {**env, "HPCBRIDGE_SCHEDULER": "slurm"}
    ids = []
    for _ in range(2):
        submitted = hpcbridge_in(slurm, "submit", str(script), "--time", "1")
        assert submitted.returncode == 0, submitted.stderr
        ids.append(submitted.stdout.strip())
    waited = hpcbridge_in(env, "wait", *ids, "--timeout", "120")
    assert waited.returncode == 0, waited.stderr
    for command in (["status", *ids], ["logs", ids[0]], ["cancel", *ids]):
        answer = hpcbridge_in(env, *command)
        assert answer.returncode == 0, answer.stderr
        assert "asked where it was submitted" not in answer.stderr, answer.stderr
    assert "asked where it was submitted" not in waited.stderr
    # a transport chosen that is where the jobs are: nothing to say either
    chosen = hpcbridge_in({**env, "HPCBRIDGE_TRANSPORT": "local"}, "status", *ids)
    assert chosen.returncode == 0 and "asked where" not in chosen.stderr  # the same place
    # a scheduler chosen that is not theirs leaves their records out: said, as before
    other = hpcbridge_in({**env, "HPCBRIDGE_SCHEDULER": "mock"}, "status", ids[0])
    assert "recorded elsewhere: hpcbridge status" in other.stderr, other.stderr
