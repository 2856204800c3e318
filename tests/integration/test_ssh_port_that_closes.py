"""An SSH port that accepts a connection and closes it at once (a port of something
else, a firewall, sshd's MaxStartups): one line of hpcbridge's own, exit 6, and no
paramiko traceback on the user's stderr (its words come with ``-v``)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import REPO
from tests.support.cli import hpcbridge

pytest.importorskip("paramiko", reason="paramiko not installed (pip install '.[ssh]')")


@pytest.fixture
def closing_port() -> Iterator[int]:
    """A real listening socket on 127.0.0.1 that closes every connection it accepts."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                accepted, _ = listener.accept()
            except OSError:
                continue
            accepted.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    done.set()
    thread.join(timeout=5)
    listener.close()


def test_a_port_that_closes_gives_one_line_and_exit_6(
    state_dir: Path, make_script, closing_port: int, tmp_path: Path
) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.touch()
    env = {
        "HPCBRIDGE_SSH_HOST": "127.0.0.1",
        "HPCBRIDGE_SSH_PORT": str(closing_port),
        "HPCBRIDGE_SSH_KNOWN_HOSTS": str(known_hosts),
        "PYTHONPATH": str(REPO),
    }
    script = make_script("true")
    argv = ["submit", script, "--scheduler", "slurm", "--transport", "ssh", "--time", "1"]
    result = hpcbridge(*argv, env=env)
    assert result.returncode == 6, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("hpcbridge: error: cannot connect to ") and "127.0.0.1" in lines[0]
    assert "Traceback" not in result.stderr
    told = hpcbridge(*argv, "-v", env=env)  # asked for, paramiko's own words are there
    assert told.returncode == 6 and "paramiko" in told.stderr, told.stderr
