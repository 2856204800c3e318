"""The Executor contract on the OpenSSH backend (HPCBRIDGE_SSH_BACKEND=openssh), against
the shared loopback sshd (containers/sshd): the same cases as the paramiko executor's
(tests/integration/test_ssh_transport.py, imported: one contract written once), through
a master connection of the module's own; then what is the backend's own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hpcbridge.errors import HostKeyError, JobTimeoutError
from tests.integration.test_ssh_transport import (  # noqa: F401 - collected here too
    test_file_round_trips,
    test_home_relative_paths_and_abspath,
    test_hostile_argv_and_env_are_passed_literally,
    test_hostile_cwd_and_remote_paths,
    test_large_input_is_streamed_while_output_is_read,
    test_large_outputs_on_both_streams_do_not_deadlock,
    test_run_basics,
    test_timeout_kills_the_remote_command,
)
from tests.support.openssh import make_openssh_executor, skip_without_ssh, socket_folder
from tests.support.ssh import SKIP_REASON, Server, find_test_server

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def server() -> Server:
    skip_without_ssh()
    found = find_test_server()
    if found is None:
        pytest.skip(SKIP_REASON)
    return found


@pytest.fixture(scope="module")
def runtime():
    yield from socket_folder()


@pytest.fixture(scope="module")
def executor(server, runtime):
    made = make_openssh_executor(server, runtime)
    yield made
    made.logout()


@pytest.fixture(scope="module")
def remote_dir(executor):
    result = executor.run(["mktemp", "-d", "/tmp/hpcbridge-openssh-test.XXXXXXXX"])
    assert result.ok, result.stderr
    yield result.stdout.strip()
    executor.run(["rm", "-rf", "--", result.stdout.strip()])


def test_every_command_rides_one_master(executor, server):
    assert executor.host == f"{server.user}@{server.host}:{server.port}"  # paramiko's label
    executor.run(["true"])
    first = executor.master()
    assert first.up, first.words
    for _ in range(3):
        executor.run(["true"])
    assert executor.master().words == first.words  # the same master's pid


def test_a_new_executor_in_another_process_rides_the_same_master(executor, server, runtime):
    executor.run(["true"])
    pid = executor.master().words
    code = (
        "import sys; from tests.support.openssh import make_openssh_executor; "
        "from tests.support.ssh import find_test_server; "
        f"x = make_openssh_executor(find_test_server(), {runtime!r}); "
        "print(x.run(['id', '-un']).stdout.strip()); print(x.master().words)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [server.user, pid]


@pytest.fixture
def own_sockets():
    """A socket folder of the test's own: no master of the module's is ridden."""
    yield from socket_folder()


def test_an_unknown_host_key_is_refused_whatever_the_users_config_says(
    server, tmp_path, own_sockets
):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = tmp_path / "config"
    config.write_text("Host *\n    StrictHostKeyChecking no\n")  # hpcbridge's policy wins
    made = make_openssh_executor(
        server, own_sockets, known_hosts=str(empty), ssh_config_path=str(config)
    )
    with pytest.raises(HostKeyError, match="host key"):
        made.run(["true"])
    assert empty.read_text() == ""
    assert not made.master().up
    accepting = make_openssh_executor(
        server,
        own_sockets,
        known_hosts=str(empty),
        accept_new_host_keys=True,
        ssh_config_path=str(config),
    )
    try:
        assert accepting.run(["true"]).ok
        assert f"[{server.host}]:{server.port}" in empty.read_text()
    finally:
        accepting.logout()


def test_a_timeout_leaves_the_master_up(executor):
    executor.run(["true"])
    before = executor.master().words
    with pytest.raises(JobTimeoutError, match="did not finish within 1 s"):
        executor.run(["sleep", "30"], timeout=1)
    assert executor.master().words == before  # the same master's pid
