"""Finding the real sshd test server (containers/sshd) and connecting to it."""

from __future__ import annotations

import os
import shlex
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

SKIP_REASON = "sshd test server not running: start containers/sshd/start.sh"
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


def make_executor(server: Server, **overrides: Any) -> Any:
    from hpcbridge.transports.ssh import SSHExecutor

    arguments = dict(
        known_hosts=server.known_hosts,
        ssh_config_path=os.devnull,
        connect_timeout=10.0,
        default_timeout=30.0,
        min_reconnect_interval=0.2,
    )
    arguments.update(overrides)
    return SSHExecutor(server.host, server.user, server.port, server.key, **arguments)
