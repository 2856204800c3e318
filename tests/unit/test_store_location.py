"""Where the job store lives: a local disk for a shared place, with each record also
written as a file of its own there, which another host's store imports."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hpcbridge.model import JobState, JobStatus
from hpcbridge.store.jobs import JobRecord, JobStore
from hpcbridge.store.location import (
    choose,
    filesystem_of,
    is_network,
    machine_folder,
    mounts,
)

MOUNTINFO = (
    "22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "40 22 0:35 / /home rw,relatime shared:2 - nfs4 server:/home rw,vers=4.2\n"
    "41 22 0:36 / /mnt/with\\040space rw - fuse.sshfs me@login:/x rw\n"
    "42 22 0:37 / /scratch rw - lustre 10.0.0.1@tcp:/fs rw\n"
)


def test_mountinfo_is_read_with_its_escapes() -> None:
    assert mounts(MOUNTINFO)[2] == ("/mnt/with space", "fuse.sshfs")


def test_the_longest_mount_point_wins(tmp_path: Path) -> None:
    shared = tmp_path / "with space"
    (shared / "a").mkdir(parents=True)
    escaped = str(shared).replace(" ", "\\040")
    table = MOUNTINFO + f"43 22 0:38 / {escaped} rw - fuse.sshfs x rw\n"
    assert filesystem_of(shared / "a" / "not-yet", table) == "fuse.sshfs"  # nearest existing
    assert filesystem_of(tmp_path, table) == "ext4"
    assert filesystem_of(Path(str(shared) + "less"), table) == "ext4"  # a prefix, not a parent


@pytest.mark.parametrize(
    ("fstype", "network"),
    [
        ("nfs4", True),
        ("lustre", True),
        ("gpfs", True),
        ("beegfs", True),
        ("cifs", True),
        ("fuse.sshfs", True),
        ("ext4", False),
        ("xfs", False),
        ("tmpfs", False),
    ],
)
def test_network_filesystems(fstype: str, network: bool) -> None:
    assert is_network(fstype) is network


def test_a_store_asked_on_nfs_lives_on_a_local_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPCBRIDGE_LOCAL_STATE_DIR", str(tmp_path / "local"))
    location = choose(Path("/home/me/.local/state/hpcbridge/jobs.db"), MOUNTINFO)
    assert location.relocated and location.filesystem == "nfs4"
    assert location.path.is_relative_to(tmp_path / "local") and location.path.name == "jobs.db"
    assert location.shared == Path("/home/me/.local/state/hpcbridge/records")
    assert "nfs4" in location.describe() and "local disk" in location.describe()
    other = choose(Path("/home/you/.local/state/hpcbridge/jobs.db"), MOUNTINFO)
    assert other.path != location.path  # one local stand-in per asked place
    in_place = choose(Path("/var/lib/x/jobs.db"), MOUNTINFO)
    assert not in_place.relocated
    assert in_place.describe() == f"/var/lib/x/jobs.db (on {in_place.filesystem}: used in place)"


def test_machine_folder_stays_where_it_is_on_a_local_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert machine_folder(tmp_path / "mock") == tmp_path / "mock"
    monkeypatch.setenv("HPCBRIDGE_LOCAL_STATE_DIR", str(tmp_path / "local"))
    shared = Path("/home/me/state/mock")  # on nfs4 in MOUNTINFO: one folder per machine
    assert machine_folder(shared, MOUNTINFO) == tmp_path / "local" / "mock"


def test_two_hosts_see_each_others_jobs_through_the_shared_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two stores for one shared place, as two login nodes have: each writes its own
    local database and its own record files; each imports the other's."""
    shared = tmp_path / "home" / "state"
    monkeypatch.setattr("hpcbridge.store.location.filesystem_of", lambda path, table=None: "nfs")
    monkeypatch.setattr("hpcbridge.store.journal.LOOK_EVERY", 0.0)
    monkeypatch.setenv("HPCBRIDGE_LOCAL_STATE_DIR", str(tmp_path / "node-a"))
    node_a = JobStore(shared / "jobs.db")
    monkeypatch.setenv("HPCBRIDGE_LOCAL_STATE_DIR", str(tmp_path / "node-b"))
    node_b = JobStore(shared / "jobs.db")
    assert node_a.path != node_b.path and not (shared / "jobs.db").exists()
    now = datetime.now(timezone.utc)
    node_a.add(JobRecord("11", "slurm", host="login1", submit_time=now))
    node_b.add(JobRecord("22", "slurm", host="login2", submit_time=now))
    assert {r.job_id for r in node_a.list()} == {"11", "22"}
    assert node_b.get("11") is not None
    node_a.update_status("slurm", "login1", JobStatus("11", JobState.COMPLETED, exit_code=0))
    seen = node_b.get("11")
    assert seen is not None and seen.state == "COMPLETED" and seen.exit_code == 0
    # a final state is never replaced by an older copy
    node_b.update_status("slurm", "login1", JobStatus("11", JobState.COMPLETED, exit_code=0))
    assert node_a.count() == 2 and node_b.count() == 2
    files = sorted(p.name for p in shared.joinpath("records").rglob("*.json"))
    assert len(files) == 3  # 11 and 22 by their writers, 11 again by node b
    node_a.close()
    node_b.close()
    assert not any(name.startswith(".tmp") for name in os.listdir(shared / "records"))
