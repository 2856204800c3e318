"""SSHExecutor without a server: command lines, ssh config, host-key policy, retry logic."""

from __future__ import annotations

import errno
import os
import shlex
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from hpcbridge.errors import (
    ConfigurationError,
    HostKeyError,
    JobSubmissionError,
    SubmissionUncertainError,
    TransportError,
)
from hpcbridge.settings.config import Settings
from hpcbridge.transports.base import CommandResult, Executor
from hpcbridge.transports.local import LocalExecutor
from hpcbridge.transports.ssh.config import known_hosts_name, parse_jump, resolve, split_jumps
from hpcbridge.transports.ssh.connect import ConnectionDropped, Permanent, is_connection_error
from hpcbridge.transports.ssh.executor import SSHExecutor, build_command
from hpcbridge.transports.ssh.hostkeys import HostKeyPolicy, fingerprint

# --------------------------------------------------------------------------- helpers


def marker_path() -> str:
    return f"/tmp/owned-{uuid.uuid4().hex}"


def hostile_strings(marker: str) -> list:
    return [
        f"; touch {marker}",
        f"$(touch {marker})",
        f"`touch {marker}`",
        f"'; touch {marker}; '",
        f'"; touch {marker}; "',
        f"\ntouch {marker}\n",
        f"a && touch {marker} || touch {marker}",
        f"| touch {marker}",
        f"> {marker}",
        "two  spaces\tand tab",
        "it's",
        'say "hi"',
        "back\\slash\\n",
        "$HOME ${PATH} $0 $$",
        "*",
        "~",
        "~/x",
        "-n",
        "--",
        "",
        "naïve ünïcödé ✓",
        "!bang #hash %pct &amp",
    ]


def sh(command: str, **kwargs) -> subprocess.CompletedProcess:
    """Run a remote-style command line under a local /bin/sh, as sshd would."""
    return subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, check=False, timeout=20, **kwargs
    )


# --------------------------------------------------------------------------- import hygiene


def test_importing_the_module_does_not_import_paramiko():
    code = textwrap.dedent(
        """
        import sys
        import hpcbridge.transports.ssh
        import hpcbridge
        hpcbridge.SSHExecutor  # the lazy re-export resolves without paramiko too
        from hpcbridge.transports.ssh import SSHExecutor
        from hpcbridge.transports.ssh.executor import build_command
        import os
        SSHExecutor("example.invalid", "u", 22, ssh_config_path=os.devnull)  # no network yet
        assert "paramiko" not in sys.modules, sorted(m for m in sys.modules if "paramiko" in m)
        print("clean")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "clean"


# --------------------------------------------------------------------------- command lines


def test_plain_argv_is_quoted_word_by_word():
    assert build_command(["squeue", "-j", "12"]) == "squeue -j 12"
    assert build_command(["echo", "a b"]) == "echo 'a b'"
    assert build_command(["echo", ""]) == "echo ''"


def test_hostile_argv_round_trips_through_shlex():
    marker = marker_path()
    argv = ["printf", "%s\\0", *hostile_strings(marker)]
    assert shlex.split(build_command(argv)) == argv


def test_hostile_argv_is_passed_literally_by_a_real_shell():
    marker = marker_path()
    words = hostile_strings(marker)
    result = sh(build_command(["printf", "%s\\0", *words]))
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode("utf-8").split("\0")[:-1] == words
    assert not os.path.exists(marker)


@pytest.mark.parametrize("word", hostile_strings("/tmp/owned-echo-check"))
def test_echo_prints_each_hostile_word_unchanged(word):
    marker = marker_path()
    word = word.replace("/tmp/owned-echo-check", marker)
    # echo may interpret "-n" or backslashes; printf %s is exact, echo proves no execution.
    result = sh(build_command(["echo", "X" + word]))
    assert result.returncode == 0
    assert result.stdout.decode("utf-8") == "X" + word + "\n" or "\\" in word
    assert not os.path.exists(marker)


def test_env_values_are_literal_and_names_validated():
    marker = marker_path()
    env = {f"V{i}": value for i, value in enumerate(hostile_strings(marker))}
    command = build_command(["env"], env=env)
    assert command.startswith("env ")
    words = shlex.split(command)
    assert words[0] == "env" and words[-1] == "env"
    assert words[1:-1] == [f"{k}={v}" for k, v in env.items()]
    result = sh(build_command(["printenv", "V0"], env=env))
    assert result.stdout.decode() == env["V0"] + "\n"
    for name, value in env.items():
        if "\n" in value:
            continue
        result = sh(build_command(["printenv", name], env=env))
        assert result.stdout.decode("utf-8") == value + "\n", name
    assert not os.path.exists(marker)


@pytest.mark.parametrize(
    "name", ["", "1A", "A B", "A;touch", "A=B", "$(id)", "A-B", "Ä", "A\nB", "PATH "]
)
def test_bad_env_names_are_refused(name):
    with pytest.raises(ValueError):
        build_command(["true"], env={name: "x"})


def test_env_cannot_turn_the_command_into_an_option_or_assignment():
    with pytest.raises(ValueError):
        build_command(["-i", "x"], env={"A": "1"})
    with pytest.raises(ValueError):
        build_command(["A=1", "x"], env={"A": "1"})


def test_nul_bytes_and_empty_argv_are_refused():
    with pytest.raises(ValueError):
        build_command([])
    with pytest.raises(ValueError):
        build_command(["echo", "a\0b"])
    with pytest.raises(ValueError):
        build_command(["true"], env={"A": "a\0b"})
    with pytest.raises(ValueError):
        build_command(["true"], cwd="")


def test_cwd_is_quoted_and_applied(tmp_path):
    owned = f"owned-{uuid.uuid4().hex}"  # a directory name cannot hold "/": relative marker
    names = [f"dir with spaces; touch {owned}", f"$(touch {owned})", "`touch x`", "new\nline"]
    for name in [*names, "qu'ote", '"dq"', "-dash"]:
        directory = tmp_path / name
        directory.mkdir()
        command = build_command(["pwd"], cwd=str(directory))
        assert command.startswith("cd -- ")
        result = sh(command, cwd=str(tmp_path))
        assert result.returncode == 0, result.stderr
        assert result.stdout.decode() == f"{directory}\n"
    assert not any(path.name in (owned, "x") for path in tmp_path.rglob("*"))


def test_a_dash_directory_is_not_an_option(tmp_path):
    (tmp_path / "-").mkdir()
    result = sh(build_command(["pwd"], cwd="-"), cwd=str(tmp_path))
    assert result.stdout.decode() == f"{tmp_path}/-\n"


def test_cwd_tilde_is_the_remote_home_and_nothing_else(tmp_path):
    home = tmp_path / "home"
    (home / "jobs dir").mkdir(parents=True)
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    assert build_command(["pwd"], cwd="~/jobs dir") == "cd -- \"$HOME\"/'jobs dir' && pwd"
    result = sh(build_command(["pwd"], cwd="~/jobs dir"), env=env)
    assert result.stdout.decode() == f"{home}/jobs dir\n"
    result = sh(build_command(["pwd"], cwd="~"), env=env)
    assert result.stdout.decode() == f"{home}\n"
    # Only a leading "~/" is special: "~user" or "a/~" stay literal.
    assert build_command(["pwd"], cwd="~other") == "cd -- './~other' && pwd"


def test_relative_cwd_ignores_cdpath(tmp_path):
    (tmp_path / "elsewhere" / "jobs").mkdir(parents=True)
    (tmp_path / "jobs").mkdir()
    env = {"CDPATH": str(tmp_path / "elsewhere"), "PATH": os.environ.get("PATH", "/bin")}
    result = sh(build_command(["pwd"], cwd="jobs"), cwd=str(tmp_path), env=env)
    assert result.stdout.decode() == f"{tmp_path}/jobs\n"


def test_env_and_cwd_together(tmp_path):
    command = build_command(["printenv", "A"], env={"A": "1 2"}, cwd=str(tmp_path))
    assert command == f"cd -- {shlex.quote(str(tmp_path))} && env 'A=1 2' printenv A"
    assert sh(command).stdout.decode() == "1 2\n"


def test_login_shell_wraps_everything_in_bash_l_c(tmp_path):
    marker = marker_path()
    words = hostile_strings(marker)
    inner = build_command(["printf", "%s\\0", *words], env={"A": "$(id)"}, cwd=str(tmp_path))
    command = build_command(
        ["printf", "%s\\0", *words], env={"A": "$(id)"}, cwd=str(tmp_path), login_shell=True
    )
    assert shlex.split(command) == ["bash", "-l", "-c", inner]
    result = subprocess.run(
        ["/bin/sh", "-c", command],
        capture_output=True,
        timeout=20,
        check=False,
        env={"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode("utf-8").split("\0")[:-1] == words
    assert not os.path.exists(marker)


def test_stdin_devnull_closes_stdin_without_an_ssh_eof(tmp_path):
    command = build_command(["cat"], cwd=str(tmp_path), stdin_devnull=True)
    assert command.endswith(" </dev/null")
    result = subprocess.run(
        ["/bin/sh", "-c", command], input=b"must not be read", capture_output=True, timeout=20
    )
    assert result.returncode == 0 and result.stdout == b""
    login = build_command(["cat"], login_shell=True, stdin_devnull=True)
    assert shlex.split(login) == ["bash", "-l", "-c", "cat", "</dev/null"]


# --------------------------------------------------------------------------- ssh config


@pytest.fixture
def ssh_config_file(tmp_path):
    key1 = tmp_path / "key1"
    key1.write_text("not really a key\n")
    jump_key = tmp_path / "jumpkey"
    jump_key.write_text("not really a key either\n")
    path = tmp_path / "config"
    path.write_text(
        textwrap.dedent(
            f"""\
            Host alias1
                HostName real.example.org
                User alice
                Port 2201
                IdentityFile {key1}
                IdentityFile {tmp_path}/does-not-exist
                IdentitiesOnly yes
                UserKnownHostsFile {tmp_path}/kh1 {tmp_path}/kh2
                GlobalKnownHostsFile /dev/null

            Host behind
                HostName node.internal
                User dave
                ProxyJump bob@bastion1:2202,bastion2

            Host bastion2
                HostName b2.example.org
                User carol
                Port 2203
                IdentityFile {jump_key}

            Host nojump
                HostName direct.example.org
                ProxyJump none

            Host proxied
                HostName p.example.org
                ProxyCommand ssh -W %h:%p gateway
            """
        )
    )
    return path


def test_alias_resolution(ssh_config_file, tmp_path):
    target = resolve("alias1", config_path=str(ssh_config_file))
    hop = target.hop
    assert (hop.alias, hop.hostname, hop.user, hop.port) == (
        "alias1",
        "real.example.org",
        "alice",
        2201,
    )
    assert hop.identity_files == (str(tmp_path / "key1"),)  # the missing one is skipped
    assert hop.identities_only is True
    assert hop.known_hosts_files == (str(tmp_path / "kh1"), str(tmp_path / "kh2"))
    assert hop.global_known_hosts_files == ("/dev/null",)
    assert hop.known_hosts_name == "[real.example.org]:2201"
    assert hop.label == "alice@real.example.org:2201"
    assert target.jumps == ()


def test_explicit_arguments_win_over_the_config(ssh_config_file, tmp_path):
    key = tmp_path / "explicit_key"
    key.write_text("x")
    target = resolve(
        "alias1",
        user="zed",
        port=2999,
        key_filename=str(key),
        known_hosts=str(tmp_path / "mine"),
        config_path=str(ssh_config_file),
    )
    hop = target.hop
    assert (hop.hostname, hop.user, hop.port) == ("real.example.org", "zed", 2999)
    assert hop.identity_files[0] == str(key)  # explicit key first, config key after
    assert hop.known_hosts_files == (str(tmp_path / "mine"),)


def test_user_at_host_argument(ssh_config_file):
    assert resolve("eve@alias1", config_path=str(ssh_config_file)).hop.user == "eve"
    assert resolve("eve@alias1", user="frank", config_path=str(ssh_config_file)).hop.user == (
        "frank"
    )


def test_proxyjump_chain(ssh_config_file, tmp_path):
    target = resolve("behind", config_path=str(ssh_config_file))
    assert target.hop.hostname == "node.internal" and target.hop.user == "dave"
    assert target.hop.port == 22
    first, second = target.jumps
    assert (first.hostname, first.user, first.port) == ("bastion1", "bob", 2202)
    assert (second.hostname, second.user, second.port) == ("b2.example.org", "carol", 2203)
    assert second.identity_files == (str(tmp_path / "jumpkey"),)
    assert [hop.hostname for hop in target.chain] == [
        "bastion1",
        "b2.example.org",
        "node.internal",
    ]
    assert resolve("nojump", config_path=str(ssh_config_file)).jumps == ()


def test_proxycommand_is_kept(ssh_config_file):
    target = resolve("proxied", config_path=str(ssh_config_file))
    assert target.proxy_command == "ssh -W p.example.org:22 gateway"


def test_unknown_alias_falls_through_to_the_name(ssh_config_file):
    hop = resolve("plain.example.net", config_path=str(ssh_config_file)).hop
    assert hop.hostname == "plain.example.net" and hop.port == 22


def test_no_config_file(tmp_path):
    hop = resolve("h.example.org", user="u", config_path=os.devnull).hop
    assert (hop.hostname, hop.user, hop.port) == ("h.example.org", "u", 22)
    assert hop.known_hosts_files == (os.path.expanduser("~/.ssh/known_hosts"),)
    with pytest.raises(ConfigurationError):
        resolve("h", config_path=str(tmp_path / "missing-config"))


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("host", (None, "host", None)),
        ("u@host", ("u", "host", None)),
        ("u@host:2222", ("u", "host", 2222)),
        ("host:22", (None, "host", 22)),
        ("[::1]:2200", (None, "::1", 2200)),
        ("u@[fe80::1]", ("u", "fe80::1", None)),
        ("ssh://u@host:2022", ("u", "host", 2022)),
    ],
)
def test_parse_jump(spec, expected):
    assert parse_jump(spec) == expected


@pytest.mark.parametrize("spec", ["", "u@", "host:abc", "host:99999", "a b"])
def test_parse_jump_rejects_garbage(spec):
    with pytest.raises(ConfigurationError):
        parse_jump(spec)


def test_split_jumps():
    assert split_jumps("a,b@c:1, d") == ["a", "b@c:1", "d"]
    assert split_jumps("none") == [] and split_jumps(None) == []


def test_known_hosts_name():
    assert known_hosts_name("h", 22) == "h"
    assert known_hosts_name("127.0.0.1", 2222) == "[127.0.0.1]:2222"


def test_missing_key_file_and_bad_host_are_configuration_errors(tmp_path):
    with pytest.raises(ConfigurationError, match="does not exist"):
        resolve("h", key_filename=str(tmp_path / "nokey"), config_path=os.devnull)
    with pytest.raises(ConfigurationError):
        resolve("", config_path=os.devnull)
    with pytest.raises(ConfigurationError):
        resolve("-oProxyCommand=evil", config_path=os.devnull)


# --------------------------------------------------------------------------- the executor object


def test_executor_label_and_protocol(ssh_config_file):
    executor = SSHExecutor("alias1", ssh_config_path=str(ssh_config_file))
    assert isinstance(executor, Executor)
    assert executor.kind == "ssh"
    assert executor.host == "alice@real.example.org:2201"
    assert executor.connection_count == 0 and executor.transport is None
    assert not executor.is_connected and executor.open_connections == 0
    executor.close()  # nothing open: fine
    assert "alice@real.example.org:2201" in repr(executor)


def test_is_local_says_whose_paths_and_processes_these_are():
    remote = SSHExecutor("h", "u", 22, ssh_config_path=os.devnull)
    local = LocalExecutor()
    assert remote.is_local is False and isinstance(remote, Executor)
    assert local.is_local is True and isinstance(local, Executor)
    assert "is_local" in Executor.__annotations__  # part of the documented protocol


def test_options_set_on_the_executor_reach_its_connection_commands_and_files():
    executor = SSHExecutor("h", "u", 22, ssh_config_path=os.devnull, max_reconnect_attempts=0)
    assert executor.max_reconnect_attempts == 1  # at least one attempt
    executor.default_timeout = None
    for part in (executor._connections, executor._commands.connections):
        assert part.options is executor  # read from the executor at each use


def test_from_settings_maps_every_ssh_setting(tmp_path):
    key = tmp_path / "k"
    key.write_text("x")
    settings = Settings.from_env(
        {
            "HPCBRIDGE_TRANSPORT": "ssh",
            "HPCBRIDGE_SSH_HOST": "login.example.org",
            "HPCBRIDGE_SSH_USER": "me",
            "HPCBRIDGE_SSH_PORT": "2022",
            "HPCBRIDGE_SSH_KEY": str(key),
            "HPCBRIDGE_SSH_KNOWN_HOSTS": str(tmp_path / "kh"),
            "HPCBRIDGE_SSH_ACCEPT_NEW_HOST_KEYS": "1",
            "HPCBRIDGE_SSH_LOGIN_SHELL": "yes",
            "HPCBRIDGE_COMMAND_TIMEOUT": "12.5",
        }
    )
    executor = SSHExecutor.from_settings(settings, ssh_config_path=os.devnull)
    assert executor.host == "me@login.example.org:2022"
    assert executor.target.hop.identity_files == (str(key),)
    assert executor.target.hop.known_hosts_files == (str(tmp_path / "kh"),)
    assert executor.accept_new_host_keys is True
    assert executor.login_shell is True
    assert executor.default_timeout == 12.5


def test_constructor_validates_default_env_names():
    with pytest.raises(ValueError):
        SSHExecutor("h", "u", 22, ssh_config_path=os.devnull, env={"BAD NAME": "x"})


# --------------------------------------------------------------------------- host-key policy


class _FakeClient:
    def __init__(self):
        paramiko = pytest.importorskip("paramiko")
        self.keys = paramiko.HostKeys()

    def get_host_keys(self):
        return self.keys


def _a_host_key():
    paramiko = pytest.importorskip("paramiko")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    private = ed25519.Ed25519PrivateKey.generate()
    text = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    import io

    return paramiko.Ed25519Key.from_private_key(io.StringIO(text))


def _hop(tmp_path, port):
    return resolve(
        "127.0.0.1",
        user="u",
        port=port,
        known_hosts=str(tmp_path / "sub" / "known_hosts"),
        config_path=os.devnull,
    ).hop


def test_unknown_host_key_is_refused_with_instructions(tmp_path):
    key = _a_host_key()
    hop = _hop(tmp_path, 2222)
    policy = HostKeyPolicy(hop, accept_new=False)
    with pytest.raises(HostKeyError) as caught:
        policy.missing_host_key(_FakeClient(), "[127.0.0.1]:2222", key)
    message = str(caught.value)
    assert f"ssh-keyscan -p 2222 127.0.0.1 >> {tmp_path}/sub/known_hosts" in message
    assert "HPCBRIDGE_SSH_ACCEPT_NEW_HOST_KEYS=1" in message
    assert fingerprint(key) in message
    assert not (tmp_path / "sub" / "known_hosts").exists()


@pytest.mark.parametrize("port, name", [(2222, "[127.0.0.1]:2222"), (22, "127.0.0.1")])
def test_accept_new_appends_an_openssh_line(tmp_path, port, name):
    key = _a_host_key()
    hop = _hop(tmp_path, port)
    client = _FakeClient()
    HostKeyPolicy(hop, accept_new=True).missing_host_key(client, name, key)
    lines = (tmp_path / "sub" / "known_hosts").read_text().splitlines()
    assert lines == [f"{name} ssh-ed25519 {key.get_base64()}"]
    assert client.keys.lookup(name)["ssh-ed25519"] == key
    # Appends (never rewrites), and copes with a missing final newline.
    path = tmp_path / "sub" / "known_hosts"
    path.write_text("other ssh-ed25519 AAAA")
    HostKeyPolicy(hop, accept_new=True).missing_host_key(_FakeClient(), name, key)
    assert path.read_text().splitlines() == [
        "other ssh-ed25519 AAAA",
        f"{name} ssh-ed25519 {key.get_base64()}",
    ]


def test_fingerprint_matches_openssh(tmp_path):
    key = _a_host_key()
    public = tmp_path / "k.pub"
    public.write_text(f"ssh-ed25519 {key.get_base64()}\n")
    result = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(public)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip("ssh-keygen not available")
    assert fingerprint(key) == result.stdout.split()[1]


# --------------------------------------------------------------------------- error classification


class _Transport:
    def __init__(self, active=True, failures=()):
        self.active = active
        self.failures = list(failures)
        self.opened = 0

    def is_active(self):
        return self.active

    def open_session(self, timeout=None):
        self.opened += 1
        if self.failures:
            raise self.failures.pop(0)
        return object()


def test_connection_error_classification():
    alive, dead = _Transport(True), _Transport(False)
    assert is_connection_error(EOFError(), alive)
    assert is_connection_error(OSError(errno.EPIPE, "broken pipe"), alive)
    assert is_connection_error(OSError(errno.ECONNRESET, "reset"), alive)
    assert is_connection_error(FileNotFoundError(errno.ENOENT, "x"), dead)
    assert not is_connection_error(FileNotFoundError(errno.ENOENT, "x"), alive)
    assert not is_connection_error(PermissionError(errno.EACCES, "x"), alive)
    assert not is_connection_error(OSError("Failure"), alive)
    paramiko = pytest.importorskip("paramiko")
    assert is_connection_error(paramiko.SSHException("Server connection dropped"))


# --------------------------------------------------------------------------- reconnect policy


class _Conn:
    def __init__(self, transport=None):
        self.transport = transport or _Transport()
        self.sftp = None
        self.closed = False

    def alive(self):
        return self.transport.is_active() and not self.closed

    def close(self):
        self.closed = True


@pytest.fixture
def fake(monkeypatch):
    """An executor whose connection opens are scripted and whose sleeps are recorded."""
    executor = SSHExecutor(
        "h.example.org",
        "u",
        22,
        ssh_config_path=os.devnull,
        max_reconnect_attempts=5,
        min_reconnect_interval=0.0,
    )
    executor.sleeps = []
    executor.opens = []
    executor.script = []  # items: an exception to raise, or a _Conn to return

    def fake_open(first):
        executor.opens.append(first)
        item = executor.script.pop(0) if executor.script else _Conn()
        if isinstance(item, BaseException):
            raise item
        return item

    monkeypatch.setattr(executor._connections, "opener", fake_open)
    # A clock of its own: a pause is recorded and moves it on, nothing waits.
    clock = [time.monotonic()]

    def sleep(seconds):
        executor.sleeps.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    return executor


def test_first_connect_fails_fast(fake):
    fake.script = [TransportError("cannot connect to u@h:22: connection refused")]
    with pytest.raises(TransportError, match="connection refused"):
        fake.connect()
    assert len(fake.opens) == 1 and fake.sleeps == []
    assert fake.connection_count == 0


def test_reconnect_backs_off_exponentially_then_succeeds(fake):
    fake.connect()
    assert fake.connection_count == 1
    fake.transport.active = False  # the connection died
    refused = TransportError("connection refused")
    fake.script = [refused, refused, refused, _Conn()]
    fake.connect()
    assert fake.connection_count == 2
    # Only the very first open may treat a name that does not resolve as permanent.
    assert fake.opens == [True, False, False, False, False]
    assert fake.sleeps == [0.5, 1.0, 2.0]


def test_reconnect_gives_up_after_max_attempts_with_capped_delays(fake):
    fake.max_reconnect_attempts = 8
    fake.connect()
    fake.transport.active = False
    fake.script = [TransportError("connection refused")] * 8
    with pytest.raises(TransportError, match="after 8 attempts"):
        fake.connect()
    assert fake.sleeps == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def test_permanent_errors_are_never_retried(fake):
    fake.connect()
    fake.transport.active = False
    fake.script = [Permanent(HostKeyError("HOST KEY CHANGED"))]
    with pytest.raises(HostKeyError, match="CHANGED"):
        fake.connect()
    assert len(fake.opens) == 2 and fake.sleeps == []


def test_a_refused_login_is_permanent_and_spent_reconnects_are_not(fake):
    # A wait rides out the second kind until its deadline; the first it raises at once.
    fake.connect()
    fake.transport.active = False
    fake.script = [TransportError("connection refused")] * 5
    with pytest.raises(TransportError, match="after 5 attempts") as spent:
        fake.connect()
    assert not spent.value.permanent
    fake.script = [Permanent(TransportError("authentication to u@h.example.org:22 failed"))]
    with pytest.raises(TransportError, match="authentication") as refused:
        fake.connect()
    assert refused.value.permanent


def test_minimum_interval_between_connection_opens(fake):
    fake.min_reconnect_interval = 5.0
    fake.connect()
    fake.transport.active = False
    fake.connect()
    assert len(fake.sleeps) == 1 and 4.0 < fake.sleeps[0] <= 5.0


def test_one_connection_is_shared(fake):
    fake.connect()
    first = fake.transport
    for _ in range(5):
        fake.connect()
    assert fake.transport is first and fake.connection_count == 1 and len(fake.opens) == 1


def _result(argv):
    return CommandResult(list(argv), 0, "ok\n", "")


def test_idempotent_command_is_retried_after_a_drop(fake, monkeypatch):
    calls = []

    def execute(channel, conn, argv, command, budget, input):
        calls.append(conn)
        if len(calls) == 1:
            conn.transport.active = False
            raise ConnectionDropped("gone")
        return _result(argv)

    monkeypatch.setattr(fake._commands, "execute", execute)
    assert fake.run(["squeue", "-j", "1"]).stdout == "ok\n"
    assert len(calls) == 2 and calls[0] is not calls[1]
    assert fake.connection_count == 2


def test_submission_is_never_run_twice_after_a_drop(fake, monkeypatch):
    calls = []

    def execute(channel, conn, argv, command, budget, input):
        calls.append(argv)
        conn.transport.active = False
        raise ConnectionDropped("gone")

    monkeypatch.setattr(fake._commands, "execute", execute)
    with pytest.raises(SubmissionUncertainError) as caught:
        fake.run(["sbatch", "job.sh"], idempotent=False)
    assert len(calls) == 1
    assert isinstance(caught.value, JobSubmissionError)
    assert caught.value.argv == ["sbatch", "job.sh"]
    assert "may or may not" in str(caught.value)


def test_submission_is_retried_when_the_channel_never_opened(fake, monkeypatch):
    calls = []
    broken = _Conn(_Transport(failures=[EOFError("connection lost")]))
    fake.script = [broken, _Conn()]

    def execute(channel, conn, argv, command, budget, input):
        calls.append(conn)
        return _result(argv)

    monkeypatch.setattr(fake._commands, "execute", execute)
    assert fake.run(["sbatch", "job.sh"], idempotent=False).ok
    assert len(calls) == 1 and calls[0] is not broken
    assert broken.closed and fake.connection_count == 2


def test_channel_refusals_are_retried_on_the_same_connection(fake, monkeypatch):
    paramiko = pytest.importorskip("paramiko")
    conn = _Conn(_Transport(failures=[paramiko.ChannelException(2, "Connect failed")]))
    fake.script = [conn]
    monkeypatch.setattr(fake._commands, "execute", lambda *args: _result(args[2]))
    assert fake.run(["true"], idempotent=False).ok
    assert conn.transport.opened == 2 and fake.connection_count == 1
    assert len(fake.sleeps) == 1


def test_a_command_that_keeps_dropping_gives_up(fake, monkeypatch):
    def execute(channel, conn, argv, command, budget, input):
        conn.transport.active = False
        raise ConnectionDropped("gone")

    monkeypatch.setattr(fake._commands, "execute", execute)
    with pytest.raises(TransportError, match="kept dropping"):
        fake.run(["squeue"])
    assert fake.connection_count == fake.max_reconnect_attempts


def test_exact_mtime_commands_quote_nothing_and_chunk() -> None:
    from hpcbridge.transports.ssh.executor import PATHS_PER_COMMAND, exact_mtime_commands

    paths = [f"/w/{index}.exit" for index in range(PATHS_PER_COMMAND + 1)] + ["/w/0.exit"]
    commands = exact_mtime_commands(paths)
    assert [len(argv) - 4 for argv in commands] == [PATHS_PER_COMMAND, 1]
    assert all(argv[:4] == ["stat", "-c", "%.9Y %n", "--"] for argv in commands)
    assert sorted(sum((argv[4:] for argv in commands), [])) == sorted(set(paths))


def test_parse_mtimes_keeps_only_exact_times_of_asked_paths() -> None:
    from hpcbridge.transports.ssh.executor import parse_mtimes

    text = (
        "1700000000.123456789 /w/a.exit\n"
        "1700000001.500000000 /w/b c.exit\n"
        "1700000002 /w/whole.exit\n"  # a stat without %.9Y
        "?Y /w/odd.exit\n"
        "1700000003.0 /w/not-asked\n"
    )
    asked = ["/w/a.exit", "/w/b c.exit", "/w/whole.exit", "/w/odd.exit"]
    assert parse_mtimes(text, asked) == {
        "/w/a.exit": 1700000000.123456789,
        "/w/b c.exit": 1700000001.5,
    }


def test_what_a_record_keeps_to_reach_the_host_again(tmp_path, monkeypatch):
    from hpcbridge.transports.ssh.config import reach_settings

    key = tmp_path / "id"
    key.write_text("not a real key\n")
    monkeypatch.chdir(tmp_path)
    # an alias alone stays an alias: the ssh config resolves it again
    assert reach_settings("cluster", None, None, None, None, False) == {"ssh_host": "cluster"}
    assert reach_settings("h", "me", 2222, "id", "~/kh", True) == {
        "ssh_host": "h",
        "ssh_user": "me",
        "ssh_port": 2222,
        "ssh_key": str(key),
        "ssh_known_hosts": os.path.expanduser("~/kh"),
        "ssh_login_shell": True,
    }
