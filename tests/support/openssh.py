"""The OpenSSH backend in tests: its executor to a test sshd with a socket folder of the
test's own, and the test sshd with a second factor (containers/sshd-totp)."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

import pytest

from tests.support.ssh import Server, _reachable, _read_env_file

TOTP_STATE = "/tmp/hpcbridge-sshd-totp"
TOTP_SKIP = "sshd test server with a second factor not running: start containers/sshd-totp/start.sh"


@dataclass(frozen=True)
class TotpServer:
    """The TOTP sshd: a ``Server`` plus what answers its code prompt."""

    server: Server
    secret: str
    askpass: str


def find_totp_server() -> Optional[TotpServer]:
    """The running sshd with a second factor, or None."""
    env_file = Path(os.environ.get("HPCBRIDGE_SSHD_TOTP_STATE", TOTP_STATE)) / "env.sh"
    if not env_file.is_file() or shutil.which("oathtool") is None:
        return None
    values = _read_env_file(env_file)
    server = Server(
        host=values["HPCBRIDGE_TEST_TOTP_HOST"],
        port=int(values["HPCBRIDGE_TEST_TOTP_PORT"]),
        user=values["HPCBRIDGE_TEST_TOTP_USER"],
        key=values["HPCBRIDGE_TEST_TOTP_KEY"],
        known_hosts=values["HPCBRIDGE_TEST_TOTP_KNOWN_HOSTS"],
        config=values["HPCBRIDGE_TEST_TOTP_CONFIG"],
        state=values["HPCBRIDGE_SSHD_TOTP_STATE"],
    )
    if not _reachable(server.host, server.port):
        return None
    return TotpServer(
        server, values["HPCBRIDGE_TEST_TOTP_SECRET"], values["HPCBRIDGE_TEST_TOTP_ASKPASS"]
    )


def socket_folder() -> Iterator[str]:
    """A short folder of the test's own for the master sockets (XDG_RUNTIME_DIR): a
    pytest temporary path is too long for a socket's path."""
    folder = tempfile.mkdtemp(prefix="hpcb-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def openssh_env(server: Server, runtime: str) -> Dict[str, str]:
    """The variables of the openssh backend to ``server`` (no ssh config of the user's)."""
    return {
        "HPCBRIDGE_TRANSPORT": "ssh",
        "HPCBRIDGE_SSH_BACKEND": "openssh",
        "HPCBRIDGE_SSH_HOST": server.host,
        "HPCBRIDGE_SSH_PORT": str(server.port),
        "HPCBRIDGE_SSH_USER": server.user,
        "HPCBRIDGE_SSH_KEY": server.key,
        "HPCBRIDGE_SSH_KNOWN_HOSTS": server.known_hosts,
        "XDG_RUNTIME_DIR": runtime,
    }


def make_openssh_executor(server: Server, runtime: str, **overrides: Any) -> Any:
    from hpcbridge.transports.ssh.openssh import OpenSSHExecutor

    arguments: Dict[str, Any] = dict(
        known_hosts=server.known_hosts,
        ssh_config_path=os.devnull,
        connect_timeout=10.0,
        default_timeout=30.0,
        environ={"XDG_RUNTIME_DIR": runtime},
    )
    arguments.update(overrides)
    return OpenSSHExecutor(server.host, server.user, server.port, server.key, **arguments)


def askpass_env(totp: TotpServer) -> Dict[str, str]:
    """What makes ``ssh`` type the code of the moment (the login's only prompt)."""
    return {
        "SSH_ASKPASS": totp.askpass,
        "SSH_ASKPASS_REQUIRE": "force",
        "HPCBRIDGE_TEST_TOTP_SECRET": totp.secret,
    }


def skip_without_ssh() -> None:
    if shutil.which("ssh") is None:
        pytest.skip("the OpenSSH client (ssh) is not installed: apt-get install openssh-client")


@pytest.fixture(scope="session")
def totp_login() -> Iterator[Any]:
    """One ``hpcbridge login`` to the TOTP sshd for the session (the code typed by its
    askpass.sh), in a socket folder of its own: ``env`` reaches it through that master,
    ``executor`` is an OpenSSHExecutor riding it; ``hpcbridge logout`` at the end."""
    from types import SimpleNamespace

    from tests.support.cli import hpcbridge_in

    skip_without_ssh()
    totp = find_totp_server()
    if totp is None:
        pytest.skip(TOTP_SKIP)
    for runtime in socket_folder():
        env = openssh_env(totp.server, runtime)
        login = hpcbridge_in({**os.environ, **env, **askpass_env(totp)}, "login", timeout=60)
        assert login.returncode == 0, login.stderr
        try:
            executor = make_openssh_executor(totp.server, runtime, ssh_config_path=None)
            yield SimpleNamespace(env=env, executor=executor, server=totp.server)
        finally:
            hpcbridge_in({**os.environ, **env}, "logout", timeout=60)
