"""Every exit code of the README's table is what the command does, against the real things.

``doctor`` exits 6 when the selected transport is unusable (nothing listening, a host key
it cannot verify) and 7 when the selected scheduler is (no ``flux``, no ``sbatch``) - and 0
where Flux works through its bindings alone; ``uri`` of a job that does not exist or no
longer runs exits 4, with hpcbridge's own line and no raw line of the scheduler's.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from tests.support.cli import hpcbridge, stoppable
from tests.support.places import ssh_env
from tests.support.slurm_clusters import DEBIAN_STATE, cluster_env, controller_up


def one_line_error(result: Any) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpcbridge: error: "), result.stderr
    return lines[0]


def doctor(env: Dict[str, str]) -> Any:
    return hpcbridge("doctor", env=env, timeout=180)


@pytest.fixture
def slurm() -> Dict[str, str]:
    found = cluster_env(DEBIAN_STATE)
    if found is None or not controller_up(found):
        pytest.skip("Slurm test cluster not running: start containers/slurm/start.sh")
    return found


@pytest.fixture
def flux() -> str:
    from tests.support.flux_cases import require_flux

    return require_flux()


# -- stopped by a signal ------------------------------------------------------------------


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_command_stopped_by_int_term_or_hup_says_so_and_exits_128_plus_its_number(
    state_dir: Path, make_script: Any, stop: signal.Signals
) -> None:
    """130, 143, 129: each on the way out runs what it must (a pack: its release)."""
    job_id = hpcbridge("submit", make_script("sleep 60"), check=True).stdout.strip()
    argv = [sys.executable, "-m", "hpcbridge", "wait", job_id, "--poll-interval", "0.3"]
    waiting = subprocess.Popen(
        argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, preexec_fn=stoppable
    )
    try:
        assert waiting.stderr is not None
        assert f" {job_id} " in waiting.stderr.readline()  # it waits: its first state said
        waiting.send_signal(stop)
        _, said = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
        hpcbridge("cancel", job_id)
    assert waiting.returncode == 128 + stop, said
    assert f"hpcbridge: interrupted by {stop.name}" in said


# -- doctor ------------------------------------------------------------------------------


def test_doctor_exits_0_for_the_mock_whatever_else_is_missing(state_dir: Path) -> None:
    result = doctor({"HPCBRIDGE_FLUX_COMMAND": "/nonexistent/flux"})
    assert result.returncode == 0, result.stderr
    assert "--  flux " in result.stdout and "HPCBRIDGE_FLUX_COMMAND" in result.stdout


def test_doctor_exits_7_when_the_selected_flux_is_missing(state_dir: Path) -> None:
    env = {"HPCBRIDGE_SCHEDULER": "flux", "HPCBRIDGE_FLUX_COMMAND": "/nonexistent/flux"}
    result = doctor(env)
    assert result.returncode == 7
    line = one_line_error(result)
    assert "the flux scheduler is not usable from here" in line
    assert "HPCBRIDGE_FLUX_COMMAND" in line


@pytest.mark.slurm
def test_doctor_exits_0_for_a_usable_slurm_and_7_without_sbatch(
    state_dir: Path, slurm: Dict[str, str], tmp_path: Path
) -> None:
    env = {**slurm, "HPCBRIDGE_SCHEDULER": "slurm"}
    assert doctor(env).returncode == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = doctor({**env, "HPCBRIDGE_COMMAND_ENV": f"PATH={empty}"})
    assert broken.returncode == 7
    assert "the slurm scheduler is not usable from here: slurm: sbatch not found" in (
        one_line_error(broken)
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.ssh
def test_doctor_exits_6_when_the_ssh_transport_is_unusable(
    state_dir: Path, ssh_server: Any, tmp_path: Path
) -> None:
    reachable = {**ssh_env(ssh_server), "HPCBRIDGE_SCHEDULER": "slurm"}
    nothing_there = {**reachable, "HPCBRIDGE_SSH_PORT": str(_free_port())}
    unknown_key = {**reachable, "HPCBRIDGE_SSH_KNOWN_HOSTS": str(tmp_path / "none")}
    # the server's host key line with another key in it: a key that changed
    other_key = tmp_path / "other_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)], check=True
    )
    changed = tmp_path / "known_hosts"
    public = other_key.with_suffix(".pub").read_text().split()[:2]
    changed.write_text(f"[{ssh_server.host}]:{ssh_server.port} {' '.join(public)}\n")
    changed_key = {**reachable, "HPCBRIDGE_SSH_KNOWN_HOSTS": str(changed)}
    for env in (nothing_there, unknown_key, changed_key):
        result = doctor(env)
        assert result.returncode == 6, result.stdout + result.stderr
        assert "the ssh transport is not usable from here" in one_line_error(result)


@pytest.mark.flux
def test_doctor_reports_the_bindings_when_flux_is_not_on_path(
    state_dir: Path, flux: str, tmp_path: Path
) -> None:
    from tests.support.flux_cases import native_bindings_or_skip, start_instance

    native_bindings_or_skip(flux)
    from hpcbridge.schedulers.flux.instance import bindings_dir_for

    bindings = bindings_dir_for(flux)
    if bindings is None:
        pytest.skip(f"no bindings found beside {flux}")
    instance = start_instance(tmp_path / "broker", flux=flux)
    try:
        env = {
            "HPCBRIDGE_SCHEDULER": "flux",
            "FLUX_URI": str(instance.uri),
            "PATH": "/usr/bin:/bin",  # no flux
            "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), bindings]),
        }
        result = doctor(env)
        assert result.returncode == 0, result.stdout + result.stderr
        lines = {line[4:26].strip(): line for line in result.stdout.splitlines()}
        assert lines["flux driver"].startswith("ok ") and "native" in lines["flux driver"]
        assert f"{instance.uri}" in lines["flux instance"] and lines["flux instance"][:3] == "ok "
        assert "HPCBRIDGE_FLUX_COMMAND" in lines["flux commands"]
        script = tmp_path / "hi.sh"
        script.write_text("#!/bin/sh\necho hi\n")
        submitted = hpcbridge("submit", str(script), "--wait", "--poll-interval", "0.2", env=env)
        assert submitted.returncode == 0, submitted.stderr
    finally:
        instance.stop()


# -- uri -----------------------------------------------------------------------------------


@pytest.fixture
def flux_slurm_env(flux: str, slurm: Dict[str, str]) -> Iterator[Dict[str, str]]:
    yield {**slurm, "PATH": f"{Path(flux).parent}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.flux
@pytest.mark.slurm
def test_uri_of_a_slurm_job_that_does_not_exist_or_ended_exits_4(
    state_dir: Path, flux_slurm_env: Dict[str, str]
) -> None:
    ended = subprocess.run(
        ["sbatch", "--parsable", "-t", "1", "--wrap", "true"],
        env={**os.environ, **flux_slurm_env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deadline = time.monotonic() + 60
    while subprocess.run(
        ["squeue", "-h", "-j", ended, "-t", "PD,R,CG"],
        env={**os.environ, **flux_slurm_env},
        capture_output=True,
        text=True,
    ).stdout.strip():
        assert time.monotonic() < deadline
        time.sleep(0.5)
    for target in ("slurm:987654321", f"slurm:{ended}"):
        result = hpcbridge("uri", target, env=flux_slurm_env)
        assert result.returncode == 4, (target, result.stderr)
        assert result.stdout == ""
        line = one_line_error(result)  # Slurm's own "slurm_load_jobs error:" is not a line
        assert f"cannot resolve '{target}'" in line


@pytest.mark.flux
def test_uri_of_an_ended_flux_job_exits_4(state_dir: Path, flux: str, tmp_path: Path) -> None:
    from tests.support.flux_cases import start_instance

    instance = start_instance(tmp_path / "broker", flux=flux)
    try:
        job = instance.check([*instance.submit_words("submit"), "true"]).strip()
        instance.check(["job", "status", job])
        env = {"FLUX_URI": str(instance.uri), "HPCBRIDGE_FLUX_COMMAND": flux}
        for driver in ("native", "cli"):
            result = hpcbridge("uri", job, env={**env, "HPCBRIDGE_FLUX_DRIVER": driver})
            assert result.returncode == 4, (driver, result.stderr)
            assert "is not running" in one_line_error(result)
    finally:
        instance.stop()
