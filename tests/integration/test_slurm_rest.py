"""The REST driver against a real slurmrestd (Slurm 25.11, containers/slurmrestd/start.sh)
on a cluster of this module's own: submit -> status -> cancel, a failing job, and two
distinct scripts as one array, with no Slurm command on the way.

slurmrestd's rest_auth/local answers only its own uid (it refuses to run as root), so the
client runs as that user, hpcbtest, in a child process of the system's Python."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from hpcbridge.errors import JobSubmissionError
from hpcbridge.model import JobState
from tests.support.slurm_clusters import (
    PREFIX,
    make_adapter,
    own_cluster,
    run_slurm,
    skip_without_slurmrestd,
    slurmrestd,
)

REPO = Path(__file__).resolve().parents[2]
USER = "hpcbtest"
PYTHON = "/usr/bin/python3"  # the test user cannot reach this process's (root's) Python
STATE = "/tmp/hpcbridge-slurm-rest"

CHILD = r"""
import json, os, sys, time
from hpcbridge import get_scheduler_adapter

work = sys.argv[1]
adapter = get_scheduler_adapter()
driver = adapter.open().driver

def script(name, body):
    path = os.path.join(work, name)
    with open(path, "w") as file:
        file.write("#!/bin/bash\n" + body + "\n")
    return path

found = {"driver": driver.name, "version": driver.api_version()}
long = adapter.submit_job(script("long.sh", "sleep 120"), resources={"time": "5:00"})
fails = adapter.submit_job(script("fails.sh", "exit 3"))
pair = adapter.submit_many([script("a.sh", "exit 0"), script("b.sh", "exit 4")])
deadline = time.time() + 60
while time.time() < deadline and driver.query([long])[long].state.value != "RUNNING":
    time.sleep(1)
found["long_seen"] = driver.query([long])[long].state.value
adapter.cancel_job(long)
ids = [long, fails, *pair]
def read(statuses):
    return {job_id: [status.state.value, status.exit_code] for job_id, status in statuses.items()}

found["waited"] = read(adapter.wait_all(ids, timeout=120))
found["asked"] = read(driver.query(ids))
found["ids"] = {"long": long, "fails": fails, "pair": pair}
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def rest() -> Iterator[Dict[str, Any]]:
    """The cluster's environment and slurmrestd's URLs: ``unix`` (rest_auth/local, as
    hpcbtest) and ``tcp`` (JWT on 127.0.0.1)."""
    skip_without_slurmrestd()
    # MinJobAge 300: the ended jobs stay in slurmctld (no slurmdbd on this cluster)
    conf = "MinJobAge=300"
    cluster = own_cluster("rest", 17260, prefix=PREFIX, extra_conf=conf, cpus=8, jwt=True)
    with cluster as env, slurmrestd(STATE, "127.0.0.1:17263") as urls:
        yield {"env": env, **urls}


@pytest.fixture
def work() -> Iterator[Path]:
    """A folder of the test user's (pytest's own are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="hpcbridge-rest-"))
    try:
        for made in (folder, folder / "jobs", folder / "state"):
            made.mkdir(exist_ok=True)
            shutil.chown(made, USER, USER)
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_submit_status_cancel_over_the_socket(rest: Dict[str, Any], work: Path) -> None:
    if not os.path.exists(PYTHON):
        pytest.skip(f"no {PYTHON} for the client running as {USER}")
    env = {
        "PATH": "/usr/bin:/bin",  # no Slurm 25.11 command: everything goes through REST
        "HOME": str(work),
        "PYTHONPATH": str(REPO),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HPCBRIDGE_SCHEDULER": "slurm",
        "HPCBRIDGE_SLURM_DRIVER": "rest",
        "HPCBRIDGE_SLURM_REST_URL": rest["unix"],
        "HPCBRIDGE_STATE_DIR": str(work / "state"),
        "HPCBRIDGE_REMOTE_WORKDIR": str(work / "jobs"),
        "HPCBRIDGE_POLL_INTERVAL": "1",
        "HPCBRIDGE_MIN_POLL_INTERVAL": "0",
    }
    child = subprocess.run(
        [
            "runuser",
            "-u",
            USER,
            "--",
            "env",
            "-i",
            *(f"{k}={v}" for k, v in env.items()),
            PYTHON,
            "-c",
            CHILD,
            str(work),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    found = json.loads(child.stdout.strip().splitlines()[-1])
    ids = found["ids"]
    first, second = ids["pair"]
    assert (found["driver"], found["version"]) == ("rest", "v0.0.44")
    assert found["long_seen"] == "RUNNING"
    assert first.endswith("_0") and second.endswith("_1")  # one array of the two scripts
    expected = {
        ids["long"]: ["CANCELLED", 143],  # SIGTERM, as the CLI driver says
        ids["fails"]: ["FAILED", 3],
        first: ["COMPLETED", 0],
        second: ["FAILED", 4],
    }
    assert found["waited"] == expected
    assert found["asked"] == expected  # what slurmrestd itself says of them


def test_a_token_over_tcp_in_this_process(
    rest: Dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = run_slurm(["scontrol", "token", "username=root", "lifespan=600"], rest["env"])
    assert made.returncode == 0, made.stderr
    monkeypatch.setenv("SLURM_JWT", made.stdout.strip().partition("=")[2])
    settings = {"HPCBRIDGE_SLURM_DRIVER": "rest", "HPCBRIDGE_SLURM_REST_URL": rest["tcp"]}
    adapter = make_adapter({**rest["env"], **settings}, tmp_path)
    failing, after = tmp_path / "failing.sh", tmp_path / "after.sh"
    failing.write_text("#!/bin/bash\nexit 3\n")
    after.write_text("#!/bin/bash\nexit 0\n")
    failed = adapter.submit_job(str(failing))
    child = adapter.submit_job(str(after), depends_on=[failed])
    final = adapter.wait_all([failed, child], timeout=120)
    assert (final[failed].state, final[failed].exit_code) == (JobState.FAILED, 3)
    # afterok on a failed parent: Slurm cancels the child (KILL_INVALID_DEPENDENCY)
    assert final[child].state is JobState.CANCELLED, final[child]
    with pytest.raises(JobSubmissionError, match="Invalid partition name specified"):
        adapter.submit_job(str(after), resources={"partition": "nosuch"})
