"""The Flux image (issue 36): hpcbridge beside flux-core 0.88's bindings in a container,
submitting plain jobs through the bindings (``HPCBRIDGE_FLUX_DRIVER=native``: no
fallback to the command line) into a broker that runs outside, reached by its socket.

The image is ``containers/flux/Dockerfile`` as ``containers/images/build.sh`` builds it
with ``ch-image`` (no registry).  ``ch-run`` binds the host's ``/tmp`` (the broker's
socket) and ``/var/tmp`` (the script and the job folders) at the same paths, so the
broker's jobs find their folders where the container wrote them; the job store is a
volume at the image's ``/var/lib/hpcbridge``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, List

import pytest

from tests.support.flux import FluxInstance, release_of
from tests.support.flux_cases import start_instance, write_script

pytestmark = pytest.mark.flux

IMAGES = Path(os.environ.get("HPCBRIDGE_TEST_IMAGES", "/var/tmp/hpcbridge-images"))
FLUX_IMAGE = IMAGES / "flux"
#: the flux-core build the image copies (build.sh's HPCBRIDGE_TEST_FLUX_IMAGE_PREFIX)
PREFIX = Path(os.environ.get("HPCBRIDGE_TEST_FLUX_IMAGE_PREFIX", "/opt/flux-0.88"))
TASKS = 40


@pytest.fixture(scope="module")
def image() -> str:
    if shutil.which("ch-run") is None:
        pytest.skip("no ch-run here: bash containers/images/build.sh installs charliecloud")
    if not (FLUX_IMAGE / str(PREFIX).lstrip("/") / "bin" / "flux").exists():
        status = IMAGES / "status-flux"
        said = status.read_text().strip() if status.is_file() else ""
        pytest.skip(said or f"no Flux image at {FLUX_IMAGE}: run bash containers/images/build.sh")
    return str(FLUX_IMAGE)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FluxInstance]:
    """A broker of the release the image carries, outside the container."""
    flux = PREFIX / "bin" / "flux"
    if not flux.exists():
        pytest.skip(f"no flux-core at {PREFIX} (scripts/build-schedulers.sh builds it)")
    instance = start_instance(tmp_path_factory.mktemp("flux-image"), flux=str(flux))
    yield instance
    instance.stop()


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder under /var/tmp, bound into the container at the same path."""
    folder = Path(tempfile.mkdtemp(prefix="hpcb-flux-image-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def in_image(image: str, uri: str, shared: Path, *words: str) -> subprocess.CompletedProcess[str]:
    """``hpcbridge WORDS`` in a fresh container of the image (its ENV applied)."""
    env = {
        "USER": os.environ.get("USER", "root"),
        "HOME": str(shared),
        "FLUX_URI": uri,
        "HPCBRIDGE_MIN_POLL_INTERVAL": "0",
    }
    argv: List[str] = ["env", "-i", *(f"{name}={value}" for name, value in env.items())]
    state = shared / "state"  # the job store: a volume at the image's HPCBRIDGE_STATE_DIR
    state.mkdir(exist_ok=True)
    argv += ["ch-run", "--set-env", "-b", "/tmp:/tmp", "-b", "/var/tmp:/var/tmp"]
    argv += ["-b", f"{state}:/var/lib/hpcbridge", image]
    argv += ["--", "hpcbridge", *words]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def test_plain_jobs_go_through_the_bindings_into_the_broker_outside(
    image: str, broker: FluxInstance, shared: Path
) -> None:
    assert release_of(broker.flux)[:2] == (0, 88), broker.flux
    ran = shared / "ran"
    task = write_script(shared, "task.sh", f'echo "task $1" >> {ran}\n')
    (shared / "args").write_text("".join(f"{index}\n" for index in range(TASKS)))
    started = time.monotonic()
    submitted = in_image(
        image,
        str(broker.uri),
        shared,
        "submit-many",
        task,
        "--args-file",
        str(shared / "args"),
        "--no-nested",
        "--time",
        "1m",
        "--remote-dir",
        str(shared / "jobs"),
        "--wait",
        "--poll-interval",
        "0.5",
    )
    took = time.monotonic() - started
    assert submitted.returncode == 0, submitted.stderr
    ids = submitted.stdout.split()
    assert len(ids) == TASKS, submitted.stdout
    print(f"{TASKS} plain jobs through the image's bindings, submitted and ended in {took:.1f} s")
    assert sorted(ran.read_text().split("\n")[:-1]) == sorted(f"task {i}" for i in range(TASKS))
    # Flux's own record: every one of them ran and ended well, in this broker.
    listed = json.loads(broker.check(["jobs", "-a", "--json"]))["jobs"]
    ours = [job for job in listed if job.get("result") == "COMPLETED"]
    assert len(ours) >= TASKS
    # A second container reads the same store: the jobs are known, with their end.
    jobs = in_image(image, str(broker.uri), shared, "jobs", "--json")
    assert jobs.returncode == 0, jobs.stderr
    states = [job["state"] for job in json.loads(jobs.stdout)]
    assert states.count("COMPLETED") == TASKS, states


def test_the_native_driver_is_refused_plainly_without_a_broker(image: str, shared: Path) -> None:
    """Bindings there, no broker at the socket: an error that says what to do, no job."""
    script = write_script(shared, "never.sh", "echo never\n")
    said = in_image(image, f"local://{shared}/no-broker", shared, "submit", script, "--no-nested")
    assert said.returncode == 7, said.stderr  # the scheduler is not usable from here
    assert "broker socket" in said.stderr and "was not found" in said.stderr, said.stderr
    assert "Traceback" not in said.stderr, said.stderr
    assert not list((shared / "state").rglob("*.json")) or "never" not in said.stdout
