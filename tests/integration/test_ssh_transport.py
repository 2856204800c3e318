"""SSHExecutor against the real loopback OpenSSH server (containers/sshd).

Start it first: ``bash containers/sshd/start.sh``.  These tests never start the
main server themselves; only the fault tests restart it (``restart.sh``) or run a
second, throw-away instance on a free port, which they stop and purge.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("paramiko")

from hpcbridge.errors import (  # noqa: E402
    HostKeyError,
    JobTimeoutError,
    SubmissionUncertainError,
    TransportError,
)
from hpcbridge.transports.ssh.executor import SSHExecutor
from tests.support.ssh import SKIP_REASON, Server, find_test_server, make_executor  # noqa: E402

pytestmark = pytest.mark.ssh

REPO = Path(__file__).resolve().parents[2]
SSHD_SCRIPTS = REPO / "containers" / "sshd"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _owned_marker() -> str:
    return f"/tmp/owned-{uuid.uuid4().hex}"


def _hostile(marker: str) -> list:
    return [
        f"; touch {marker}",
        f"$(touch {marker})",
        f"`touch {marker}`",
        f"'; touch {marker}; echo '",
        f'"; touch {marker}; echo "',
        f"\ntouch {marker}\n",
        f"x && touch {marker}",
        f"| touch {marker}",
        "two  spaces\tand\ttabs",
        'it\'s "quoted"',
        "$HOME ${PATH} $0 $$ \\n",
        "*",
        "~",
        "-n",
        "",
        "ünïcödé ✓",
    ]


@pytest.fixture(scope="module")
def server() -> Server:
    found = find_test_server()
    if found is None:
        pytest.skip(SKIP_REASON)
    return found


@pytest.fixture(scope="module")
def executor(server):
    ex = make_executor(server)
    yield ex
    ex.close()


@pytest.fixture(scope="module")
def remote_dir(executor):
    result = executor.run(["mktemp", "-d", "/tmp/hpcbridge-ssh-test.XXXXXXXX"])
    assert result.ok, result.stderr
    path = result.stdout.strip()
    yield path
    executor.run(["rm", "-rf", "--", path])


def _sshd_script(server: Server, name: str, *args: str, **env: str) -> None:
    environment = {**os.environ, "HPCBRIDGE_SSHD_STATE": server.state, **env}
    result = subprocess.run(
        ["bash", str(SSHD_SCRIPTS / name), *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"{name} failed: {result.stdout}\n{result.stderr}"


# --------------------------------------------------------------------------- commands


def test_run_basics(executor, server):
    result = executor.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert result.argv == ["sh", "-c", "echo out; echo err >&2; exit 3"]
    assert executor.run(["id", "-un"]).stdout == f"{server.user}\n"
    missing = executor.run(["hpcbridge-no-such-command"])
    assert missing.returncode == 127 and "not found" in missing.stderr
    assert executor.run(["cat"], input="fed through stdin\n").stdout == "fed through stdin\n"
    assert executor.run(["cat"]).stdout == ""  # no input: EOF at once, no hang
    assert executor.run(["printenv", "A"], env={"A": "1 2"}).stdout == "1 2\n"
    assert executor.run(["pwd"], cwd="/tmp").stdout == "/tmp\n"
    home = executor.run(["printenv", "HOME"]).stdout.strip()
    assert executor.run(["pwd"], cwd="~").stdout == f"{home}\n"
    assert executor.run(["echo", "ünïcödé ✓"]).stdout == "ünïcödé ✓\n"


def test_large_outputs_on_both_streams_do_not_deadlock(executor):
    size = 3 * 1024 * 1024
    script = f"head -c {size} /dev/zero | tr '\\0' o; head -c {size} /dev/zero | tr '\\0' e >&2"
    result = executor.run(["sh", "-c", script], timeout=60)
    assert result.ok
    assert len(result.stdout) == size and set(result.stdout) == {"o"}
    assert len(result.stderr) == size and set(result.stderr) == {"e"}


def test_large_input_is_streamed_while_output_is_read(executor):
    data = "0123456789abcdef" * (5 * 1024 * 1024 // 16)
    result = executor.run(["cat"], input=data, timeout=60)
    assert result.ok and result.stdout == data
    # A command that never reads its stdin must not hang us either.
    assert executor.run(["true"], input=data, timeout=30).ok


def test_default_env_of_the_executor(server):
    with make_executor(server, env={"HPCB_A": "from-executor", "HPCB_B": "b"}) as ex:
        result = ex.run(["sh", "-c", 'echo "$HPCB_A/$HPCB_B"'], env={"HPCB_B": "call"})
        assert result.stdout == "from-executor/call\n"


def test_login_shell(server, executor):
    marker = _owned_marker()
    words = _hostile(marker)
    with make_executor(server, login_shell=True) as ex:
        result = ex.run(["printf", "%s\\0", *words], env={"E": f"$(touch {marker})"})
        assert result.ok, result.stderr
        assert result.stdout.split("\0")[:-1] == words
        login_path = ex.run(["printenv", "PATH"]).stdout.strip()
    plain_path = executor.run(["printenv", "PATH"]).stdout.strip()
    # Debian's /etc/profile sets PATH for login shells only: proof that bash -l ran.
    profile_paths = re.findall(r'PATH="([^"$]+)"', executor.read_text("/etc/profile"))
    candidates = [path for path in profile_paths if path != plain_path]
    if candidates:
        assert any(path in login_path for path in candidates), (login_path, profile_paths)
    assert not executor.exists(marker) and not os.path.exists(marker)


# --------------------------------------------------------------------------- files


def test_file_round_trips(executor, remote_dir, tmp_path):
    nested = f"{remote_dir}/a/b/c"
    executor.mkdir(nested)
    assert executor.exists(nested)
    assert executor.run(["stat", "-c", "%a", nested]).stdout.strip() == "700"
    executor.mkdir(nested)  # like mkdir -p: no error when it exists
    executor.write_text(f"{remote_dir}/a/not-a-dir", "x")
    with pytest.raises(FileExistsError):
        executor.mkdir(f"{remote_dir}/a/not-a-dir/sub")

    text = "line one\nünïcödé ✓\n"
    executor.write_text(f"{nested}/t.txt", text)
    assert executor.read_text(f"{nested}/t.txt") == text
    assert executor.run(["cat", f"{nested}/t.txt"]).stdout == text
    assert executor.run(["stat", "-c", "%a", f"{nested}/t.txt"]).stdout.strip() == "644"
    executor.write_text(f"{nested}/secret.txt", "s", mode=0o600)
    assert executor.run(["stat", "-c", "%a", f"{nested}/secret.txt"]).stdout.strip() == "600"

    payload = os.urandom(1024 * 1024 + 17)
    local = tmp_path / "up.bin"
    local.write_bytes(payload)
    os.chmod(local, 0o751)
    executor.put(str(local), f"{nested}/up.bin")
    assert executor.run(["stat", "-c", "%s %a", f"{nested}/up.bin"]).stdout.split() == [
        str(len(payload)),
        "751",
    ]
    executor.put(str(local), f"{nested}/up.bin", mode=0o640)  # replaces atomically
    assert executor.run(["stat", "-c", "%a", f"{nested}/up.bin"]).stdout.strip() == "640"
    listing = executor.run(["ls", "-A", nested]).stdout.split()
    assert sorted(listing) == ["secret.txt", "t.txt", "up.bin"]  # no temporary left over

    back = tmp_path / "down.bin"
    executor.get(f"{nested}/up.bin", str(back))
    assert back.read_bytes() == payload
    assert (back.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".hpcbridge")] == []

    with pytest.raises(FileNotFoundError):
        executor.get(f"{remote_dir}/missing", str(tmp_path / "never"))
    assert not (tmp_path / "never").exists()
    with pytest.raises(FileNotFoundError):
        executor.read_text(f"{remote_dir}/missing")
    with pytest.raises(FileNotFoundError):
        executor.put(str(tmp_path / "no-local-file"), f"{remote_dir}/x")
    with pytest.raises(FileNotFoundError):
        executor.put(str(local), f"{remote_dir}/no/such/dir/x")
    assert not executor.exists(f"{remote_dir}/missing")
    assert executor.exists(remote_dir)


def test_home_relative_paths_and_abspath(executor):
    home = executor.run(["printenv", "HOME"]).stdout.strip()
    assert executor.abspath("~") == home
    assert executor.abspath("~/a/b") == f"{home}/a/b"
    assert executor.abspath("rel/x") == f"{home}/rel/x"
    assert executor.abspath("/tmp/../etc//passwd") == "/etc/passwd"
    name = f"hpcbridge-ssh-test-{uuid.uuid4().hex}.txt"
    try:
        executor.write_text(f"~/{name}", "in home")
        assert executor.read_text(name) == "in home"
        assert executor.exists(f"{home}/{name}")
        assert executor.run(["cat", name], cwd="~").stdout == "in home"
    finally:
        executor.run(["rm", "-f", f"{home}/{name}"])


# --------------------------------------------------------------------------- hostile input


def test_hostile_argv_and_env_are_passed_literally(executor):
    marker = _owned_marker()
    words = _hostile(marker)
    result = executor.run(["printf", "%s\\0", *words])
    assert result.ok, result.stderr
    assert result.stdout.split("\0")[:-1] == words
    env = {f"HPCB_V{i}": word for i, word in enumerate(words)}
    for name, value in env.items():
        assert executor.run(["printenv", name], env=env).stdout == value + "\n"
    assert not executor.exists(marker) and not os.path.exists(marker)


def test_hostile_cwd_and_remote_paths(executor, remote_dir, tmp_path):
    owned = f"owned-{uuid.uuid4().hex}"  # relative: a file name cannot hold "/"
    names = [
        f"dir with spaces; touch {owned}",
        f"$(touch {owned})",
        f"`touch {owned}`",
        "new\nline",
        "single'quote",
        'double"quote',
        "-starts-with-dash",
        "glob*?[x]",
    ]
    local = tmp_path / "payload"
    local.write_text("payload")
    for name in names:
        directory = f"{remote_dir}/{name}"
        executor.mkdir(directory)
        assert executor.exists(directory)
        assert executor.run(["pwd"], cwd=directory).stdout == f"{directory}\n"
        path = f"{directory}/{name}.txt"
        executor.write_text(path, name)
        assert executor.read_text(path) == name
        assert executor.run(["cat", path]).stdout == name
        executor.put(str(local), f"{directory}/{name}.bin")
        executor.get(f"{directory}/{name}.bin", str(tmp_path / "back"))
        assert (tmp_path / "back").read_text() == "payload"
    home = executor.run(["printenv", "HOME"]).stdout.strip()
    # An executed "touch owned-..." would create exactly that name in some cwd.
    found = executor.run(["find", remote_dir, home, "-maxdepth", "3", "-name", owned])
    assert found.ok and found.stdout == ""
    assert not executor.exists(f"{home}/{owned}") and not executor.exists(f"/tmp/{owned}")


# --------------------------------------------------------------------------- host keys


def test_unknown_host_key_is_refused_with_a_helpful_message(server, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    marker = _owned_marker()
    ex = make_executor(server, known_hosts=str(empty))
    with pytest.raises(HostKeyError) as caught:
        ex.run(["touch", marker])
    message = str(caught.value)
    assert f"ssh-keyscan -p {server.port} {server.host} >> {empty}" in message
    assert "HPCBRIDGE_SSH_ACCEPT_NEW_HOST_KEYS=1" in message
    assert f"[{server.host}]:{server.port}" in message
    assert ex.connection_count == 0 and not ex.is_connected
    assert empty.read_text() == ""
    assert not os.path.exists(marker)


def test_accept_new_adds_the_key(server, tmp_path):
    known = tmp_path / "sub" / "known_hosts"  # neither file nor folder exist yet
    with make_executor(server, known_hosts=str(known), accept_new_host_keys=True) as ex:
        assert ex.run(["echo", "hi"]).stdout == "hi\n"
    recorded = known.read_text().split()
    reference = Path(server.known_hosts).read_text().split()
    assert recorded[0] == f"[{server.host}]:{server.port}"
    assert recorded[1:3] == reference[1:3]  # the very key the server presents
    # Now known: a strict executor accepts it, and nothing new is appended.
    with make_executor(server, known_hosts=str(known)) as ex:
        assert ex.run(["true"]).ok
    assert known.read_text().split() == recorded


@pytest.fixture(scope="module")
def second_server(server):
    """A second sshd instance with its own host key, on a free port; purged afterwards."""
    if os.geteuid() != 0:
        pytest.skip("starting a second sshd instance needs root (containers/sshd/start.sh)")
    state = f"/tmp/hpcbridge-sshd-test-{uuid.uuid4().hex[:10]}"
    port = _free_port()
    env = {"HPCBRIDGE_SSHD_PORT": str(port)}
    second = Server(
        server.host,
        port,
        server.user,
        f"{state}/id_ed25519",
        f"{state}/known_hosts",
        f"{state}/ssh_config",
        state,
    )
    try:
        _sshd_script(second, "start.sh", **env)
        yield second
    finally:
        _sshd_script(second, "stop.sh", "--purge")


@pytest.mark.parametrize("accept_new", [False, True])
def test_changed_host_key_is_refused_and_nothing_runs(server, second_server, tmp_path, accept_new):
    # Record the FIRST instance's key for the second instance's address.
    _, key_type, blob = Path(server.known_hosts).read_text().split()[:3]
    forged = tmp_path / "known_hosts"
    forged.write_text(f"[{second_server.host}]:{second_server.port} {key_type} {blob}\n")
    before = forged.read_text()
    marker = _owned_marker()
    ex = make_executor(second_server, known_hosts=str(forged), accept_new_host_keys=accept_new)
    with pytest.raises(HostKeyError) as caught:
        ex.run(["touch", marker])
    assert "CHANGED" in str(caught.value)
    assert f"ssh-keygen -R '[{second_server.host}]:{second_server.port}'" in str(caught.value)
    assert forged.read_text() == before  # accept-new never replaces a key
    assert ex.connection_count == 0
    assert not os.path.exists(marker)
    # Sanity: with the right key the second server works.
    with make_executor(second_server, known_hosts=second_server.known_hosts) as good:
        assert good.run(["echo", "ok"]).stdout == "ok\n"


# --------------------------------------------------------------------------- failures to connect


def test_connection_refused_fails_fast(server):
    ex_port = _free_port()
    ex = SSHExecutor(server.host, server.user, ex_port, server.key, ssh_config_path=os.devnull)
    started = time.monotonic()
    with pytest.raises(TransportError) as caught:
        ex.run(["true"])
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert "refused" in message and str(ex_port) in message
    assert "\n" not in message
    assert ex.connection_count == 0


def test_unresolvable_host_fails_fast():
    ex = SSHExecutor("no-such-host.invalid", "u", 22, ssh_config_path=os.devnull)
    started = time.monotonic()
    with pytest.raises(TransportError, match="cannot resolve"):
        ex.run(["true"])
    assert time.monotonic() - started < 20


def test_authentication_failure_is_clear_and_leaks_nothing(server, tmp_path, caplog):
    key = tmp_path / "stranger"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
        check=True,
        timeout=30,
    )
    secret_lines = [line for line in key.read_text().splitlines() if "PRIVATE KEY" not in line]
    config = tmp_path / "ssh_config"
    # IdentitiesOnly: keys from an agent or ~/.ssh must not rescue the login.
    config.write_text(
        f"""Host stranger
    HostName {server.host}
    Port {server.port}
    User {server.user}
    IdentityFile {key}
    IdentitiesOnly yes
    UserKnownHostsFile {server.known_hosts}
"""
    )
    caplog.set_level("DEBUG", logger="hpcbridge")
    ex = SSHExecutor("stranger", ssh_config_path=str(config))
    assert ex.target.hop.identities_only
    started = time.monotonic()
    with pytest.raises(TransportError) as caught:
        ex.run(["true"])
    assert time.monotonic() - started < 15
    message = str(caught.value)
    assert "authentication" in message and "\n" not in message
    assert ex.connection_count == 0
    for line in secret_lines:
        assert line not in message and line not in caplog.text


def test_no_key_anywhere_says_what_to_set(server, tmp_path, monkeypatch):
    """No key file, no agent, no ~/.ssh/id_*: paramiko says only "No authentication methods
    available"; the error names what to set, at once (issue 46, item 8)."""
    monkeypatch.setenv("HOME", str(tmp_path))  # an empty ~/.ssh
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    ex = SSHExecutor(
        server.host,
        server.user,
        server.port,
        known_hosts=server.known_hosts,
        ssh_config_path=os.devnull,
    )
    started = time.monotonic()
    with pytest.raises(TransportError) as caught:
        ex.run(["true"])
    message = str(caught.value)
    assert "HPCBRIDGE_SSH_KEY" in message and "ssh-agent" in message, message
    assert "~/.ssh/id_" in message
    assert time.monotonic() - started < 15  # refused once, not retried


# --------------------------------------------------------------------------- timeouts


def test_timeout_kills_the_remote_command(executor, server):
    """The caller is told at the budget, and the remote command ends too (on both
    backends: test_openssh_transport runs this case)."""
    tag = f"29.{uuid.uuid4().int % 10**6:06d}"
    executor.run(["true"])  # connected (the case may run first)
    count = getattr(executor, "connection_count", None)  # paramiko's: no new connection
    started = time.monotonic()
    with pytest.raises(JobTimeoutError, match="within 1 s"):
        executor.run(["sleep", tag], timeout=1)
    assert time.monotonic() - started < 5
    pattern = f"^sleep {re.escape(tag)}$"
    for _ in range(50):
        left = executor.run(["pgrep", "-u", server.user, "-f", pattern])
        if left.returncode == 1:
            break
        time.sleep(0.1)
    assert left.returncode == 1, f"remote sleep survived: {left.stdout}"
    assert executor.run(["echo", "still here"]).stdout == "still here\n"
    assert getattr(executor, "connection_count", None) == count


# --------------------------------------------------------------------------- reconnects


def test_reconnect_after_sshd_restart(executor, server, caplog):
    assert executor.run(["true"]).ok
    count = executor.connection_count
    old_transport = executor.transport
    _sshd_script(server, "restart.sh")
    caplog.set_level("INFO", logger="hpcbridge.ssh")
    assert executor.run(["echo", "back"]).stdout == "back\n"
    assert executor.connection_count == count + 1
    assert executor.open_connections == 1 and executor.transport is not old_transport
    assert not old_transport.is_active()
    assert any("reconnected" in r.getMessage() for r in caplog.records if r.levelname == "INFO")


def test_only_the_program_name_is_logged(executor, caplog):
    caplog.set_level("DEBUG", logger="hpcbridge.ssh")
    secret = f"token-{uuid.uuid4().hex}"
    assert executor.run(["echo", secret], env={"API_TOKEN": secret}).ok
    assert any("run echo on" in r.getMessage() for r in caplog.records)
    assert secret not in caplog.text


def test_restart_keeping_sessions_needs_no_reconnect(executor, server):
    assert executor.run(["true"]).ok
    count = executor.connection_count
    _sshd_script(server, "restart.sh", "--keep-sessions")
    assert executor.run(["echo", "same"]).stdout == "same\n"
    assert executor.connection_count == count
    # The kept session no longer belongs to the new listener (a later restart.sh
    # would not end it): start afresh for the tests below.
    executor.close()


def test_idempotent_command_survives_a_restart_in_flight(executor, server):
    assert executor.run(["true"]).ok
    count = executor.connection_count
    outcome = {}

    def work():
        try:
            outcome["result"] = executor.run(["sh", "-c", "sleep 1; echo done"])
        except Exception as exc:  # pragma: no cover - reported below
            outcome["error"] = exc

    worker = threading.Thread(target=work)
    worker.start()
    time.sleep(0.3)
    _sshd_script(server, "restart.sh")
    worker.join(60)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"].stdout == "done\n"
    assert executor.connection_count > count


def _drop_soon(executor, delay):
    """Close the live connection from another thread after ``delay`` s."""
    transport = executor.transport
    assert transport is not None and transport.is_active()
    timer = threading.Timer(delay, transport.close)
    timer.start()
    return timer


def test_dropped_submission_is_uncertain_and_never_rerun(executor, remote_dir):
    path = f"{remote_dir}/submissions.log"
    assert executor.run(["true"]).ok
    count = executor.connection_count
    timer = _drop_soon(executor, 0.5)
    with pytest.raises(SubmissionUncertainError, match="may or may not"):
        executor.run(["sh", "-c", f"sleep 2; echo x >> {shlex.quote(path)}"], idempotent=False)
    timer.join()
    time.sleep(2.5)  # let a surviving remote command finish
    lines = executor.read_text(path).splitlines() if executor.exists(path) else []
    assert len(lines) <= 1
    assert executor.connection_count == count + 1  # the read above reconnected


def test_dropped_idempotent_command_is_retried(executor):
    assert executor.run(["true"]).ok
    count = executor.connection_count
    timer = _drop_soon(executor, 0.3)
    result = executor.run(["sh", "-c", "sleep 1; echo ok"])
    timer.join()
    assert result.stdout == "ok\n"
    assert executor.connection_count == count + 1


def test_sftp_recovers_from_a_dropped_connection(executor, remote_dir):
    executor.write_text(f"{remote_dir}/before-drop", "1")
    executor.transport.close()
    assert executor.read_text(f"{remote_dir}/before-drop") == "1"
    assert executor.is_connected


# --------------------------------------------------------------------------- concurrency


def test_eight_threads_share_one_connection(server, remote_dir):
    ex = make_executor(server)
    seen_transports = set()
    seen_lock = threading.Lock()

    def worker(index):
        for step in range(100):
            result = ex.run(["echo", f"{index}-{step}"])
            assert result.ok and result.stdout == f"{index}-{step}\n", result
            if step % 10 == 5:
                # stdin: one command that reads it, one that exits without reading
                assert ex.run(["cat"], input=f"in-{index}").stdout == f"in-{index}"
                assert ex.run(["true"], input="ignored\n" * 1000).ok
            if step % 20 == 0:
                path = f"{remote_dir}/thread-{index}"
                ex.write_text(path, f"{index}-{step}")
                assert ex.read_text(path) == f"{index}-{step}"
            with seen_lock:
                seen_transports.add(id(ex.transport))
        return index

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            assert sorted(pool.map(worker, range(8))) == list(range(8))
        assert ex.connection_count == 1
        assert len(seen_transports) == 1 and ex.open_connections == 1
    finally:
        ex.close()
    assert not ex.is_connected


# --------------------------------------------------------------------------- ssh config


def test_ssh_config_alias(server):
    with SSHExecutor("hpcb-test", ssh_config_path=server.config) as ex:
        assert ex.host == f"{server.user}@{server.host}:{server.port}"
        assert ex.run(["id", "-un"]).stdout == f"{server.user}\n"


def test_proxyjump_chain_through_the_test_server(server, tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text(
        Path(server.config).read_text()
        + f"""
Host hpcb-jumped
    HostName {server.host}
    Port {server.port}
    User {server.user}
    IdentityFile {server.key}
    UserKnownHostsFile {server.known_hosts}
    ProxyJump hpcb-test,{server.user}@hpcb-test
"""
    )
    with SSHExecutor("hpcb-jumped", ssh_config_path=str(config)) as ex:
        assert [hop.alias for hop in ex.target.jumps] == ["hpcb-test", "hpcb-test"]
        result = ex.run(["sh", "-c", 'echo "$SSH_CONNECTION"'])
        assert result.ok, result.stderr
        remote_source_port = int(result.stdout.split()[1])
        clients = ex._connections.current.clients
        assert len(clients) == 3
        first_hop_port = clients[0].get_transport().sock.getsockname()[1]
        # The target saw the connection come from the jump host, not from us.
        assert remote_source_port != first_hop_port
        assert ex.read_text(server.known_hosts)  # SFTP through the chain too
        assert ex.connection_count == 1


def test_proxycommand(server, tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text(
        f"""Host hpcb-proxied
    HostName {server.host}
    Port {server.port}
    User {server.user}
    IdentityFile {server.key}
    UserKnownHostsFile {server.known_hosts}
    ProxyCommand ssh -F {server.config} -W %h:%p hpcb-test
"""
    )
    with SSHExecutor("hpcb-proxied", ssh_config_path=str(config)) as ex:
        assert ex.target.proxy_command and ex.target.jumps == ()
        assert ex.run(["echo", "via proxy"]).stdout == "via proxy\n"
        assert ex.exists(server.known_hosts)


def test_file_times_to_the_nanosecond(executor, remote_dir):
    """SFTP gives whole seconds; stat_many's times are the files' own (one ``stat``)."""
    folder = f"{remote_dir}/times"
    executor.mkdir(folder)
    stamps = {f"{folder}/a.exit": "1700000000.123456789", f"{folder}/b c.exit": "1700000001.5"}
    for path, stamp in stamps.items():
        executor.write_text(path, "0 +0.01\n")
        assert executor.run(["touch", "-d", f"@{stamp}", "--", path]).ok
    found = executor.stat_many([*stamps, f"{folder}/missing.exit", f"{remote_dir}/none/x"])
    assert found == {path: float(stamp) for path, stamp in stamps.items()}
