"""A job's script run in a container (issue 36): the ``container`` key, Charliecloud's
``ch-run``, on Slurm 22.05 (the commands) and Flux (a plain job and a batch job).

The image is the Debian 12 root filesystem ``containers/images/build.sh`` makes with
mmdebstrap, marked with ``/etc/hpcbridge-image`` - a file the host has not: a step
that prints it ran inside.  What it writes in its working directory lands in the job's
folder on the host, and its exit code is the job's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from hpcbridge.engine.adapter import SchedulerAdapter
from hpcbridge.model import JobState
from tests.support.flux_cases import adapter_on, require_flux, start_instance, write_script
from tests.support.slurm_clusters import TARGETS, cluster_for, executor_for
from tests.support.slurm_clusters import make_adapter as make_slurm_adapter

IMAGES = Path(os.environ.get("HPCBRIDGE_TEST_IMAGES", "/var/tmp/hpcbridge-images"))
IMAGE = IMAGES / "debian12"
MARK = "hpcbridge test image debian12"

STEP = """cat /etc/hpcbridge-image
grep PRETTY_NAME /etc/os-release
echo made inside > made-inside.txt
exit 3
"""


@pytest.fixture(scope="module")
def image() -> str:
    if shutil.which("ch-run") is None:
        pytest.skip("no ch-run here: bash containers/images/build.sh installs charliecloud")
    if not (IMAGE / "etc" / "hpcbridge-image").is_file():
        status = IMAGES / "status"
        said = status.read_text().strip() if status.is_file() else ""
        pytest.skip(said or f"no test image at {IMAGE}: run bash containers/images/build.sh")
    assert not Path("/etc/hpcbridge-image").exists(), "the host must not carry the image's mark"
    return str(IMAGE)


def ran_inside(adapter: SchedulerAdapter, job_id: str, folder: Path) -> None:
    final = adapter.wait(job_id, poll_interval=0.5, timeout=120)
    log = adapter.get_job_logs(job_id)
    assert MARK in log, log
    assert 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"' in log, log  # the image's system
    assert final.state is JobState.FAILED and final.exit_code == 3, final
    made = list(folder.rglob("made-inside.txt"))
    assert [path.read_text() for path in made] == ["made inside\n"], made


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    instance = start_instance(tmp_path_factory.mktemp("flux-containers"), flux=require_flux())
    yield instance
    instance.stop()


@pytest.mark.flux
@pytest.mark.parametrize("nested", [False, True], ids=["plain", "batch"])
def test_a_flux_step_runs_in_its_container(
    image: str, broker: Any, tmp_path: Path, nested: bool
) -> None:
    adapter = adapter_on(broker, "cli", tmp_path)
    script = write_script(tmp_path / "scripts", "inside.sh", STEP)
    job_id = adapter.submit_job(script, {"container": image, "time": "60s"}, nested=nested)
    ran_inside(adapter, job_id, tmp_path / "jobs")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    yield from cluster_for(TARGETS["22.05-cli"])


def slurm_adapter(
    cluster: Dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> SchedulerAdapter:
    """The 22.05 cluster's CLI driver, locally, its jobs' folders under ``tmp_path/jobs``."""
    local = executor_for("local", request)
    return make_slurm_adapter(cluster, tmp_path, local, remote_workdir=str(tmp_path / "jobs"))


@pytest.mark.slurm
def test_a_slurm_step_runs_in_its_container(
    image: str, cluster: Dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    adapter = slurm_adapter(cluster, tmp_path, request)
    script = write_script(tmp_path / "scripts", "inside.sh", STEP)
    job_id = adapter.submit_job(script, {"container": image, "time": "2"})
    ran_inside(adapter, job_id, tmp_path / "jobs")


#: a step that launches two tasks from inside its container: they run in the image too
LAUNCHING = """$HPCBRIDGE_LAUNCHER -n 2 cat /etc/hpcbridge-image
echo "launch said $?"
"""


def launched_inside(adapter: SchedulerAdapter, job_id: str) -> None:
    final = adapter.wait(job_id, poll_interval=0.5, timeout=120)
    log = adapter.get_job_logs(job_id)
    assert log.count(MARK) == 2 and "launch said 0" in log, log
    assert final.state is JobState.COMPLETED, final


@pytest.mark.flux
def test_a_flux_batch_step_launches_its_tasks_in_its_container(
    image: str, broker: Any, tmp_path: Path
) -> None:
    adapter = adapter_on(broker, "cli", tmp_path)
    script = write_script(tmp_path / "scripts", "launching.sh", LAUNCHING)
    resources = {"container": image, "time": "60s", "ntasks": 2}
    launched_inside(adapter, adapter.submit_job(script, resources, nested=True))


@pytest.mark.slurm
def test_a_slurm_step_launches_its_tasks_in_its_container(
    image: str, cluster: Dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    adapter = slurm_adapter(cluster, tmp_path, request)
    script = write_script(tmp_path / "scripts", "launching.sh", LAUNCHING)
    resources = {"container": image, "time": "2", "ntasks": 2}
    launched_inside(adapter, adapter.submit_job(script, resources))
