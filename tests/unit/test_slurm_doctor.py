"""``hpcbridge doctor``'s Slurm checks against scripted commands."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pytest

from hpcbridge.schedulers.slurm import doctor
from hpcbridge.settings.config import Settings
from hpcbridge.settings.doctor import Check
from hpcbridge.transports.base import CommandResult
from hpcbridge.transports.local import LocalExecutor


class Scripted(LocalExecutor):
    def __init__(self, answers: Dict[Tuple[str, ...], Tuple[int, str]]) -> None:
        super().__init__()
        self.answers = answers

    def run(
        self, argv: Sequence[str], timeout=None, env=None, cwd=None, input=None, idempotent=True
    ) -> CommandResult:
        for prefix, (code, out) in self.answers.items():
            if tuple(argv[: len(prefix)]) == prefix:
                return CommandResult(list(argv), code, out, "" if code == 0 else out)
        return CommandResult(list(argv), 127, "", f"{argv[0]}: command not found")


def by_name(checks: List[Check]) -> Dict[str, Check]:
    return {check.name: check for check in checks}


def settings(tmp_path, scheduler: str = "slurm") -> Settings:
    return Settings.from_env(env={}, state_dir=str(tmp_path), scheduler=scheduler)


def test_everything_there(tmp_path) -> None:
    executor = Scripted(
        {
            ("sbatch", "--version"): (0, "slurm-wlm 22.05.8\n"),
            ("scontrol", "ping"): (0, "Slurmctld(primary) at vm is UP\n"),
            ("scontrol", "show", "config"): (
                0,
                "AccountingStorageType   = accounting_storage/slurmdbd\nMaxArraySize = 1001\n"
                "MinJobAge               = 10 sec\n",
            ),
            ("scontrol", "--version"): (0, "slurm-wlm 22.05.8\n"),
        }
    )
    found = by_name(doctor.checks(settings(tmp_path), executor))
    assert found["slurm commands"].ok and "22.05.8" in found["slurm commands"].detail
    assert found["slurm controller"].ok
    assert found["slurm accounting"].ok and "on (" in found["slurm accounting"].detail
    assert "MaxArraySize=1001" in found["slurm accounting"].detail
    assert found["slurm driver"].detail.startswith("cli (")
    assert "pyslurm" in found
    # no srun and no flux in the script: packing is said to be impossible, blocking nothing
    assert not found["slurm packing"].ok and "no srun" in found["slurm packing"].detail
    assert found["slurm packing"].blocks is None


def test_packing_needs_srun_and_the_flux_command(tmp_path) -> None:
    answers = {("sbatch", "--version"): (0, "slurm-wlm 22.05.8\n"), ("srun",): (0, "slurm\n")}
    found = by_name(doctor.checks(settings(tmp_path), Scripted(answers)))
    assert "flux not found" in found["slurm packing"].detail
    assert "HPCBRIDGE_FLUX_COMMAND" in found["slurm packing"].detail
    answers[("flux", "version")] = (0, "commands:    \t\t0.88.0\nlibflux-core:\t\t0.88.0\n")
    found = by_name(doctor.checks(settings(tmp_path), Scripted(answers)))
    assert found["slurm packing"].ok and "flux (0.88.0)" in found["slurm packing"].detail


def test_packing_says_the_nodes_and_cores_a_pack_holds(tmp_path) -> None:
    answers = {
        ("sbatch", "--version"): (0, "slurm 25.11.7\n"),
        ("flux", "version"): (0, "commands:    \t\t0.88.0\n"),
        ("sinfo",): (0, "short 4 2\ndebug* 4 2\n"),
        ("srun", "--mpi=list"): (0, "MPI plugin types are...\n\tnone\n\tpmi2\n"),
        ("srun",): (0, "slurm 25.11.7\n"),
    }
    detail = by_name(doctor.checks(settings(tmp_path), Scripted(answers)))["slurm packing"].detail
    assert "partition debug (the default): 4 node(s) of 2 CPUs" in detail
    assert "Flux instance of N x 2 cores" in detail and "no pmi2" not in detail
    answers[("srun", "--mpi=list")] = (0, "MPI plugin types are...\n\tnone\n")
    found = by_name(doctor.checks(settings(tmp_path), Scripted(answers)))["slurm packing"]
    assert found.ok and "srun has no pmi2" in found.detail and "use nodes=1" in found.detail


def test_accounting_off_and_controller_down(tmp_path) -> None:
    executor = Scripted(
        {
            ("sbatch", "--version"): (0, "slurm-wlm 22.05.8\n"),
            ("scontrol", "ping"): (1, "Slurmctld(primary) at vm is DOWN\n"),
            ("scontrol", "show", "config"): (
                0,
                "AccountingStorageType = accounting_storage/none\n",
            ),
        }
    )
    found = by_name(doctor.checks(settings(tmp_path), executor))
    assert not found["slurm controller"].ok and "DOWN" in found["slurm controller"].detail
    assert "off (" in found["slurm accounting"].detail


def test_accounting_storage_null_is_off(tmp_path) -> None:
    """Slurm 25.11 without accounting storage says (null), not accounting_storage/none."""
    answers = {
        ("sbatch", "--version"): (0, "slurm 25.11.7\n"),
        ("scontrol", "show", "config"): (0, "AccountingStorageType   = (null)\n"),
    }
    found = by_name(doctor.checks(settings(tmp_path), Scripted(answers)))
    assert found["slurm accounting"].detail.startswith("off ((null))")


def test_no_slurm_here(tmp_path) -> None:
    found = doctor.checks(settings(tmp_path, "mock"), Scripted({}))
    assert len(found) == 1 and not found[0].ok
    assert "not the selected scheduler" in found[0].detail


# -- the REST driver: chosen, and slurmrestd's checks -------------------------------------

REST_DATA = Path(__file__).resolve().parents[1] / "data" / "slurm-rest"


def test_auto_picks_rest_only_with_a_url_and_no_sbatch() -> None:
    from hpcbridge.schedulers.slurm.checks import rest_reason

    def present() -> bool:
        return True

    def absent() -> bool:
        return False

    url = "unix:/run/slurmrestd.socket"
    assert rest_reason("rest", url, present, "vm") == f"slurmrestd at {url} was asked for"
    assert rest_reason("auto", url, absent, "vm") == (
        f"no sbatch on vm and HPCBRIDGE_SLURM_REST_URL is set: slurmrestd at {url}"
    )
    assert rest_reason("auto", url, present, "vm") is None
    assert rest_reason("auto", None, absent, "vm") is None
    assert rest_reason("cli", url, absent, "vm") is None


def test_sbatch_is_looked_for_on_the_commands_path(tmp_path: Path) -> None:
    from hpcbridge.schedulers.slurm.adapter import sbatch_found

    executor = LocalExecutor()
    assert not sbatch_found(executor, {"PATH": str(tmp_path)})
    sbatch = tmp_path / "sbatch"
    sbatch.write_text("#!/bin/sh\n")
    sbatch.chmod(0o755)
    assert sbatch_found(executor, {"PATH": str(tmp_path)})
    # over SSH it is asked: 127 is "no sbatch", a failing one is there
    remote = Scripted({})
    remote.is_local = False
    assert not sbatch_found(remote, {})
    assert sbatch_found(Scripted({("sbatch",): (1, "slurm.conf not readable")}), {})


def test_the_adapter_picks_rest_where_there_is_no_sbatch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter

    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch
    env = {"HPCBRIDGE_SLURM_REST_URL": f"unix:{tmp_path}/restd.socket"}
    made = Settings.from_env(env=env, state_dir=str(tmp_path), scheduler="slurm")
    adapter = RealSlurmAdapter(LocalExecutor(), str(tmp_path / "jobs"), settings=made)
    with caplog.at_level(logging.INFO):
        session = adapter.open()
    assert session.driver.name == "rest"
    assert session.choice.reason.startswith("no sbatch on ")
    assert "using the REST driver (no sbatch on" in caplog.text


def test_rest_checks_say_the_version_release_and_ping() -> None:
    from hpcbridge.schedulers.slurm import checks

    record = json.loads((REST_DATA / "v0.0.44" / "ping.json").read_text())
    found = checks.rest_check("unix:/s", "v0.0.44", "25.11.7", 200, record["answer"])
    assert found.ok
    assert found.detail == "unix:/s: data parser v0.0.44, Slurm 25.11.7, slurmctld on vm is UP"
    down = {"pings": [{"hostname": "vm", "pinged": "DOWN"}]}
    failing = checks.rest_check("unix:/s", "v0.0.44", None, 200, down)
    assert not failing.ok and "scontrol ping on a login node" in failing.detail


def test_the_tokens_life_as_doctor_tells_it() -> None:
    from hpcbridge.schedulers.slurm.checks import token_check

    names = ("SLURM_JWT", "HPCBRIDGE_SLURM_REST_TOKEN_COMMAND")
    assert token_check(False, None, False, *names).detail == "no token: rest_auth/local"
    renewed = token_check(True, 3500.4, True, *names)
    assert renewed.ok and renewed.detail.startswith("3500 s of life left; made again by HPCB")
    given = token_check(True, 90, False, *names)
    assert given.ok and "set HPCBRIDGE_SLURM_REST_TOKEN_COMMAND to renew it" in given.detail
    expired = token_check(True, -5, False, *names)
    assert not expired.ok and "expired: set HPCBRIDGE_SLURM_REST_TOKEN_COMMAND" in expired.detail


def test_doctor_with_no_slurmrestd_says_what_to_do(tmp_path: Path) -> None:
    env = {"HPCBRIDGE_SLURM_DRIVER": "rest", "HPCBRIDGE_SLURM_REST_URL": f"unix:{tmp_path}/no"}
    made = Settings.from_env(env=env, state_dir=str(tmp_path), scheduler="slurm")
    found = by_name(doctor.checks(made, Scripted({})))
    assert found["slurm driver"].detail == f"rest (slurmrestd at unix:{tmp_path}/no was asked for)"
    assert not found["slurmrestd"].ok and found["slurmrestd"].blocks == "slurm"
    assert "cannot reach" in found["slurmrestd"].detail
    assert "start slurmrestd there, or set HPCBRIDGE_SLURM_REST_URL" in found["slurmrestd"].detail
