"""The job store when the home is shared: two sshfs mounts of one folder (over the test
sshd) stand in for two login nodes, 4 processes on each submit and wait into the
default store location there.  No process fails, no record is lost: each node's
database is on a local disk and intact, and each sees the other's jobs."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

from hpcbridge.store.jobs import JobStore

pytestmark = pytest.mark.ssh

PER_PROCESS = 10
PROCESSES_PER_MOUNT = 4

WORKER = textwrap.dedent(
    """
    import sys
    from hpcbridge import MockAdapter, Settings
    script, count = sys.argv[1], int(sys.argv[2])
    adapter = MockAdapter(settings=Settings.from_env())
    ids = adapter.submit_many([script] * count)
    final = adapter.wait_all(ids, poll_interval=0.5, timeout=300)
    states = {status.state.value for status in final.values()}
    print("IDS", " ".join(ids), "STATES", " ".join(sorted(states)))
    """
)


@pytest.fixture
def mounts(ssh_server: Any, tmp_path: Path) -> Iterator[Tuple[Path, Path]]:
    """Two sshfs mounts of one folder of the ssh test user."""
    if shutil.which("sshfs") is None:
        pytest.skip("sshfs not installed (containers/sshd/start.sh installs it)")
    shared = Path(f"/tmp/hpcb-shared-{uuid.uuid4().hex[:8]}")
    shared.mkdir()
    shutil.chown(shared, ssh_server.user)
    points = [tmp_path / "login1", tmp_path / "login2"]
    options = (
        f"IdentityFile={ssh_server.key},UserKnownHostsFile={ssh_server.known_hosts},"
        f"port={ssh_server.port},StrictHostKeyChecking=yes"
    )
    mounted: List[Path] = []
    try:
        for point in points:
            point.mkdir()
            result = subprocess.run(
                ["sshfs", "-o", options, f"{ssh_server.user}@{ssh_server.host}:{shared}", point],
                capture_output=True,
                text=True,
                timeout=60,
            )
            if result.returncode != 0:
                pytest.skip(f"cannot mount with sshfs here: {result.stderr.strip()}")
            mounted.append(point)
        yield points[0], points[1]
    finally:
        for point in mounted:
            subprocess.run(["fusermount3", "-u", str(point)], check=False, timeout=60)
        shutil.rmtree(shared, ignore_errors=True)


def test_two_login_nodes_lose_no_record(
    mounts: Tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    script.chmod(0o755)
    local = tmp_path / "local"  # this machine's local disk, for both "nodes"
    monkeypatch.setenv("HPCBRIDGE_LOCAL_STATE_DIR", str(local))
    processes = []
    for mount in mounts:
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(mount),
            "XDG_STATE_HOME": str(mount / "state"),  # the default store location: shared
            "HPCBRIDGE_LOCAL_STATE_DIR": str(local),
        }
        for _ in range(PROCESSES_PER_MOUNT):
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-c", WORKER, str(script), str(PER_PROCESS)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env,
                )
            )
    ids: List[str] = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        assert out.strip().endswith("STATES COMPLETED"), out + err
        ids.extend(out.split("STATES")[0].split()[1:])
    total = len(mounts) * PROCESSES_PER_MOUNT * PER_PROCESS
    assert len(ids) == total and len(set(ids)) == total  # the mock's ids: this machine's
    for mount in mounts:
        asked = mount / "state" / "hpcbridge" / "jobs.db"
        assert not asked.exists(), "no SQLite database on the shared filesystem"
        store = JobStore(asked)
        assert store.location.relocated and store.location.filesystem == "fuse.sshfs"
        assert store.path.is_relative_to(local)
        with sqlite3.connect(store.path) as connection:
            assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        # What this node wrote, and what it imports of the other's: every record.
        assert sorted(record.job_id for record in store.list()) == sorted(ids)
        assert {record.state for record in store.list()} == {"COMPLETED"}
        store.close()
    shared_records = list((mounts[0] / "state" / "hpcbridge" / "records").rglob("*.json"))
    assert len({path.name for path in shared_records}) == total
