"""The worker image (issue 36): hpcbridge and paramiko in a container with no scheduler
command, run unprivileged with Charliecloud's ``ch-run``, following the source
system's flow over SSH against the test sshd - to Slurm, and to a Flux broker of the
SSH user's on the login side: submit and wait, then - in a second container, its job
store in the same volume - ``jobs`` and ``logs``.

The image is ``containers/worker/Dockerfile`` as ``containers/images/build.sh`` builds
it with ``ch-image`` (no registry).  The container runs as the SSH test user (a plain
local user), its key copied where that user may read it.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from tests.support.flux import FluxInstance
from tests.support.flux_cases import require_flux, start_instance
from tests.support.slurm_clusters import TARGETS, cluster_for
from tests.support.ssh import Server

pytestmark = pytest.mark.ssh

IMAGES = Path(os.environ.get("HPCBRIDGE_TEST_IMAGES", "/var/tmp/hpcbridge-images"))
WORKER = IMAGES / "worker"
HELLO = "#!/bin/sh\necho hello from $(hostname) as $(id -un)\n"


@pytest.fixture(scope="module")
def worker() -> str:
    if shutil.which("ch-run") is None:
        pytest.skip("no ch-run here: bash containers/images/build.sh installs charliecloud")
    if not (WORKER / "usr" / "local" / "bin" / "hpcbridge").exists():
        status = IMAGES / "status"
        said = status.read_text().strip() if status.is_file() else ""
        pytest.skip(said or f"no worker image at {WORKER}: run bash containers/images/build.sh")
    inside = os.pathsep.join(str(WORKER / path) for path in ("usr/bin", "usr/local/bin", "bin"))
    carried = [name for name in ("sbatch", "squeue", "flux") if shutil.which(name, path=inside)]
    assert not carried, f"the worker image must carry no scheduler command: {carried}"
    return str(WORKER)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    yield from cluster_for(TARGETS["22.05-cli"])


def run_in(
    worker: str, user: str, mounts: Path, state: Path, env: Dict[str, str], *words: str
) -> subprocess.CompletedProcess[str]:
    """``hpcbridge WORDS`` in a fresh container of the worker image, as ``user``."""
    argv: List[str] = ["runuser", "-u", user, "--", "env", "-i"]
    argv += [f"{name}={value}" for name, value in {"USER": user, **env}.items()]
    # --set-env: the image's ENV (HPCBRIDGE_TRANSPORT=ssh, the store in the volume)
    argv += ["ch-run", "--set-env", "-b", f"{mounts}:/mnt", "-b", f"{state}:/var/lib/hpcbridge"]
    argv.append(worker)
    argv += ["--", "hpcbridge", *words]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder the container's user can reach (pytest's own are its owner's only)."""
    folder = Path(tempfile.mkdtemp(prefix="hpcb-worker-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def worker_flow(
    worker: str, ssh_server: Server, shared_dir: Path, scheduler_env: Dict[str, str]
) -> None:
    """Submit and wait from one container; ``jobs`` and ``logs`` from another."""
    user = ssh_server.user
    owner = pwd.getpwnam(user)
    mounts, state = shared_dir / "mnt", shared_dir / "state"
    for folder in (mounts, state):
        folder.mkdir()
        os.chown(folder, owner.pw_uid, owner.pw_gid)
    for source, name in ((ssh_server.key, "id"), (ssh_server.known_hosts, "known_hosts")):
        copied = mounts / name
        shutil.copyfile(source, copied)
        os.chown(copied, owner.pw_uid, owner.pw_gid)
        copied.chmod(0o600)
    script = mounts / "hello.sh"
    script.write_text(HELLO)
    os.chown(script, owner.pw_uid, owner.pw_gid)
    env = {
        "HOME": "/var/lib/hpcbridge",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HPCBRIDGE_SSH_HOST": ssh_server.host,
        "HPCBRIDGE_SSH_PORT": str(ssh_server.port),
        "HPCBRIDGE_SSH_USER": user,
        "HPCBRIDGE_SSH_KEY": "/mnt/id",
        "HPCBRIDGE_SSH_KNOWN_HOSTS": "/mnt/known_hosts",
        "HPCBRIDGE_MIN_POLL_INTERVAL": "0",
        **scheduler_env,
    }
    submitted = run_in(
        worker,
        user,
        mounts,
        state,
        env,
        "submit",
        "/mnt/hello.sh",
        "--time",
        "5",
        "--wait",
        "--poll-interval",
        "1",
    )
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.split()[0]
    assert "COMPLETED" in submitted.stderr, submitted.stderr
    # A second container: the store is the volume's, the job found again by its id.
    listed = run_in(worker, user, mounts, state, env, "jobs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [job["state"] for job in json.loads(listed.stdout) if job["job_id"] == job_id] == [
        "COMPLETED"
    ]
    logs = run_in(worker, user, mounts, state, env, "logs", job_id)
    assert logs.returncode == 0 and "hello from" in logs.stdout and user in logs.stdout, logs


@pytest.mark.slurm
def test_the_worker_image_submits_to_slurm_over_ssh_and_its_store_outlives_the_container(
    worker: str, ssh_server: Server, cluster: Dict[str, str], shared_dir: Path
) -> None:
    scheduler = {
        "HPCBRIDGE_SCHEDULER": "slurm",
        "HPCBRIDGE_COMMAND_ENV": f"SLURM_CONF={cluster['SLURM_CONF']}",
    }
    worker_flow(worker, ssh_server, shared_dir, scheduler)


@pytest.fixture(scope="module")
def login_broker(ssh_server: Server) -> Iterator[FluxInstance]:
    """A Flux broker of the SSH user's on the login side (its socket is that user's)."""
    flux = require_flux()
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip(f"a broker the ssh user {ssh_server.user} can reach needs root (runuser)")
    workdir = Path(tempfile.mkdtemp(prefix="hpcb-worker-flux-", dir="/tmp"))
    workdir.chmod(0o755)
    instance = start_instance(workdir, flux=flux, user=ssh_server.user)
    try:
        yield instance
    finally:
        instance.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.flux
def test_the_worker_image_submits_to_flux_over_ssh_and_its_store_outlives_the_container(
    worker: str, ssh_server: Server, login_broker: FluxInstance, shared_dir: Path
) -> None:
    scheduler = {
        "HPCBRIDGE_SCHEDULER": "flux",
        "HPCBRIDGE_FLUX_URI": str(login_broker.uri),
        "HPCBRIDGE_FLUX_COMMAND": login_broker.flux,
    }
    worker_flow(worker, ssh_server, shared_dir, scheduler)
