"""The OpenSSH backend's pure part (transports/ssh/openssh_argv.py): the ssh command lines
(master, batch mode, host keys, explicit settings over the config), what ssh's exit and
words mean, and the remote file scripts - whose quoting a local ``sh`` checks, for any
name."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hpcbridge.errors import ConfigurationError
from hpcbridge.settings.config import Settings
from hpcbridge.transports.ssh import openssh_argv as argv_of
from hpcbridge.transports.ssh.executor import parse_mtimes

SETTINGS = settings(max_examples=60, deadline=None)

#: file names as a POSIX file system allows them (no "/", no NUL)
_names = st.text(
    st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)), min_size=1
).filter(lambda name: name not in (".", ".."))

RESOLVED = argv_of.Resolved("alice", "login.example.org", 22, None, None)


def _options(argv):
    """The ``-o`` options of an argv, as a dict (the first of a name wins, as in ssh)."""
    found = {}
    for flag, value in zip(argv, argv[1:]):
        if flag == "-o":
            name, _, setting = value.partition("=")
            found.setdefault(name, setting)
    return found


def _plan(reach=None, resolved=RESOLVED, persist=None):
    return argv_of.plan(
        reach or argv_of.Reach("cluster"), resolved, "/run/user/1/hpcbridge/hpcb-%C", persist
    )


def test_every_command_rides_the_master_in_batch_mode_and_verifies_host_keys():
    argv = argv_of.command_argv(_plan(), "echo hi")
    options = _options(argv)
    assert options["ControlMaster"] == "auto"
    assert options["ControlPath"] == "/run/user/1/hpcbridge/hpcb-%C"
    assert options["ControlPersist"] == argv_of.DEFAULT_PERSIST
    assert options["BatchMode"] == "yes"
    assert options["StrictHostKeyChecking"] == "yes"
    assert argv[-3:] == ["--", "cluster", "echo hi"]  # the remote command is one word


def test_only_login_may_prompt():
    argv = argv_of.login_argv(_plan())
    assert _options(argv)["BatchMode"] == "no"
    assert _options(argv)["ControlMaster"] == "auto"
    for operation in ("check", "exit"):
        asked = argv_of.control_argv(_plan(), operation)
        assert _options(asked)["BatchMode"] == "yes"
        assert asked[-4:] == ["-O", operation, "--", "cluster"]
    with pytest.raises(ValueError):
        argv_of.control_argv(_plan(), "forward")


def test_the_users_own_control_path_and_persist_win_over_ours_and_the_setting_over_both():
    theirs = argv_of.Resolved("alice", "h", 22, "/home/alice/.ssh/cm-abc", "600")
    plan = _plan(resolved=theirs)
    assert (plan.control_path, plan.persist) == ("/home/alice/.ssh/cm-abc", "600")
    assert _plan(resolved=theirs, persist="2h").persist == "2h"


def test_explicit_settings_win_as_options_and_accept_new_only_when_asked():
    reach = argv_of.Reach(
        "cluster",
        user="bob",
        port=2200,
        keys=("/k/one", "/k/two"),
        known_hosts="/k/known",
        accept_new_host_keys=True,
    )
    argv = argv_of.command_argv(_plan(reach), "true")
    options = _options(argv)
    assert (options["User"], options["Port"], options["UserKnownHostsFile"]) == (
        "bob",
        "2200",
        "/k/known",
    )
    assert [argv[i + 1] for i, word in enumerate(argv) if word == "-o"].count(
        "IdentityFile=/k/two"
    ) == 1
    assert options["StrictHostKeyChecking"] == "accept-new"
    # Given before the destination, so they win over ~/.ssh/config (ssh: the first value wins).
    assert argv.index("--") > max(i for i, word in enumerate(argv) if word == "-o")


def test_ssh_g_gives_the_label_and_the_users_control_path():
    text = (
        "host cluster\nuser alice\nhostname 10.0.0.5\nport 2222\n"
        "controlpath /home/alice/.ssh/cm-4f8e\ncontrolpersist 600\n"
    )
    resolved = argv_of.parse_ssh_g(text)
    assert resolved.label == "alice@10.0.0.5:2222"
    assert (resolved.control_path, resolved.control_persist) == ("/home/alice/.ssh/cm-4f8e", "600")
    bare = argv_of.parse_ssh_g("user a\nhostname h\nport 22\ncontrolpersist no\n")
    assert (bare.control_path, bare.control_persist) == (None, None)


def test_a_host_ssh_would_read_as_an_option_is_refused():
    for host in ("-oProxyCommand=touch x", "a b", "", "x\ny"):
        with pytest.raises(ConfigurationError):
            argv_of.check_destination(host)
    assert argv_of.check_destination(" user@login ") == "user@login"
    with pytest.raises(ConfigurationError):
        argv_of.option_words([("User", "a\nProxyCommand x")])


def test_the_socket_folder_is_short_and_private():
    assert argv_of.default_control_dir({"XDG_RUNTIME_DIR": "/run/user/7"}, "/h") == (
        "/run/user/7/hpcbridge"
    )
    assert argv_of.default_control_dir({}, "/home/a") == "/home/a/.ssh"
    with pytest.raises(ConfigurationError, match="XDG_RUNTIME_DIR"):
        argv_of.control_path_template("/" + "x" * 60)


@pytest.mark.parametrize(
    "stderr, kind",
    [
        ("alice@h: Permission denied (keyboard-interactive).", argv_of.NEEDS_LOGIN),
        ("alice@h: Permission denied (publickey,password).", argv_of.NEEDS_LOGIN),
        ("alice@h: Permission denied (publickey).", argv_of.NEEDS_LOGIN),
        ("Host key verification failed.", argv_of.HOST_KEY),
        ("ssh: connect to host h port 22: Connection refused", argv_of.NOT_SENT),
        ("ssh: Could not resolve hostname nowhere: Name or service not known", argv_of.NOT_SENT),
        ("Connection to h closed by remote host.", argv_of.DROPPED),
        ("client_loop: send disconnect: Broken pipe", argv_of.DROPPED),
        ("my own words", argv_of.COMMAND),
    ],
)
def test_ssh_failures_are_told_from_the_commands_own_255(stderr, kind):
    assert argv_of.classify(255, stderr) == kind
    assert argv_of.classify(1, stderr) == argv_of.COMMAND


def test_a_local_ssh_killed_by_a_signal_is_a_dropped_connection():
    # subprocess's negative status: the command may have run, whatever stderr holds
    assert argv_of.classify(-9, "") == argv_of.DROPPED
    assert argv_of.classify(-15, "my own words") == argv_of.DROPPED


def test_an_unknown_backend_is_refused_naming_the_choices():
    assert Settings.from_env({"HPCBRIDGE_SSH_BACKEND": "OpenSSH"}).ssh_backend == "openssh"
    assert Settings.from_env({}).ssh_backend == "paramiko"
    with pytest.raises(ConfigurationError, match="paramiko, openssh"):
        Settings.from_env({"HPCBRIDGE_SSH_BACKEND": "libssh"})


# ---------------------------------------------------------------- quoting, by a real sh


def _sh(script, cwd, stdin=b""):
    return subprocess.run(
        ["sh", "-c", script],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env={"HOME": str(cwd), "PATH": os.environ["PATH"], "LC_ALL": "C"},
        check=False,
    )


@SETTINGS
@given(name=_names)
@example(name="$(touch owned)")
@example(name="-n")
@example(name="~")
@example(name="new\nline 'q' \"d\" `x` *")
def test_a_path_is_one_word_whatever_its_name(tmp_path_factory, name):
    where = tmp_path_factory.mktemp("sh")
    said = _sh("printf %s " + argv_of.path_word(name), where)
    expected = str(where) if name == "~" else ("./" + name if name.startswith("-") else name)
    assert said.stdout.decode("utf-8", "surrogateescape") == expected
    assert sorted(os.listdir(where)) == []


@SETTINGS
@given(name=_names, data=st.binary(max_size=300), mode=st.sampled_from([0o600, 0o644, 0o751]))
@example(name="-x; touch owned", data=b"\0\n", mode=0o600)
def test_write_then_read_round_trip_any_name_and_bytes(tmp_path_factory, name, data, mode):
    where = tmp_path_factory.mktemp("files")
    path = name if name != "~" else "./~"
    written = _sh(argv_of.write_script(path, "t0", mode, len(data)), where, data)
    assert written.returncode == 0, written.stderr
    target = where / path
    assert target.read_bytes() == data and (target.stat().st_mode & 0o777) == mode
    assert os.listdir(where) == [os.path.basename(path)]  # no temporary left, nothing owned
    read = _sh(argv_of.read_script(path), where)
    assert (read.returncode, read.stdout) == (0, data)
    assert argv_of.parse_mode(read.stderr.decode()) == mode
    assert _sh(argv_of.exists_script(path), where).returncode == 0


def test_a_short_write_is_refused_and_leaves_nothing(tmp_path):
    done = _sh(argv_of.write_script("f", "t1", 0o644, 10), tmp_path, b"12345")
    assert done.returncode != 0 and os.listdir(tmp_path) == []


def test_reading_a_missing_file_or_a_folder_says_which(tmp_path):
    assert _sh(argv_of.read_script("none"), tmp_path).returncode == argv_of.MISSING
    assert _sh(argv_of.exists_script("none"), tmp_path).returncode != 0
    (tmp_path / "d").mkdir()
    assert _sh(argv_of.read_script("d"), tmp_path).returncode == argv_of.DIRECTORY


def test_mkdir_makes_parents_with_the_mode(tmp_path):
    assert _sh(argv_of.mkdir_script("a b/$(x)/c", 0o700), tmp_path).returncode == 0
    assert ((tmp_path / "a b" / "$(x)" / "c").stat().st_mode & 0o777) == 0o700
    assert os.listdir(tmp_path) == ["a b"]


@SETTINGS
@given(text=st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",))))
@example(text="'; touch owned; echo '")
def test_a_bounded_command_is_the_same_command_its_words_stdin_and_exit_status(
    tmp_path_factory, text
):
    where = tmp_path_factory.mktemp("bounded")
    command = f"printf %s {shlex.quote(text)}; cat; exit 3"
    done = _sh(argv_of.bounded(command, 30), where, b"from stdin")
    expected = text.encode("utf-8", "surrogateescape") + b"from stdin"
    assert (done.returncode, done.stdout) == (3, expected), done.stderr
    assert os.listdir(where) == []
    assert argv_of.bounded(command, None) == command


def test_a_bounded_command_past_its_budget_ends_with_its_children(tmp_path):
    """``timeout`` ends the command's whole process group, a child in the background
    too, as sshd's "signal" (the paramiko backend's) does."""
    script = "sleep 60 & echo $! > child; sleep 60"
    done = _sh(argv_of.bounded(script, 0.2), tmp_path)
    assert done.returncode == argv_of.TIMED_OUT, done.stderr
    child = int((tmp_path / "child").read_text())
    for _ in range(100):  # the group was sent TERM; the child is gone once reaped
        if not Path(f"/proc/{child}").exists() or "Z" in _state(child):
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists() or "Z" in _state(child)


def _state(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


@SETTINGS
@given(st.text())
def test_ssh_output_of_any_text_never_raises(text):
    argv_of.classify(255, text)
    argv_of.ssh_words(text)
    argv_of.parse_mode(text)
    parse_mtimes(text, ["/a"], exact=False)
    try:
        argv_of.parse_ssh_g(text)
    except ConfigurationError:
        pass


_hosts = st.text(
    st.characters(blacklist_categories=("Cs", "Zs", "Cc"), blacklist_characters="\0"), min_size=1
)


@SETTINGS
@given(host=_hosts, command=st.text(), user=st.none() | st.text(min_size=1))
def test_the_destination_and_the_remote_command_are_words_ssh_cannot_misread(host, command, user):
    try:
        destination = argv_of.check_destination(host)
    except ConfigurationError:
        assert (
            host.strip() == ""
            or host.strip().startswith("-")
            or any(ch.isspace() for ch in host.strip())
        )
        return
    plain = user and "\n" not in user and "\0" not in user  # others: refused (tested above)
    reach = argv_of.Reach(destination, user=user if plain else None)
    argv = argv_of.command_argv(_plan(reach), command)
    assert argv[-3:] == ["--", destination, command]  # after "--": never an option
    assert argv.count("--") >= 1 and argv.index("--") == len(argv) - 3
