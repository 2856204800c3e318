"""``hpcbridge doctor``'s Slurm checks against scripted commands."""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

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
