"""A Slurm job submitted over SSH is followed from a new shell: one that has none of
the SSH settings the submission had (issue 32 point 5).

The job record keeps how its host was reached - the host as given (an ssh-config
alias stays one) and the key and known-hosts files given explicitly - so
``status``, ``wait``, ``logs`` and ``--host ALIAS`` reach it again.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest

from tests.support.cli import hpcbridge_in, stoppable
from tests.support.places import ssh_env
from tests.support.slurm_clusters import TARGETS, cluster_for
from tests.support.ssh import Server, alias_entry

pytestmark = [pytest.mark.slurm, pytest.mark.ssh]

REPO = Path(__file__).resolve().parents[2]
ALIAS = "hpcb-test"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    """Debian's 22.05, whose commands the SSH test user runs."""
    yield from cluster_for(TARGETS["22.05-cli"])


def _new_shell(tmp_path: Path, cluster: Dict[str, str]) -> Dict[str, str]:
    """A shell of the same user with no HPCBRIDGE_ setting but the site's command
    environment (where the cluster's slurm.conf is) and the store."""
    dropped = ("HPCBRIDGE_", "EXAMLOPS_", "SLURM_", "FLUX_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True, mode=0o700)
    env.update(
        HOME=str(home),
        HPCBRIDGE_STATE_DIR=str(tmp_path / "state"),
        HPCBRIDGE_COMMAND_ENV=f"SLURM_CONF={cluster['SLURM_CONF']}",
        HPCBRIDGE_MIN_POLL_INTERVAL="0",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def _write_alias(shell: Dict[str, str], server: Server) -> None:
    (Path(shell["HOME"]) / ".ssh" / "config").write_text(alias_entry(server, ALIAS))


def _submit(env: Dict[str, str], remote_dir: str) -> str:
    submitted = hpcbridge_in(
        {**env, "HPCBRIDGE_SCHEDULER": "slurm", "HPCBRIDGE_REMOTE_WORKDIR": remote_dir},
        "submit",
        str(REPO / "examples" / "hello.sh"),
        "--time",
        "5",
        "--partition",
        "debug",
    )
    assert submitted.returncode == 0, submitted.stderr
    return submitted.stdout.strip()


def _follow(shell: Dict[str, str], job_id: str, *narrowing: str) -> None:
    waited = hpcbridge_in(
        shell, "wait", job_id, "--poll-interval", "1", "--timeout", "120", *narrowing
    )
    assert waited.returncode == 0, waited.stderr
    assert f"{job_id}  COMPLETED  exit=0" in waited.stderr
    status = hpcbridge_in(shell, "status", job_id, "--json", *narrowing)
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert (shown["state"], shown["exit_code"]) == ("COMPLETED", 0)
    logs = hpcbridge_in(shell, "logs", job_id, *narrowing)
    assert logs.returncode == 0, logs.stderr
    assert "hello from" in logs.stdout


def test_a_job_sent_through_an_ssh_config_alias_is_followed_from_a_new_shell(
    ssh_server: Server, cluster: Dict[str, str], ssh_remote_dir: str, tmp_path: Path
) -> None:
    shell = _new_shell(tmp_path, cluster)
    _write_alias(shell, ssh_server)
    job_id = _submit(
        {**shell, "HPCBRIDGE_TRANSPORT": "ssh", "HPCBRIDGE_SSH_HOST": ALIAS}, ssh_remote_dir
    )
    _follow(shell, job_id)
    _follow(shell, job_id, "--host", ALIAS)


def test_a_job_sent_with_key_and_known_hosts_settings_is_followed_from_a_new_shell(
    ssh_server: Server, cluster: Dict[str, str], ssh_remote_dir: str, tmp_path: Path
) -> None:
    shell = _new_shell(tmp_path, cluster)  # no ~/.ssh/config, no known_hosts of its own
    job_id = _submit({**shell, **ssh_env(ssh_server)}, ssh_remote_dir)
    _follow(shell, job_id)
    # the record keeps the paths, never what is in them
    state = Path(shell["HPCBRIDGE_STATE_DIR"])
    with sqlite3.connect(str(state / "jobs.db")) as db:
        (reach,) = db.execute("SELECT reach FROM hpc_jobs WHERE job_id = ?", (job_id,)).fetchone()
    assert json.loads(reach) == {
        "ssh_host": ssh_server.host,
        "ssh_user": ssh_server.user,
        "ssh_port": ssh_server.port,
        "ssh_key": os.path.abspath(ssh_server.key),
        "ssh_known_hosts": os.path.abspath(ssh_server.known_hosts),
    }
    secret = Path(ssh_server.key).read_text().splitlines()[1].encode()
    for path in state.rglob("*"):
        assert not path.is_file() or secret not in path.read_bytes(), path


def test_a_sweep_left_half_sent_is_fed_on_from_a_new_shell(
    ssh_server: Server, cluster: Dict[str, str], ssh_remote_dir: str, tmp_path: Path
) -> None:
    shell = _new_shell(tmp_path, cluster)
    _write_alias(shell, ssh_server)
    script = tmp_path / "nap.sh"
    script.write_text('#!/bin/sh\nsleep 2\necho "nap $1"\n')
    script.chmod(0o755)
    args = tmp_path / "args.txt"
    args.write_text("one\ntwo\nthree\n")
    sender_env = {
        **shell,
        "HPCBRIDGE_SCHEDULER": "slurm",
        "HPCBRIDGE_TRANSPORT": "ssh",
        "HPCBRIDGE_SSH_HOST": ALIAS,
        "HPCBRIDGE_REMOTE_WORKDIR": ssh_remote_dir,
    }
    argv = [sys.executable, "-m", "hpcbridge", "submit-many", str(script)]
    argv += ["--args-file", str(args), "--sweep", "naps", "--max-queued", "1", "--time", "5"]
    # its SIGINT at the default, whatever the suite's was
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    sender = subprocess.Popen(argv, env=sender_env, preexec_fn=stoppable, **pipes)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the first job went in: the sender is stopped
            listed = hpcbridge_in(shell, "jobs", "naps", "--cached", "--json")
            if listed.returncode == 0 and json.loads(listed.stdout):
                break
            time.sleep(0.2)
        sender.send_signal(signal.SIGINT)
        sender.communicate(timeout=60)
    finally:
        if sender.poll() is None:
            sender.kill()
    sent = json.loads(hpcbridge_in(shell, "jobs", "naps", "--cached", "--json").stdout)
    assert 1 <= len(sent) < 3, sent  # stopped half-way
    # a shell with none of the SSH settings feeds the rest and waits for all three
    waited = hpcbridge_in(shell, "wait", "naps", "--poll-interval", "1", "--timeout", "150")
    assert waited.returncode == 0, waited.stderr
    ended = json.loads(hpcbridge_in(shell, "jobs", "naps", "--cached", "--json").stdout)
    assert [job["state"] for job in ended] == ["COMPLETED"] * 3, ended
