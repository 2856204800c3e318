"""Many distinct scripts through real Slurm: one array, each task its own script and name;
the cluster's cap read once for all of a user's processes.

- 100 scripts ``<stem>-0.sh`` .. ``<stem>-99.sh`` (each printing its own name) go in as
  ONE array (one job id for all) on Slurm 22.05 with the CLI driver, locally and over
  SSH, and on Slurm 25.11 through pyslurm; every task COMPLETED having run its own
  script (its output says so), the records and ``hpcbridge jobs --json`` /
  ``status --json`` name each task after its own script, and Slurm itself shows the
  array's one name (``<stem>-0.sh+99``).
- ``sacctmgr`` runs (counted through a wrapper first on ``PATH``): none for a first
  ``submit-many`` that goes in whole, two for the first sweep of a state folder (its
  feeder reads the cap), none for a second process of the same user, none for
  ``--max-queued`` and none for a one-job ``submit``.
- A new user's first ``submit_job`` and first ``submit_many`` (a new state folder) read
  no cap: no ``sacctmgr`` run, on each local target (both drivers).
- A cap met on the way (a QOS of this module's own: ``MaxSubmitJobsPerUser=3``, which
  the cap read does not see) still feeds the rest: every task COMPLETED.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import stat
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from hpcbridge.model import JobState
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from tests.support.cli import hpcbridge
from tests.support.slurm_clusters import (
    TARGETS,
    Target,
    cluster_for,
    executor_for,
    jobs_named,
    make_adapter,
    run_slurm,
)

pytestmark = pytest.mark.slurm

COUNT = 100
#: the targets of this module: 22.05 with the commands, locally and over SSH; 25.11 in process
LABELS = ("22.05-cli", "22.05-cli-ssh", "25.11-native")


@pytest.fixture(scope="module", params=LABELS)
def target(request: pytest.FixtureRequest) -> Target:
    return TARGETS[request.param]


@pytest.fixture(scope="module")
def cluster(target: Target) -> Iterator[Dict[str, str]]:
    yield from cluster_for(target)


def unique(what: str) -> str:
    return f"{what}{uuid.uuid4().hex[:6]}"


def write_scripts(folder: Path, stem: str, count: int, body: str = "") -> List[str]:
    """``<stem>-<k>.sh``, each printing its own name first."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for index in range(count):
        path = folder / f"{stem}-{index}.sh"
        path.write_text(f"#!/bin/sh\necho ran {stem}-{index}.sh\n{body}\n")
        path.chmod(0o755)
        made.append(str(path))
    return made


def test_distinct_scripts_go_in_as_one_array_each_task_running_its_own(
    request: pytest.FixtureRequest, cluster: Dict[str, str], target: Target, tmp_path: Path
) -> None:
    ssh = target.transport == "ssh"
    made = make_adapter(
        cluster,
        tmp_path,
        executor_for(target.transport, request),
        remote_workdir=request.getfixturevalue("ssh_remote_dir") if ssh else None,
        command_env={"SLURM_CONF": cluster["SLURM_CONF"]} if ssh else None,
    )
    stem = unique("t")
    scripts = write_scripts(tmp_path / "scripts", stem, COUNT)
    # %x is the array's one name: each task's output is found where Slurm wrote it
    ids = made.submit_many(scripts, {"time": "5", "output": "%x-%A_%a.out"})
    arrays = {job_id.split("_")[0] for job_id in ids}
    assert len(arrays) == 1, f"{len(arrays)} submissions for {COUNT} distinct scripts"
    assert [job_id.split("_")[1] for job_id in ids] == [str(k) for k in range(COUNT)]
    final = made.wait_all(ids, poll_interval=1, timeout=600)
    assert {status.state for status in final.values()} == {JobState.COMPLETED}
    for index, job_id in enumerate(ids):
        assert made.get_job_logs(job_id).split() == ["ran", f"{stem}-{index}.sh"], job_id
    assert os.path.basename(made.log_path(ids[5])) == f"{stem}-0.sh+{COUNT - 1}-{ids[5]}.out"
    # what hpcbridge recorded and shows: each task its own script's name
    records = made.store.get_many("slurm", made.host_label, ids)
    assert [records[job_id].job_name for job_id in ids] == [f"{stem}-{k}.sh" for k in range(COUNT)]
    env = {"HPCBRIDGE_STATE_DIR": str(tmp_path / "state"), "HPCBRIDGE_SCHEDULER": "slurm"}
    listed = hpcbridge("jobs", "--json", "--cached", env=env)
    assert listed.returncode == 0, listed.stderr
    names = {job["job_id"]: job["job_name"] for job in json.loads(listed.stdout)}
    assert [names[job_id] for job_id in ids] == [f"{stem}-{k}.sh" for k in range(COUNT)]
    if not ssh:  # the command reaches a local cluster from the record alone
        status = hpcbridge("status", ids[0], ids[7], "--json", env=env)
        assert status.returncode == 0, status.stderr
        shown = [(item["state"], item["job_name"]) for item in json.loads(status.stdout)]
        assert shown == [("COMPLETED", f"{stem}-0.sh"), ("COMPLETED", f"{stem}-7.sh")]
    # what Slurm itself calls the array: one name for all its tasks
    assert set(ids) <= set(jobs_named(f"{stem}-0.sh+{COUNT - 1}"))
    assert jobs_named(f"{stem}-7.sh") == []
    made.close()


# -- the cluster's cap: read once for all of a user's processes; met on the way ------------


def local_22(target: Target) -> None:
    if target.label != "22.05-cli":
        pytest.skip("run once, on the 22.05 cluster with the commands, locally")


@pytest.fixture
def counted(tmp_path: Path) -> Dict[str, Any]:
    """A ``sacctmgr`` first on ``PATH`` that notes each run, then runs the real one."""
    folder = tmp_path / "shim"
    folder.mkdir()
    log = folder / "runs"
    log.touch()
    real = next(
        (
            os.path.join(directory, "sacctmgr")
            for directory in os.environ["PATH"].split(os.pathsep)
            if os.access(os.path.join(directory, "sacctmgr"), os.X_OK)
        ),
        None,
    )
    if real is None:
        pytest.skip("no sacctmgr on PATH (the test cluster's accounting)")
    shim = folder / "sacctmgr"
    shim.write_text(
        f'#!/bin/sh\necho "$*" >> {shlex.quote(str(log))}\nexec {shlex.quote(real)} "$@"\n'
    )
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    path = f"{folder}{os.pathsep}{os.environ['PATH']}"
    return {"PATH": path, "runs": lambda: len(log.read_text().splitlines())}


def test_the_cap_is_read_once_for_every_process_of_the_user(
    cluster: Dict[str, str], target: Target, tmp_path: Path, counted: Dict[str, Any]
) -> None:
    local_22(target)
    scripts = write_scripts(tmp_path / "scripts", unique("c"), 3)
    env = {
        "PATH": counted["PATH"],
        "HPCBRIDGE_SCHEDULER": "slurm",
        "HPCBRIDGE_SLURM_DRIVER": "cli",
        "HPCBRIDGE_STATE_DIR": str(tmp_path / "state"),
        "HPCBRIDGE_REMOTE_WORKDIR": str(tmp_path / "jobs"),
    }
    runs = counted["runs"]
    first = hpcbridge("submit-many", *scripts, "--time", "2m", env=env)
    assert first.returncode == 0, first.stderr
    assert runs() == 0  # no cap met: none read
    swept = hpcbridge("submit-many", *scripts, "--sweep", unique("s"), "--time", "2m", env=env)
    assert swept.returncode == 0, swept.stderr
    assert runs() == 2  # the feeder's: the association, then its QOS
    second = hpcbridge(  # another process: the cap is known
        "submit-many", *scripts, "--sweep", unique("s"), "--time", "2m", env=env
    )
    assert second.returncode == 0, second.stderr
    assert runs() == 2
    capped = hpcbridge("submit-many", *scripts, "--max-queued", "10", "--time", "2m", env=env)
    assert capped.returncode == 0, capped.stderr
    fresh = {**env, "HPCBRIDGE_STATE_DIR": str(tmp_path / "other-state")}
    one = hpcbridge("submit", scripts[0], "--time", "2m", env=fresh)
    assert one.returncode == 0, one.stderr
    assert runs() == 2
    ids = (first.stdout + swept.stdout + second.stdout + capped.stdout + one.stdout).split()
    assert len(ids) == 13
    waited = hpcbridge("wait", *ids, "--json", env=env, timeout=300)
    assert {item["state"] for item in json.loads(waited.stdout)} == {"COMPLETED"}, waited.stderr


def test_a_new_users_first_job_and_first_bulk_read_no_cap(
    cluster: Dict[str, str],
    target: Target,
    tmp_path: Path,
    counted: Dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if target.transport != "local":
        pytest.skip("sacctmgr is counted on this host: the local targets")
    monkeypatch.setenv("PATH", counted["PATH"])  # the adapter's commands run the counter
    made = make_adapter(cluster, tmp_path)  # a new state folder: no cap known
    scripts = write_scripts(tmp_path / "scripts", unique("n"), 5)
    one = made.submit_job(scripts[0], {"time": "2"})
    ids = made.submit_many(scripts, {"time": "2"})
    assert len({job_id.split("_")[0] for job_id in ids}) == 1  # one array, not refused
    assert counted["runs"]() == 0
    assert not (tmp_path / "state" / "cache").exists()
    made.cancel_jobs([one, *ids])
    made.close()


@pytest.fixture
def qos_cap(cluster: Dict[str, str]) -> Iterator[str]:
    """A QOS of this test's own with ``MaxSubmitJobsPerUser=3``, allowed to root; removed
    afterwards.  The cap read sees only the default QOS: this one is met on the way."""
    name = unique("hpcbcap")

    def sacctmgr(*words: str) -> None:
        done = run_slurm(["sacctmgr", "-i", *words], cluster)
        assert done.returncode == 0, done.stdout + done.stderr

    sacctmgr("add", "qos", name, "MaxSubmitJobsPerUser=3")
    try:
        sacctmgr("modify", "user", "where", "name=root", "set", f"qos+={name}")
        time.sleep(2)  # slurmdbd pushes the change to slurmctld
        yield name
    finally:
        run_slurm(
            ["sacctmgr", "-i", "modify", "user", "where", "name=root", "set", f"qos-={name}"],
            cluster,
        )
        run_slurm(["sacctmgr", "-i", "delete", "qos", name], cluster)


def test_a_cap_met_on_the_way_still_feeds_the_rest(
    cluster: Dict[str, str],
    target: Target,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    local_22(target)
    qos = request.getfixturevalue("qos_cap")
    caplog.set_level(logging.INFO, logger="hpcbridge")
    made: RealSlurmAdapter = make_adapter(cluster, tmp_path)
    stem = unique("q")
    scripts = write_scripts(tmp_path / "scripts", stem, 8, "sleep 1")
    ids = made.submit_many(scripts, {"time": "5", "qos": qos})  # the array of 8 is refused
    assert len(set(ids)) == 8
    assert "feeding them as a sweep" in caplog.text  # refused, then fed
    final = made.wait_all(ids, poll_interval=1, timeout=300)
    assert {status.state for status in final.values()} == {JobState.COMPLETED}
    for index, job_id in enumerate(ids):
        assert made.get_job_logs(job_id).split()[:2] == ["ran", f"{stem}-{index}.sh"]
    made.close()
