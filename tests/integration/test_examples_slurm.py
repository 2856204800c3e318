"""The README's Slurm example and the parameter study, against the real test cluster."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.support.slurm_clusters import TARGETS, cluster_env, target_skip_reason

pytestmark = pytest.mark.slurm


@pytest.fixture(params=[label for label, target in TARGETS.items() if target.transport == "local"])
def slurm_env(request, state_dir):
    """Each local target: Debian's 22.05 with the CLI driver, 25.11 with each driver."""
    target = TARGETS[request.param]
    env = cluster_env(target.state)
    reason = target_skip_reason(target, env)
    if reason:
        pytest.skip(reason)
    return {
        **os.environ,
        **env,
        "HPCBRIDGE_SCHEDULER": "slurm",
        "HPCBRIDGE_SLURM_DRIVER": target.driver,
    }


def run(argv, env, timeout=300):
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)


def test_readme_slurm_example(slurm_env):
    cli = [sys.executable, "-m", "hpcbridge"]
    result = run([*cli, "submit", str(REPO / "examples/hello.sh"), "--wait"], slurm_env)
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.split()[0]
    assert job_id.isdigit()  # a Slurm id, not a mock one
    assert "hello from" in run([*cli, "logs", job_id], slurm_env).stdout
    status = json.loads(run([*cli, "status", job_id, "--json"], slurm_env).stdout)
    assert (status["state"], status["exit_code"], status["native_state"]) == (
        "COMPLETED",
        0,
        "COMPLETED",
    )


def test_hello_bye_study_on_slurm(slurm_env):
    result = run(
        [sys.executable, str(REPO / "examples/hello_bye/study.py"), "--poll-interval", "1"],
        slurm_env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "32 of 32 steps COMPLETED" in result.stdout
