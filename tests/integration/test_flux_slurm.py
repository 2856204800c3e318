"""A Flux instance started inside a Slurm allocation (``srun flux start``),
reached as ``slurm:<jobid>`` - through the adapter and ``hpcbridge uri``.

Needs the Slurm test cluster (containers/slurm) and flux-core."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest

from hpcbridge.model import JobState
from tests.support.flux_cases import (
    make_adapter,
    native_bindings_or_skip,
    require_flux,
    write_script,
)

pytestmark = [pytest.mark.flux, pytest.mark.slurm]


def slurm_env() -> Dict[str, str]:
    env = dict(os.environ)
    env_file = Path(os.environ.get("HPCBRIDGE_SLURM_STATE", "/tmp/hpcbridge-slurm")) / "env.sh"
    if "SLURM_CONF" not in env and env_file.is_file():
        for line in env_file.read_text().splitlines():
            if line.startswith("export SLURM_CONF="):
                env["SLURM_CONF"] = line.split("=", 1)[1].strip()
    if not shutil.which("sbatch") or "SLURM_CONF" not in env:
        pytest.skip("Slurm test cluster not running: start containers/slurm/start.sh")
    ping = subprocess.run(
        ["scontrol", "ping"], env=env, capture_output=True, text=True, check=False
    )
    if "is UP" not in ping.stdout:
        pytest.skip(f"Slurm controller not answering: {ping.stdout.strip() or ping.stderr.strip()}")
    return env


@pytest.fixture(scope="module")
def slurm_flux(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Slurm job running `srun flux start sleep`; yields its Slurm job id."""
    flux = require_flux()
    env = slurm_env()
    # Flux reads the Slurm config when it starts inside the allocation too.
    os.environ.setdefault("SLURM_CONF", env["SLURM_CONF"])
    out = tmp_path_factory.mktemp("slurm-flux") / "slurm-%j.out"
    submitted = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-t",
            "5",
            "-o",
            str(out),
            "--wrap",
            f"srun -n1 {flux} start sleep 300",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if submitted.returncode != 0:
        pytest.skip(f"sbatch refused the Flux job: {submitted.stderr.strip()}")
    job_id = submitted.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = subprocess.run(
                [flux, "uri", "--local", f"slurm:{job_id}"],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if found.returncode == 0 and found.stdout.strip():
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"no Flux URI for slurm:{job_id}: {found.stderr.strip()}")
        yield job_id
    finally:
        subprocess.run(["scancel", job_id], env=env, check=False)


@pytest.mark.parametrize("driver", ["native", "cli"])
def test_slurm_target_resolves_and_runs(slurm_flux: str, driver: str, tmp_path: Path) -> None:
    if driver == "native":
        native_bindings_or_skip()
    script = write_script(tmp_path, "hi.sh", "echo inside slurm\n")
    adapter = make_adapter(driver, f"slurm:{slurm_flux}", tmp_path / "state")
    uri = adapter.open().instance
    assert uri is not None and uri.startswith("local:///")
    job_id = adapter.submit_job(script, {"time": "60s"})
    assert adapter.wait(job_id, poll_interval=0.5, timeout=90).state is JobState.COMPLETED
    assert "inside slurm" in adapter.get_job_logs(job_id)
    adapter.close()


def test_hpcbridge_uri_slurm_then_submit_wait(slurm_flux: str, tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in slurm_env().items()
        if not key.startswith(("HPCBRIDGE_", "FLUX_"))
    }
    env.update(
        HPCBRIDGE_SCHEDULER="flux",
        HPCBRIDGE_STATE_DIR=str(tmp_path / "state"),
        HPCBRIDGE_FLUX_COMMAND=require_flux(),
    )
    resolved = subprocess.run(
        [sys.executable, "-m", "hpcbridge", "uri", f"slurm:{slurm_flux}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resolved.returncode == 0, resolved.stderr
    env["HPCBRIDGE_FLUX_URI"] = resolved.stdout.strip()
    script = write_script(tmp_path, "hi.sh", "echo via hpcbridge uri\n")
    submitted = subprocess.run(
        [sys.executable, "-m", "hpcbridge", "submit", script, "--time", "30s", "--wait"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert submitted.returncode == 0, submitted.stderr + submitted.stdout
