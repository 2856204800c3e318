"""Finding the real sshd test server (containers/sshd) and connecting to it."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Set

import pytest

SKIP_REASON = "sshd test server not running: start containers/sshd/start.sh"
SSHD_SCRIPTS = Path(__file__).resolve().parents[2] / "containers" / "sshd"
KEYS = ("HOST", "PORT", "USER", "KEY", "KNOWN_HOSTS", "CONFIG")


@dataclass(frozen=True)
class Server:
    host: str
    port: int
    user: str
    key: str
    known_hosts: str
    config: str
    state: str


def _read_env_file(path: Path) -> dict:
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line.startswith("export ") or "=" not in line:
            continue
        name, _, raw = line[len("export ") :].partition("=")
        words = shlex.split(raw)
        values[name.strip()] = words[0] if words else ""
    return values


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def find_test_server() -> Optional[Server]:
    """The running test sshd (containers/sshd), or None."""
    state = os.environ.get("HPCBRIDGE_SSHD_STATE", "/tmp/hpcbridge-sshd")
    values = {}
    env_file = Path(state) / "env.sh"
    if env_file.is_file():
        values.update(_read_env_file(env_file))
    for key in KEYS:  # explicit environment variables win over the file
        name = f"HPCBRIDGE_TEST_SSH_{key}"
        if os.environ.get(name):
            values[name] = os.environ[name]
    missing = [key for key in KEYS if not values.get(f"HPCBRIDGE_TEST_SSH_{key}")]
    if missing:
        return None
    found = Server(
        host=values["HPCBRIDGE_TEST_SSH_HOST"],
        port=int(values["HPCBRIDGE_TEST_SSH_PORT"]),
        user=values["HPCBRIDGE_TEST_SSH_USER"],
        key=values["HPCBRIDGE_TEST_SSH_KEY"],
        known_hosts=values["HPCBRIDGE_TEST_SSH_KNOWN_HOSTS"],
        config=values["HPCBRIDGE_TEST_SSH_CONFIG"],
        state=values.get("HPCBRIDGE_SSHD_STATE", state),
    )
    if not _reachable(found.host, found.port):
        return None
    return found


def alias_entry(server: Server, alias: str) -> str:
    """The ``~/.ssh/config`` entry of the guides for ``server``: the key and known hosts
    are the alias's own, so a shell with it needs no HPCBRIDGE_SSH_ setting."""
    return (
        f"Host {alias}\n"
        f"    HostName {server.host}\n"
        f"    Port {server.port}\n"
        f"    User {server.user}\n"
        f"    IdentityFile {server.key}\n"
        "    IdentitiesOnly yes\n"
        f"    UserKnownHostsFile {server.known_hosts}\n"
    )


def make_executor(server: Server, **overrides: Any) -> Any:
    from hpcbridge.transports.ssh.executor import SSHExecutor

    arguments = dict(
        known_hosts=server.known_hosts,
        ssh_config_path=os.devnull,
        connect_timeout=10.0,
        default_timeout=30.0,
        min_reconnect_interval=0.2,
    )
    arguments.update(overrides)
    return SSHExecutor(server.host, server.user, server.port, server.key, **arguments)


class PrivateServer:
    """An sshd of one test's own (``containers/sshd`` with a state folder and a port of
    its own): stopped and started again without touching the shared server that other
    tests use at the same moment.  Its client key is the test user's too."""

    def __init__(self, state: Path) -> None:
        self.state = state
        with socket.socket() as probe:  # a port free now (start.sh fails if taken later)
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.server: Optional[Server] = None

    def _run(self, script: str, *args: str) -> None:
        env = {
            **os.environ,
            "HPCBRIDGE_SSHD_STATE": str(self.state),
            "HPCBRIDGE_SSHD_PORT": str(self.port),
        }
        done = subprocess.run(
            ["bash", str(SSHD_SCRIPTS / script), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, f"{script} {' '.join(args)}: {done.stderr[-2000:]}"

    def start(self) -> Server:
        """Start it (again: same port, same keys)."""
        self._run("start.sh")
        values = _read_env_file(self.state / "env.sh")
        self.server = Server(
            host=values["HPCBRIDGE_TEST_SSH_HOST"],
            port=int(values["HPCBRIDGE_TEST_SSH_PORT"]),
            user=values["HPCBRIDGE_TEST_SSH_USER"],
            key=values["HPCBRIDGE_TEST_SSH_KEY"],
            known_hosts=values["HPCBRIDGE_TEST_SSH_KNOWN_HOSTS"],
            config=values["HPCBRIDGE_TEST_SSH_CONFIG"],
            state=str(self.state),
        )
        return self.server

    def stop(self) -> None:
        """Stop the listener and every session it serves: open connections drop."""
        self._run("stop.sh")

    def purge(self) -> None:
        """Stop it and remove its state and its key from the test user's authorized_keys."""
        self._run("stop.sh", "--purge")


def private_server(state: Path) -> Iterator[PrivateServer]:
    """A started ``PrivateServer`` (a fixture's body), purged afterwards; skips with the
    reason when one cannot be started here."""
    pytest.importorskip("paramiko", reason="paramiko not installed (pip install '.[ssh]')")
    if os.geteuid() != 0:
        pytest.skip("an sshd of the test's own needs root (containers/sshd/start.sh)")
    if not (os.access("/usr/sbin/sshd", os.X_OK) and shutil.which("ssh")):
        pytest.skip("openssh-server not installed: run containers/sshd/start.sh once")
    made = PrivateServer(state)
    made.start()
    try:
        yield made
    finally:
        made.purge()


def waiting_pids(store: Path) -> Set[int]:
    """The processes of this host whose wait has asked about a job in this job store
    (the shared poll's wants): an outage made after it falls inside their waits."""
    if not store.exists():
        return set()
    try:
        with contextlib.closing(sqlite3.connect(store, timeout=5)) as connection:
            rows = connection.execute("SELECT DISTINCT owner FROM poll_wants").fetchall()
    except sqlite3.OperationalError:  # no wait has asked yet: no table
        return set()
    return {int(row[0].split(":")[1]) for row in rows}
