"""OpenSSHExecutor without a network: the host resolved by ``ssh -G`` (the user's ssh
config honoured, the explicit settings over it), the label the paramiko backend gives the
same host, the user's ControlPath kept, hpcbridge's own short one otherwise, and the
factory choosing the backend from the settings."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from hpcbridge.errors import ConfigurationError
from hpcbridge.factory import build_executor
from hpcbridge.settings.config import Settings

pytestmark = pytest.mark.skipif(
    shutil.which("ssh") is None, reason="the OpenSSH client (ssh) is not installed"
)


@pytest.fixture
def tmp_path():
    """A short folder (a socket's path has a limit): pytest's own is too long."""
    folder = Path(tempfile.mkdtemp(prefix="hpcb-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _config(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "config"
    path.write_text("Host cluster\n    HostName 10.1.2.3\n    User alice\n    Port 2200\n" + extra)
    return str(path)


def _executor(tmp_path: Path, config: str, **settings: object):
    from hpcbridge.transports.ssh.openssh import OpenSSHExecutor

    made = Settings.from_env(
        {"HPCBRIDGE_TRANSPORT": "ssh", "HPCBRIDGE_SSH_HOST": "cluster"}, **settings
    )
    runtime = tmp_path / "run"
    runtime.mkdir(exist_ok=True)
    return OpenSSHExecutor.from_settings(
        made, ssh_config_path=config, environ={"XDG_RUNTIME_DIR": str(runtime)}
    )


def test_the_host_is_resolved_through_the_users_config_and_labelled_as_paramiko_does(tmp_path):
    executor = _executor(tmp_path, _config(tmp_path))
    assert executor.host == "alice@10.1.2.3:2200"
    assert executor.alias == "cluster"
    assert executor.reach == {"ssh_host": "cluster"}
    # No ControlPath of the user's: hpcbridge's, in a folder only the user can enter.
    assert executor.plan.control_path == str(tmp_path / "run" / "hpcbridge" / "hpcb-%C")
    folder = tmp_path / "run" / "hpcbridge"
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700


def test_explicit_settings_win_over_the_config(tmp_path):
    executor = _executor(tmp_path, _config(tmp_path), ssh_user="bob", ssh_port=2201)
    assert executor.host == "bob@10.1.2.3:2201"
    assert executor.reach == {"ssh_host": "cluster", "ssh_user": "bob", "ssh_port": 2201}


def test_the_users_control_path_and_persist_are_kept(tmp_path):
    extra = f"    ControlPath {tmp_path}/cm-%C\n    ControlPersist 600\n"
    executor = _executor(tmp_path, _config(tmp_path, extra))
    assert executor.plan.control_path.startswith(f"{tmp_path}/cm-")  # ssh -G expands %C
    assert len(executor.plan.control_path) == len(f"{tmp_path}/cm-") + 40
    assert executor.plan.persist == "600"
    assert not (tmp_path / "run" / "hpcbridge").exists()  # ours is not made


def test_a_host_the_config_cannot_resolve_is_a_configuration_error(tmp_path):
    broken = tmp_path / "broken"
    broken.write_text("Host cluster\n    NoSuchOption yes\n")
    with pytest.raises(ConfigurationError, match="ssh cannot resolve host 'cluster'"):
        _executor(tmp_path, str(broken))


def test_the_factory_chooses_the_backend(tmp_path, monkeypatch):
    from hpcbridge.transports.ssh.executor import SSHExecutor
    from hpcbridge.transports.ssh.openssh import OpenSSHExecutor

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    env = {
        "HPCBRIDGE_TRANSPORT": "ssh",
        "HPCBRIDGE_SSH_HOST": "10.9.9.9",
        "HPCBRIDGE_SSH_USER": "carol",
        "HPCBRIDGE_SSH_PORT": "2222",
    }
    chosen = build_executor(Settings.from_env({**env, "HPCBRIDGE_SSH_BACKEND": "openssh"}))
    assert isinstance(chosen, OpenSSHExecutor) and chosen.host == "carol@10.9.9.9:2222"
    default = build_executor(Settings.from_env(env))
    assert isinstance(default, SSHExecutor) and default.host == chosen.host  # records match


def _fake_ssh(tmp_path: Path, body: str, **options: object):
    """An OpenSSHExecutor whose ``ssh`` is a script: ``ssh -G`` the real one, the rest
    ``body`` (POSIX shell)."""
    from hpcbridge.transports.ssh.openssh import OpenSSHExecutor

    fake = tmp_path / "ssh"
    fake.write_text('#!/bin/sh\ncase " $* " in *" -G "*) exec ssh "$@" ;; esac\n' + body)
    fake.chmod(0o755)
    runtime = tmp_path / "run"
    runtime.mkdir()
    return OpenSSHExecutor(
        "cluster",
        ssh_config_path=_config(tmp_path),
        ssh_command=str(fake),
        environ={"XDG_RUNTIME_DIR": str(runtime)},
        **options,
    )


def test_a_submission_whose_local_ssh_is_killed_is_uncertain_and_not_sent_again(tmp_path):
    """The local ssh of one command killed (the master stays up): the command may have
    run, so a submission is not sent again and says so; a question is asked again."""
    from hpcbridge.errors import SubmissionUncertainError, TransportError

    runs = tmp_path / "runs"
    executor = _fake_ssh(tmp_path, f"echo run >> {runs}\nkill -KILL $$\n", retry_budget=1.0)
    with pytest.raises(SubmissionUncertainError, match="dropped while sbatch was running"):
        executor.run(["sbatch", "job.sh"], idempotent=False)
    assert runs.read_text().count("run") == 1
    with pytest.raises(TransportError, match="killed by SIGKILL") as asked:
        executor.run(["squeue"])
    assert not isinstance(asked.value, SubmissionUncertainError)
    assert runs.read_text().count("run") >= 3  # squeue asked again within the retry budget


def test_a_silent_255_is_a_dropped_connection_only_when_the_master_is_gone(tmp_path):
    """ssh whose master went away mid-command exits 255 saying nothing (OpenSSH 9.2: the
    master killed under a running command), as a command that exits 255 itself does:
    the master, asked, tells them apart."""
    from hpcbridge.errors import SubmissionUncertainError

    master_up = tmp_path / "master-up"
    executor = _fake_ssh(
        tmp_path,
        'case " $* " in *" -O "*) [ -e ' + str(master_up) + " ] && exit 0\n"
        '    echo "Control socket connect(x): No such file or directory" >&2; exit 255 ;; esac\n'
        "exit 255\n",
    )
    master_up.touch()
    assert executor.run(["sbatch", "job.sh"], idempotent=False).returncode == 255  # its own
    master_up.unlink()
    with pytest.raises(SubmissionUncertainError, match="master connection went away"):
        executor.run(["sbatch", "job.sh"], idempotent=False)
