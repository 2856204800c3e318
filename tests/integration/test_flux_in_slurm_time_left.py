"""A Flux instance that ``srun`` starts in a Slurm job, driven from outside it: what it
knows of the Slurm job's time limit, per flux-core release (issue 32 point 10j).

flux-core releases with ``flux slurm-expiration-sync`` (0.88 here) start it on rank 0
when ``SLURM_JOB_ID`` is set: it asks ``squeue`` for the job's time left and sets the
instance's expiration, so ``doctor`` shows "flux time left" and a job that would
outlive the allocation is refused.  Older releases (0.49, 0.26) leave the
expiration at 0.  The sync runs ``squeue`` with every ``SLURM_*`` variable dropped, so
the cluster here is the Slurm 25.11 one, whose ``slurm.conf`` start.sh puts at the
prefix's default place, as a site's is.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import pytest

from tests.support.cli import hpcbridge_in
from tests.support.flux_cases import flux_params
from tests.support.slurm_clusters import PREFIX, TARGETS, cluster_for

pytestmark = [pytest.mark.flux, pytest.mark.slurm]

REPO = Path(__file__).resolve().parents[2]
#: the Slurm job's time limit (minutes)
MINUTES = 5


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    yield from cluster_for(TARGETS["25.11-cli"])


def _has_sync(flux: str) -> bool:
    helper = subprocess.run(
        [flux, "slurm-expiration-sync", "--help"], capture_output=True, text=True, timeout=30
    )
    return helper.returncode == 0


@pytest.fixture(scope="module", params=flux_params())
def instance(
    request: pytest.FixtureRequest, cluster: Dict[str, str], tmp_path_factory: Any
) -> Iterator[Tuple[str, str, Dict[str, str]]]:
    """(flux, URI, environment) of an instance that ``srun flux start`` runs in a Slurm job."""
    flux = request.param
    if flux is None:
        pytest.skip("flux-core not found")
    has_uri = subprocess.run([flux, "uri", "--help"], capture_output=True, timeout=30)
    if has_uri.returncode != 0:
        pytest.skip(f"{flux} has no `flux uri`: slurm:ID cannot be resolved with it")
    conf = Path(PREFIX) / "etc" / "slurm.conf"
    if not conf.is_file():
        pytest.skip(f"{conf} absent: start.sh of {PREFIX} puts the cluster's config there")
    env = {
        **os.environ,
        **cluster,
        "PATH": f"{cluster['PATH']}{os.pathsep}{Path(flux).parent}",
    }
    out = tmp_path_factory.mktemp("flux-in-slurm") / "flux-%j.out"
    submitted = subprocess.run(
        ["sbatch", "--parsable", "--job-name", "flux", "--time", str(MINUTES), "--output",
         str(out), "--wrap", f"srun --ntasks-per-node=1 {flux} start sleep inf"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    slurm_job = submitted.stdout.strip().split(";")[0]
    try:
        uri = ""
        deadline = time.monotonic() + 90
        while not uri and time.monotonic() < deadline:
            found = hpcbridge_in(env, "uri", f"slurm:{slurm_job}")
            uri = found.stdout.strip() if found.returncode == 0 else ""
            time.sleep(0 if uri else 1)
        assert uri, f"no Flux URI for slurm:{slurm_job}: {found.stderr}"
        env.update(
            HPCBRIDGE_SCHEDULER="flux",
            HPCBRIDGE_FLUX_URI=uri,
            HPCBRIDGE_FLUX_COMMAND=flux,
            HPCBRIDGE_STATE_DIR=str(out.parent / "state"),
            HPCBRIDGE_REMOTE_WORKDIR=str(out.parent / "jobs"),
            HPCBRIDGE_MIN_POLL_INTERVAL="0",
        )
        yield flux, uri, env
    finally:
        subprocess.run(["scancel", slurm_job], env=env, capture_output=True, timeout=60)


def _time_left(env: Dict[str, str], wait: float) -> Tuple[Any, str]:
    """The seconds doctor's "flux time left" shows (``None`` if no such line), asked
    until it shows or ``wait`` seconds passed (the sync starts after the broker)."""
    deadline = time.monotonic() + wait
    while True:
        doctor = hpcbridge_in(env, "doctor")
        shown = re.search(r"^ok  flux time left +(\d+) s", doctor.stdout, re.M)
        if shown or time.monotonic() > deadline:
            return (int(shown.group(1)) if shown else None), doctor.stdout
        time.sleep(1)


def test_what_the_instance_knows_of_the_slurm_jobs_time_limit(instance) -> None:
    flux, _uri, env = instance
    script = str(REPO / "examples" / "hello.sh")
    if _has_sync(flux):
        left, shown = _time_left(env, wait=30)
        assert left is not None and 0 < left <= MINUTES * 60, shown
        refused = hpcbridge_in(env, "submit", script, "--time", "10m")
        assert refused.returncode == 3, refused.stderr
        assert "a job of 600s would not fit" in refused.stderr
        assert not refused.stdout  # nothing submitted
    else:
        left, shown = _time_left(env, wait=5)
        assert left is None, shown
        longer = hpcbridge_in(env, "submit", script, "--time", "10m")
        assert longer.returncode == 0, longer.stderr
        hpcbridge_in(env, "cancel", longer.stdout.strip())
    fits = hpcbridge_in(env, "submit", script, "--time", "1m", "--wait", "--poll-interval", "1")
    assert fits.returncode == 0, fits.stderr
