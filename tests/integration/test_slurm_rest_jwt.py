"""slurmrestd with JWT on 127.0.0.1 (Slurm 25.11, containers/slurmrestd/start.sh), on a
cluster of this module's own: a token made by ``HPCBRIDGE_SLURM_REST_TOKEN_COMMAND`` and
made again before it expires (a 60 s token through a 150 s wait), once more when
slurmrestd refuses one, made on the login node over SSH (the test sshd's user), and the
guide docs/guides/slurm-rest.md run as written.

The client is this process (root): ``scontrol token`` makes root's tokens, except over
SSH, where it makes the SSH user's."""

from __future__ import annotations

import base64
import json
import logging
import os
import shlex
import subprocess
from pathlib import Path
from typing import Dict, Iterator

import pytest

from hpcbridge.errors import ConfigurationError
from hpcbridge.model import JobState
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from hpcbridge.settings.config import Settings
from hpcbridge.store.jobs import JobStore
from hpcbridge.transports.local import LocalExecutor
from tests.support.guides import blocks_by_kind, build_script, check_outputs
from tests.support.slurm_clusters import (
    PREFIX,
    own_cluster,
    remote_command_env,
    skip_without_slurmrestd,
    slurmrestd,
)

REPO = Path(__file__).resolve().parents[2]
STATE = "/tmp/hpcbridge-slurm-rtok"
#: the guide's slurmrestd (its JWT listener); the cluster's own ports are 17280..17282
LISTEN = "127.0.0.1:17283"
GUIDE = REPO / "docs" / "guides" / "slurm-rest.md"
TOKEN_LOG = "hpcbridge.transports.token"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    """The cluster's environment (``SLURM_CONF``, its commands first on ``PATH``), with
    slurmrestd's JWT listener on ``LISTEN``."""
    skip_without_slurmrestd()
    # MinJobAge 300: the ended jobs stay in slurmctld (no slurmdbd on this cluster)
    cluster = own_cluster("rtok", 17280, prefix=PREFIX, extra_conf="MinJobAge=300", jwt=True)
    with cluster as env, slurmrestd(STATE, LISTEN):
        yield env


def adapter_for(env: Dict[str, str], root: Path, **variables: str) -> RealSlurmAdapter:
    """The REST driver on the JWT listener, status rounds every 5 s."""
    settings = Settings.from_env(
        env={
            "HPCBRIDGE_SLURM_DRIVER": "rest",
            "HPCBRIDGE_SLURM_REST_URL": f"http://{LISTEN}",
            **variables,
        },
        state_dir=str(root / "state"),
        scheduler="slurm",
        poll_interval=5.0,
        min_poll_interval=0.0,  # the cluster is this module's
    )
    return RealSlurmAdapter(
        LocalExecutor(default_timeout=60),
        str(root / "jobs"),
        settings=settings,
        store=JobStore(root / "state" / "jobs.db"),
        command_env={"SLURM_CONF": env["SLURM_CONF"]},  # what `scontrol token` reads
    )


def token_command(env: Dict[str, str], lifespan: int) -> str:
    return shlex.join([f"{env['HPCBRIDGE_SLURM_BIN']}/scontrol", "token", f"lifespan={lifespan}"])


def script(root: Path, name: str, body: str) -> str:
    path = root / name
    path.write_text(f"#!/bin/bash\n{body}\n")
    return str(path)


def test_a_60s_token_through_a_150s_wait(
    cluster: Dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv("SLURM_JWT", raising=False)
    command = token_command(cluster, 60)
    adapter = adapter_for(cluster, tmp_path, HPCBRIDGE_SLURM_REST_TOKEN_COMMAND=command)
    caplog.set_level(logging.INFO, logger=TOKEN_LOG)
    job = adapter.submit_job(
        script(tmp_path, "long.sh", "sleep 150\nexit 3"), resources={"time": "5:00"}
    )
    final = adapter.wait_all([job], timeout=400)[job]
    assert (final.state, final.exit_code) == (JobState.FAILED, 3), final
    made = [record.getMessage() for record in caplog.records if record.name == TOKEN_LOG]
    # made at the start, then again before each expired: never refused on the way
    assert len(made) >= 4, made
    assert not [message for message in made if "refused" in message], made
    assert "eyJ" not in caplog.text  # no token (base64 JSON: "eyJ...") in any log


def test_a_refused_token_is_made_again_once(
    cluster: Dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a token slurmrestd did not sign, though it says it is good for years
    claims = base64.urlsafe_b64encode(json.dumps({"exp": 4_000_000_000, "sun": "root"}).encode())
    forged = f"eyJhbGciOiJIUzI1NiJ9.{claims.rstrip(b'=').decode()}.bm90LXNpZ25lZA"
    monkeypatch.setenv("SLURM_JWT", forged)
    alone = adapter_for(cluster, tmp_path / "alone")
    with pytest.raises(ConfigurationError) as refused:
        alone.submit_job(script(tmp_path, "ok.sh", "exit 0"))
    message = str(refused.value)
    # slurmctld refuses the token slurmrestd passes on: 511 (401 is for no token at all)
    assert "refused the token from SLURM_JWT (511): set SLURM_JWT to a valid token" in message
    assert "HPCBRIDGE_SLURM_REST_TOKEN_COMMAND" in message and forged not in message
    command = token_command(cluster, 600)
    adapter = adapter_for(cluster, tmp_path, HPCBRIDGE_SLURM_REST_TOKEN_COMMAND=command)
    caplog.set_level(logging.INFO, logger=TOKEN_LOG)
    job = adapter.submit_job(script(tmp_path, "ok.sh", "exit 0"))
    final = adapter.wait_all([job], timeout=120)[job]
    assert final.state is JobState.COMPLETED, final
    made = [record.getMessage() for record in caplog.records if record.name == TOKEN_LOG]
    assert len(made) == 1 and "refused (511)" in made[0], made
    assert "eyJ" not in caplog.text


def test_a_token_made_on_the_login_node_over_ssh(
    cluster: Dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Files over SFTP to the test sshd's user, REST calls straight to the URL, and the
    token made by that user's ``scontrol token`` on the login node: the job is theirs."""
    from tests.support.ssh import SKIP_REASON, find_test_server, make_executor

    pytest.importorskip("paramiko", reason="paramiko not installed (pip install '.[ssh]')")
    server = find_test_server()
    if server is None:
        pytest.skip(SKIP_REASON)
    monkeypatch.delenv("SLURM_JWT", raising=False)
    executor = make_executor(server, default_timeout=60.0)
    made = executor.run(["mktemp", "-d", "/tmp/hpcbridge-rtok.XXXXXXXX"])
    assert made.ok, made.stderr
    workdir = made.stdout.strip()
    try:
        settings = Settings.from_env(
            env={
                "HPCBRIDGE_SLURM_DRIVER": "rest",
                "HPCBRIDGE_SLURM_REST_URL": f"http://{LISTEN}",
                "HPCBRIDGE_SLURM_REST_TOKEN_COMMAND": "scontrol token lifespan=600",
            },
            state_dir=str(tmp_path / "state"),
            scheduler="slurm",
            poll_interval=2.0,
            min_poll_interval=0.0,  # the cluster is this module's
        )
        adapter = RealSlurmAdapter(
            executor,
            workdir,
            settings=settings,
            store=JobStore(tmp_path / "state" / "jobs.db"),
            command_env=remote_command_env(cluster),  # this cluster's scontrol and conf
        )
        caplog.set_level(logging.INFO, logger=TOKEN_LOG)
        job = adapter.submit_job(script(tmp_path, "who.sh", "id -un\nexit 4"))
        final = adapter.wait_all([job], timeout=120)[job]
        assert (final.state, final.exit_code) == (JobState.FAILED, 4), final
        assert adapter.get_job_logs(job).split() == [server.user]
        made_here = [record for record in caplog.records if record.name == TOKEN_LOG]
        assert len(made_here) == 1 and "eyJ" not in caplog.text
    finally:
        executor.run(["rm", "-rf", "--", workdir])
        executor.close()


def test_the_guide(cluster: Dict[str, str], tmp_path: Path) -> None:
    """docs/guides/slurm-rest.md as written (tests/support/guides.py's rules): in a
    fresh folder and ``HOME``, with this cluster's ``SLURM_CONF`` and commands."""
    dropped = ("HPCBRIDGE_", "EXAMLOPS_", "FLUX_", "SLURM_", "SBATCH_", "SQUEUE_", "SACCT_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    home, work, out = tmp_path / "home", tmp_path / "work", tmp_path / "out"
    for folder in (home, work, out):
        folder.mkdir()
    env.update(
        HOME=str(home),
        REPO=str(REPO),
        HPCBRIDGE_STATE_DIR=str(tmp_path / "state"),
        SLURM_CONF=cluster["SLURM_CONF"],
        PATH=cluster["PATH"],
    )
    built = build_script(blocks_by_kind(GUIDE)["slurmrestd"], str(out), "")
    path = tmp_path / "guide.sh"
    path.write_text(built.text)
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", str(path)],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=180,
    )
    step = (out / "step").read_text().strip() if (out / "step").exists() else "(none)"
    assert ran.returncode == 0 and step == "(end)", f"failed at {step}:\n{ran.stdout[-4000:]}"
    problems = check_outputs(built, out)
    assert not problems, "\n".join(problems)
