"""Shared fixtures.  Integration tests skip, with the reason, when their component is absent."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from hpcbridge import Settings
from tests.support.openssh import totp_login  # noqa: F401 - the OpenSSH backend's one login

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    """A private state folder (job store, mock jobs) for this test, also for subprocesses."""
    folder = tmp_path / "state"
    folder.mkdir()
    monkeypatch.setenv("HPCBRIDGE_STATE_DIR", str(folder))
    for name in list(os.environ):
        if name.startswith(("HPCBRIDGE_", "EXAMLOPS_")) and name != "HPCBRIDGE_STATE_DIR":
            monkeypatch.delenv(name)
    # The test clusters are the tests' own: no floor under the rounds a test asks for
    # (the floor has tests of its own: test_polling_floor, test_polite_client).
    monkeypatch.setenv("HPCBRIDGE_MIN_POLL_INTERVAL", "0")
    return folder


@pytest.fixture
def make_script(tmp_path):
    """Write a shell script into the test's folder and return its path."""

    def make(body: str, name: str = "job.sh") -> str:
        path = tmp_path / name
        path.write_text("#!/bin/sh\n" + textwrap.dedent(body).lstrip())
        path.chmod(0o755)
        return str(path)

    return make


@pytest.fixture
def mock_adapter(state_dir):
    from hpcbridge import MockAdapter

    settings = Settings.from_env({}, state_dir=str(state_dir))
    adapter = MockAdapter(settings=settings, unknown_limit=3)
    yield adapter
    adapter.close()


@pytest.fixture(scope="session")
def ssh_server():
    """The real sshd test server (containers/sshd); skips with the reason when absent."""
    pytest.importorskip("paramiko", reason="paramiko not installed (pip install '.[ssh]')")
    from tests.support.ssh import SKIP_REASON, find_test_server

    found = find_test_server()
    if found is None:
        pytest.skip(SKIP_REASON)
    return found


@pytest.fixture(scope="module")
def ssh_executor(ssh_server):
    """One SSHExecutor to the test server, as its unprivileged user, shared by a module."""
    from tests.support.ssh import make_executor

    executor = make_executor(ssh_server, default_timeout=60.0)
    yield executor
    executor.close()


def _remote_dir(executor):
    result = executor.run(["mktemp", "-d", "/tmp/hpcbridge-test.XXXXXXXX"])
    assert result.ok, result.stderr
    path = result.stdout.strip()
    yield path
    executor.run(["rm", "-rf", "--", path])


@pytest.fixture
def ssh_remote_dir(ssh_executor):
    """A fresh folder owned by the SSH test user, removed afterwards."""
    yield from _remote_dir(ssh_executor)


@pytest.fixture(scope="module")
def openssh_executor(request):
    """An OpenSSHExecutor to the sshd with a second factor (containers/sshd-totp), as the
    SSH test user, riding the session's one ``hpcbridge login``; skips when absent."""
    return request.getfixturevalue("totp_login").executor


@pytest.fixture
def openssh_remote_dir(openssh_executor):
    """A fresh folder owned by the SSH test user, made over the OpenSSH backend."""
    yield from _remote_dir(openssh_executor)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """``@pytest.mark.anyio`` tests (anyio's pytest plugin) run on asyncio, hpcbridge's loop."""
    return "asyncio"
