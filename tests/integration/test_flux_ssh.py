"""The CLI driver over the SSH transport (containers/sshd) against a real Flux.

The SSH test user (``hpcbtest``) cannot use a broker started by another user:
``flux start`` makes its rundir (``/tmp/flux-XXXXXX``, holding the
``local-0`` socket) mode 0700, and without flux-security only the instance
owner may connect anyway.  So this module starts its broker *as the SSH
user* (``runuser``, when the tests run as root) and checks the limitation
itself in ``test_root_broker_is_not_reachable_by_another_user``.  The scenario's
cases run on both SSH backends (the OpenSSH one through containers/sshd-totp after one
``hpcbridge login``).  A wait rides out a 30 s outage of an sshd of its own
(``tests.support.ssh.PrivateServer``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, Iterator

import pytest

from hpcbridge.errors import JobNotFoundError, JobSubmissionError
from hpcbridge.model import JobState
from tests.support.flux_cases import (
    make_adapter,
    many_cores_config,
    require_flux,
    start_instance,
    wait_state,
    write_script,
)
from tests.support.ssh import PrivateServer, make_executor, private_server, waiting_pids

pytestmark = [pytest.mark.flux, pytest.mark.ssh]

KEYS = ("HOST", "PORT", "USER", "KEY", "KNOWN_HOSTS")


def _server() -> Dict[str, str]:
    state = os.environ.get("HPCBRIDGE_SSHD_STATE", "/tmp/hpcbridge-sshd")
    values: Dict[str, str] = {}
    env_file = Path(state) / "env.sh"
    if env_file.is_file():
        for line in env_file.read_text().splitlines():
            if line.startswith("export ") and "=" in line:
                name, _, raw = line[len("export ") :].partition("=")
                words = shlex.split(raw)
                values[name.strip()] = words[0] if words else ""
    for key in KEYS:
        name = f"HPCBRIDGE_TEST_SSH_{key}"
        if os.environ.get(name):
            values[name] = os.environ[name]
    if any(not values.get(f"HPCBRIDGE_TEST_SSH_{key}") for key in KEYS):
        pytest.skip("sshd test server not running: start containers/sshd/start.sh")
    try:
        with socket.create_connection(
            (values["HPCBRIDGE_TEST_SSH_HOST"], int(values["HPCBRIDGE_TEST_SSH_PORT"])), timeout=2
        ):
            pass
    except OSError:
        pytest.skip("sshd test server not running: start containers/sshd/start.sh")
    return {key: values[f"HPCBRIDGE_TEST_SSH_{key}"] for key in KEYS}


@pytest.fixture(scope="module")
def server() -> Dict[str, str]:
    require_flux()
    pytest.importorskip("paramiko")
    return _server()


def ssh_executor(server: Dict[str, str]) -> Any:
    from hpcbridge.transports.ssh.executor import SSHExecutor

    return SSHExecutor(
        server["HOST"],
        server["USER"],
        int(server["PORT"]),
        server["KEY"],
        known_hosts=server["KNOWN_HOSTS"],
        ssh_config_path=os.devnull,
        default_timeout=60.0,
    )


@pytest.fixture(scope="module")
def user_broker(server: Dict[str, str]) -> Iterator[Any]:
    """A broker owned by the SSH user, started here with runuser."""
    user = server["USER"]
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip(
            f"the ssh user {user} cannot reach another user's broker socket (rundir 0700), "
            "and starting one as that user needs root (runuser)"
        )
    flux = require_flux()
    workdir = Path(tempfile.mkdtemp(prefix="hpcb-flux-ssh-", dir="/tmp"))
    workdir.chmod(0o755)
    from tests.support.flux import FluxInstance

    instance = FluxInstance(
        flux, config=many_cores_config(flux, workdir), workdir=str(workdir), user=user
    )
    instance.start()
    yield instance
    instance.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def test_root_broker_is_not_reachable_by_another_user(
    server: Dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs a broker of another user than the ssh user")
    root_broker = start_instance(tmp_path_factory.mktemp("flux-root"), cores=2)
    executor = ssh_executor(server)
    try:
        result = executor.run(
            [require_flux(), "getattr", "rank"], env={"FLUX_URI": str(root_broker.uri)}
        )
        assert not result.ok
        assert "Permission denied" in result.stderr or "not found" in result.stderr, result.stderr
    finally:
        executor.close()
        root_broker.stop()


@pytest.fixture(scope="module", params=["paramiko", "openssh"])
def scenario(
    request: pytest.FixtureRequest, server: Dict[str, str], user_broker: Any
) -> Iterator[SimpleNamespace]:
    """The cases' jobs, sent and waited for over each SSH backend: paramiko to
    containers/sshd, OpenSSH to containers/sshd-totp after one ``hpcbridge login``."""
    if request.param == "openssh":
        executor = request.getfixturevalue("totp_login").executor
    else:
        executor = ssh_executor(server)
    made = executor.run(["mktemp", "-d", "/tmp/hpcb-flux-ssh-jobs.XXXXXX"])
    assert made.ok, made.stderr
    remote = made.stdout.strip()
    local = Path(tempfile.mkdtemp(prefix="hpcb-flux-ssh-local-"))
    scripts = local / "scripts"
    hello = write_script(scripts, "hello.sh", 'echo "hello over ssh from $1"\n')
    fail = write_script(scripts, "fail.sh", "exit 3\n")
    sleeper = write_script(scripts, "sleeper.sh", "sleep ${1:-60}\n")
    adapter = make_adapter(
        "auto", user_broker.uri, local / "state", executor=executor, remote_workdir=remote
    )
    ids = SimpleNamespace()
    ids.ok = adapter.submit_job(hello, {"time": "60s"}, arguments=["ok"])
    ids.fail = adapter.submit_job(fail, {"time": "60s"})
    ids.cancel = adapter.submit_job(sleeper, {"time": "5m"})
    ids.timeout = adapter.submit_job(sleeper, {"time": "2s"})
    # Long enough to be seen running over SSH: a plain job starts at once.
    ids.parent = adapter.submit_job(sleeper, {"time": "60s"}, arguments=["8"])
    ids.child = adapter.submit_job(
        hello, {"time": "60s"}, depends_on=ids.parent, arguments=["child"]
    )
    ids.bulk = adapter.submit_many(
        [(hello, [f"bulk{index}"]) for index in range(3)], {"time": "60s"}
    )
    wait_state(adapter, ids.parent, [JobState.RUNNING])
    child_while_parent_runs = adapter.get_job_status(ids.child).state
    wait_state(adapter, ids.cancel, [JobState.RUNNING])
    adapter.cancel_job(ids.cancel)
    every = [ids.ok, ids.fail, ids.cancel, ids.timeout, ids.parent, ids.child, *ids.bulk]
    final = adapter.wait_all(every, poll_interval=1.0, timeout=120)
    yield SimpleNamespace(
        adapter=adapter,
        ids=ids,
        final=final,
        child_while_parent_runs=child_while_parent_runs,
        hello=hello,
        remote=remote,
    )
    adapter.close()
    cleanup = ssh_executor(server)
    cleanup.run(["rm", "-rf", "--", remote])
    cleanup.close()
    shutil.rmtree(local, ignore_errors=True)


def test_cli_driver_over_ssh(scenario: SimpleNamespace) -> None:
    assert scenario.adapter.open().driver.name == "cli"
    assert scenario.adapter.executor.kind == "ssh"


def test_completed_with_times_and_logs(scenario: SimpleNamespace) -> None:
    status = scenario.final[scenario.ids.ok]
    assert status.state is JobState.COMPLETED and status.exit_code == 0
    assert status.start_time and status.end_time and status.end_time >= status.start_time
    assert "hello over ssh from ok" in scenario.adapter.get_job_logs(scenario.ids.ok)


def test_failed_cancelled_timeout(scenario: SimpleNamespace) -> None:
    final = scenario.final
    assert final[scenario.ids.fail].state is JobState.FAILED
    assert final[scenario.ids.fail].exit_code == 3
    assert final[scenario.ids.cancel].state is JobState.CANCELLED
    assert final[scenario.ids.timeout].state is JobState.TIMEOUT


def test_dependency(scenario: SimpleNamespace) -> None:
    assert scenario.child_while_parent_runs is JobState.PENDING
    child = scenario.final[scenario.ids.child]
    parent = scenario.final[scenario.ids.parent]
    assert child.state is JobState.COMPLETED
    assert child.start_time and parent.end_time and child.start_time >= parent.end_time


def test_bulk_over_ssh(scenario: SimpleNamespace) -> None:
    for index, job_id in enumerate(scenario.ids.bulk):
        assert scenario.final[job_id].state is JobState.COMPLETED
        assert f"hello over ssh from bulk{index}" in scenario.adapter.get_job_logs(job_id)


def test_unknown_id_over_ssh(scenario: SimpleNamespace) -> None:
    with pytest.raises(JobNotFoundError):
        scenario.adapter.wait("ƒ2TNt8FH", poll_interval=0.2)


def test_parents_that_cannot_be_waited_for_are_refused_over_ssh(
    scenario: SimpleNamespace,
) -> None:
    adapter, ids = scenario.adapter, scenario.ids
    listed = lambda: adapter.executor.run(["ls", "-A", scenario.remote]).stdout  # noqa: E731
    before = listed()
    with pytest.raises(JobSubmissionError, match="parent job ƒ2TNt8FH cannot be found"):
        adapter.submit_job(scenario.hello, {"time": "60s"}, depends_on="ƒ2TNt8FH")
    with pytest.raises(JobSubmissionError, match=f"parent job {ids.fail} already ended FAILED"):
        adapter.submit_job(scenario.hello, {"time": "60s"}, depends_on=[ids.ok, ids.fail])
    assert listed() == before  # nothing staged


#: how long the login node's sshd is down in the outage test (seconds)
OUTAGE = 30.0


@pytest.fixture
def own_sshd(tmp_path: Path) -> Iterator[PrivateServer]:
    """An sshd of this test's own: stopping it leaves the shared one alone."""
    require_flux()
    yield from private_server(tmp_path / "sshd")


def test_a_wait_rides_out_a_30_s_outage_of_the_login_node(
    user_broker: Any, own_sshd: PrivateServer, tmp_path: Path
) -> None:
    """The login node's sshd (listener and sessions) down for 30 s during a wait: the
    wait ends with the jobs' real ends, learnt once the node is back."""
    server = own_sshd.server
    assert server is not None
    executor = make_executor(server, default_timeout=60.0, min_reconnect_interval=1.0)
    made = executor.run(["mktemp", "-d", "/tmp/hpcb-flux-outage.XXXXXX"])
    assert made.ok, made.stderr
    remote = made.stdout.strip()
    adapter = make_adapter(
        "auto", user_broker.uri, tmp_path / "state", executor=executor, remote_workdir=remote
    )
    # The jobs end only once released, during the outage (the SSH server is this
    # machine: the test writes the release itself while sshd is down).
    release = Path(remote) / "release"
    held = f"i=0; while [ ! -e {release} ] && [ $i -lt 600 ]; do sleep 0.5; i=$((i+1)); done\n"
    scripts = tmp_path / "scripts"
    ok = adapter.submit_job(write_script(scripts, "ok.sh", held + "echo survived\n"))
    failed = adapter.submit_job(write_script(scripts, "failed.sh", held + "exit 3\n"))
    connections_before = executor.connection_count
    outcome: Dict[str, Any] = {}

    def follow() -> None:
        try:
            outcome["final"] = adapter.wait_all([ok, failed], poll_interval=5, timeout=300)
        except Exception as exc:  # reported below
            outcome["error"] = exc
        outcome["ended"] = time.monotonic()

    waiter = threading.Thread(target=follow)
    waiter.start()
    deadline = time.monotonic() + 120
    while os.getpid() not in waiting_pids(tmp_path / "state" / "jobs.db"):
        assert waiter.is_alive() and time.monotonic() < deadline, outcome
        time.sleep(0.2)
    stopped = time.monotonic()
    own_sshd.stop()
    time.sleep(OUTAGE / 3)
    release.touch()  # the jobs end while the node is away
    time.sleep(OUTAGE - (time.monotonic() - stopped))
    down = time.monotonic() - stopped
    own_sshd.start()
    waiter.join(300)
    print(
        f"sshd down {down:.1f} s; the wait ended {outcome['ended'] - stopped:.1f} s "
        f"after the stop: {outcome}"
    )
    assert "error" not in outcome, outcome.get("error")
    final = outcome["final"]
    assert final[ok].state is JobState.COMPLETED and final[ok].exit_code == 0
    assert final[failed].state is JobState.FAILED and final[failed].exit_code == 3
    assert executor.connection_count > connections_before  # it really reconnected
    assert "survived" in adapter.get_job_logs(ok)
    adapter.close()
    cleanup = make_executor(server)
    cleanup.run(["rm", "-rf", "--", remote])
    cleanup.close()
