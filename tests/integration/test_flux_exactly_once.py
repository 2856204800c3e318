"""A Flux submission whose answer is lost ends with exactly one job: adopted by its key.

Real faults on a flux-core 0.88 broker of the module's own, reached over SSH
(containers/sshd) through the CLI driver, owned by the SSH user (another user
cannot reach its socket, see ``test_flux_ssh``):

- the broker paused with SIGSTOP while ``flux submit``/``flux batch`` waits for
  its answer, the SSH connection cut under it, the broker resumed: the job the
  request became is found by its key and adopted, nothing is sent twice.  A
  validator plugin of the test's (``GATE``) holds the request inside the broker
  until the pause has begun, so that the request surely reached it;
- the broker paused *before* the command connects (a paused broker never
  completes the socket handshake, so nothing is sent yet), the connection cut:
  the command left behind on the login node connects once the broker runs again
  (sshd gives a command without a pty no SIGHUP), its job is adopted;
- the broker's socket missing at first ("Unable to connect to Flux": nothing
  was sent): the submission is sent again and goes in once;
- the native driver (the bindings in this process, a broker of this process's
  user): the request held and the broker paused past the command timeout the
  bindings wait for its answer: found by its key and adopted.

Each time the instance is asked - ``flux jobs``, then ``flux job info ID
jobspec`` - how many jobs carry the submission's key.  The SSH cut ends only the
sshd processes serving this test process's connections (found by their ports).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import pytest

from hpcbridge.model import JobState
from hpcbridge.schedulers.flux.adapter import FluxAdapter
from tests.support.flux import FluxInstance, release_of
from tests.support.flux_cases import (
    FLUX_COMMANDS,
    make_adapter,
    many_cores_config,
    native_bindings_or_skip,
    wait_for,
    write_script,
)
from tests.support.ssh import make_executor

pytestmark = [pytest.mark.flux, pytest.mark.ssh, pytest.mark.slow]

#: the release these faults are made on (its validator takes a plugin by path)
RELEASE = (0, 88)

#: a validator plugin that holds each job while the gate file exists, after noting its key
GATE_PLUGIN = """
import json, os, time
from flux.job.validator import ValidatorPlugin

HERE = os.path.dirname(os.path.abspath(__file__))


class Validator(ValidatorPlugin):
    def validate(self, args):
        gate = os.path.join(HERE, "gate")
        if os.path.exists(gate):
            user = args.jobspec.get("attributes", {}).get("user", {})
            with open(os.path.join(HERE, "held"), "a") as held:
                held.write(json.dumps(user.get("hpcbridge_key")) + "\\n")
            while os.path.exists(gate):
                time.sleep(0.05)
"""


def flux_088() -> str:
    for flux in FLUX_COMMANDS:
        if release_of(flux)[:2] == RELEASE:
            return flux
    pytest.skip("flux-core 0.88 not found (HPCBRIDGE_TEST_FLUX_PREFIXES, /opt/flux-0.88)")


def gated_broker(user: Optional[str]) -> Iterator[FluxInstance]:
    """A 0.88 broker (of ``user``), its validator holding jobs at the gate."""
    flux = flux_088()
    workdir = Path(tempfile.mkdtemp(prefix="hpcb-flux-once-", dir="/tmp"))
    workdir.chmod(0o755)
    plugin = workdir / "gate.py"
    plugin.write_text(GATE_PLUGIN)
    plugin.chmod(0o644)
    config = many_cores_config(flux, workdir)
    config += f'[ingest.validator]\nplugins = ["jobspec", "{plugin}"]\n'
    instance = FluxInstance(flux, config=config, workdir=str(workdir), user=user)
    instance.start()
    try:
        yield instance
    finally:
        instance.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def broker(ssh_server: Any) -> Iterator[FluxInstance]:
    """Owned by the SSH user: the commands over SSH reach its socket."""
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip(f"a broker the ssh user {ssh_server.user} can reach needs root (runuser)")
    yield from gated_broker(ssh_server.user)


@pytest.fixture(scope="module")
def own_broker() -> Iterator[FluxInstance]:
    """Owned by this process's user: the bindings in this process reach its socket."""
    native_bindings_or_skip(flux_088())
    yield from gated_broker(None)


@pytest.fixture
def adapter(
    broker: FluxInstance,
    ssh_server: Any,
    ssh_remote_dir: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[FluxAdapter]:
    """The CLI driver over SSH; batch jobs where the test is parametrized ``nested``."""
    nested = (
        request.node.callspec.params.get("nested") if hasattr(request.node, "callspec") else None
    )
    made = make_adapter(
        "cli",
        broker.uri,
        tmp_path / "state",
        executor=make_executor(ssh_server, default_timeout=60.0),
        nested=nested,
        remote_workdir=ssh_remote_dir,
        flux_command=broker.flux,
    )
    yield made
    made.close()  # and its executor


@pytest.fixture
def script(tmp_path: Path) -> str:
    return write_script(tmp_path / "scripts", "job.sh", "sleep 1\necho done\n")


def broker_pid(broker: FluxInstance) -> int:
    """The flux-broker process of ``broker`` (a grandchild of its runuser)."""
    marker = f"--config-path={os.path.join(broker.workdir, 'conf')}"
    for entry in Path("/proc").iterdir():
        try:
            words = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if entry.name.isdigit() and words and words[0].endswith("flux-broker") and marker in words:
            return int(entry.name)
    raise AssertionError(f"no flux-broker with {marker}")


def jobs_with_key(broker: FluxInstance, key: str) -> List[str]:
    """The jobs whose jobspec carries ``key``, asked of the instance itself."""
    listed = broker.check(["jobs", "-a", "-n", "-c", "0", "-o", "{id.f58}"]).split()
    found = []
    for job_id in listed:
        spec = json.loads(broker.check(["job", "info", job_id, "jobspec"]))
        if spec["attributes"].get("user", {}).get("hpcbridge_key") == key:  # KEY_ATTRIBUTE
            found.append(job_id)
    return found


def key_of(adapter: FluxAdapter, job_id: str) -> str:
    record = adapter.store.get(job_id, "flux", adapter.host_label)
    assert record is not None and record.exit_file
    return Path(record.exit_file).name.split(".")[0]  # the wrapper's token: a job's key


def cut_ssh(server: Any) -> List[int]:
    """End the sshd processes serving this process's connections to ``server``."""
    listing = subprocess.run(
        ["ss", "-tnpH", "state", "established"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    where = f"{server.host}:{server.port}"
    ours = {
        line.split()[2].rsplit(":", 1)[1]
        for line in listing
        if line.split()[3] == where and f"pid={os.getpid()}," in line
    }
    pids = set()
    for line in listing:
        words = line.split()
        if words[2] == where and words[3].rsplit(":", 1)[1] in ours:
            pids.update(int(part.split(",")[0]) for part in line.split("pid=")[1:])
    listening = subprocess.run(
        ["ss", "-tlnpH"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for line in listening:  # never the server itself, only its per-connection processes
        if line.split()[3] == where:
            pids.difference_update(int(part.split(",")[0]) for part in line.split("pid=")[1:])
    assert pids, f"no sshd serves a connection of this process to {where}"
    for pid in sorted(pids):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass  # a session's child ends with its monitor
    return sorted(pids)


class Fault(threading.Thread):
    """A fault made while the submission runs; ``join`` raises what went wrong in it."""

    def __init__(self, fault: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self.fault = fault
        self.error: Optional[BaseException] = None
        self.start()

    def run(self) -> None:
        try:
            self.fault()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc

    def join(self, timeout: Optional[float] = None) -> None:
        super().join(timeout)
        if self.error is not None:
            raise AssertionError(f"the fault failed: {self.error!r}") from self.error


def warm_up(adapter: FluxAdapter, script: str) -> None:
    """One job first: the session is open and the driver knows the broker is ready, so
    the faults meet the submission itself."""
    job_id = adapter.submit_job(script, {"time": "60s"})
    assert adapter.wait(job_id, poll_interval=0.5, timeout=60).state is JobState.COMPLETED


def hold_then_pause(broker: FluxInstance, then: Callable[[], None]) -> Fault:
    """Hold the next submission at the gate; once it is held, pause the broker, do
    ``then``, open the gate and resume the broker."""
    gate, held = Path(broker.workdir, "gate"), Path(broker.workdir, "held")
    held.unlink(missing_ok=True)
    gate.touch()
    pid = broker_pid(broker)

    def fault() -> None:
        try:
            wait_for(lambda: held.exists() and held.read_text().strip() != "", 60, what="held")
            os.kill(pid, signal.SIGSTOP)  # the request is inside the broker, unanswered
            then()
            gate.unlink()
            time.sleep(2)
        finally:
            gate.unlink(missing_ok=True)
            os.kill(pid, signal.SIGCONT)

    return Fault(fault)


def held_key(broker: FluxInstance) -> str:
    return str(json.loads(Path(broker.workdir, "held").read_text().splitlines()[0]))


@pytest.mark.parametrize("nested", [False, True], ids=["flux-submit", "flux-batch"])
def test_answer_lost_to_a_paused_broker_and_a_cut_connection_adopts_the_one_job(
    broker: FluxInstance,
    adapter: FluxAdapter,
    ssh_server: Any,
    script: str,
    nested: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    warm_up(adapter, script)

    def cut() -> None:
        cut_ssh(ssh_server)
        time.sleep(1)

    faulting = hold_then_pause(broker, cut)
    try:
        with caplog.at_level(logging.INFO, logger="hpcbridge"):
            job_id = adapter.submit_job(script, {"time": "60s"})
    finally:
        faulting.join()
    assert "dropped while" in caplog.text and "adopted job " + job_id in caplog.text
    key = key_of(adapter, job_id)
    assert held_key(broker) == key
    assert jobs_with_key(broker, key) == [job_id]
    assert adapter.store.get(job_id, "flux", adapter.host_label) is not None
    final = adapter.wait(job_id, poll_interval=0.5, timeout=120)
    assert final.state is JobState.COMPLETED


def test_native_answer_lost_to_a_paused_broker_adopts_the_one_job(
    own_broker: FluxInstance, tmp_path: Path, script: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The bindings wait for the answer as long as the command timeout (here 5 s).
    adapter = make_adapter(
        "native",
        own_broker.uri,
        tmp_path / "state",
        command_timeout=5.0,
        flux_command=own_broker.flux,
    )
    try:
        warm_up(adapter, script)
        assert adapter.open().driver.name == "native"
        faulting = hold_then_pause(own_broker, lambda: time.sleep(7))
        try:
            with caplog.at_level(logging.INFO, logger="hpcbridge"):
                job_id = adapter.submit_job(script, {"time": "60s"})
        finally:
            faulting.join()
        assert "answers of 1 job(s) were lost" in caplog.text
        assert "adopted job " + job_id in caplog.text
        key = key_of(adapter, job_id)
        assert held_key(own_broker) == key
        assert jobs_with_key(own_broker, key) == [job_id]
        assert adapter.wait(job_id, poll_interval=0.5, timeout=120).state is JobState.COMPLETED
    finally:
        adapter.close()


def test_a_command_cut_off_before_it_connected_goes_in_later_and_is_adopted(
    broker: FluxInstance,
    adapter: FluxAdapter,
    ssh_server: Any,
    script: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    warm_up(adapter, script)
    pid = broker_pid(broker)
    os.kill(pid, signal.SIGSTOP)

    def fault() -> None:
        try:
            time.sleep(3)  # the command waits for the paused broker's handshake
            cut_ssh(ssh_server)
            time.sleep(2)
        finally:
            os.kill(pid, signal.SIGCONT)

    faulting = Fault(fault)
    try:
        with caplog.at_level(logging.INFO, logger="hpcbridge"):
            job_id = adapter.submit_job(script, {"time": "60s"})
    finally:
        faulting.join()
    assert "dropped while" in caplog.text and "adopted job " + job_id in caplog.text
    assert jobs_with_key(broker, key_of(adapter, job_id)) == [job_id]
    assert adapter.wait(job_id, poll_interval=0.5, timeout=120).state is JobState.COMPLETED


def test_a_submission_that_never_reached_the_broker_is_sent_once_more(
    broker: FluxInstance, adapter: FluxAdapter, script: str, caplog: pytest.LogCaptureFixture
) -> None:
    warm_up(adapter, script)
    assert broker.uri and broker.uri.startswith("local://")
    socket_path = Path(broker.uri[len("local://") :])
    away = socket_path.with_name(socket_path.name + ".away")
    socket_path.rename(away)  # the URI names no socket: nothing can be sent

    def fault() -> None:
        time.sleep(4)
        away.rename(socket_path)

    faulting = Fault(fault)
    try:
        with caplog.at_level(logging.INFO, logger="hpcbridge"):
            job_id = adapter.submit_job(script, {"time": "60s"})
    finally:
        faulting.join()
        if away.exists():
            away.rename(socket_path)
    assert f"did not reach the Flux instance {broker.uri} (Unable to connect to Flux" in caplog.text
    assert "adopted" not in caplog.text
    assert jobs_with_key(broker, key_of(adapter, job_id)) == [job_id]
    assert adapter.wait(job_id, poll_interval=0.5, timeout=120).state is JobState.COMPLETED
