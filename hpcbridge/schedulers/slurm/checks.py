"""What ``hpcbridge doctor`` makes of Slurm's answers (``doctor`` asks): its commands,
its controller, its accounting, and whether ``--pack`` can start Flux in an allocation.
Pure, no I/O."""

from __future__ import annotations

from typing import Mapping

from ...engine.driver import Reply
from ...settings.doctor import Check
from ..flux.instance import parse_flux_version_output
from .cluster import max_array_size
from .commands import scheduler_message


def commands_check(reply: Reply, where: str, selected: bool) -> Check:
    """``sbatch --version``'s answer: Slurm's commands are there, or why not."""
    if reply.ok:
        return Check("slurm commands", True, f"sbatch{where}: {reply.stdout.strip()}")
    # 127: no such command; anything else: it is there but fails (no slurm.conf...).
    detail = (
        f"sbatch not found{where}"
        if reply.returncode == 127 or "not found" in reply.message()
        else f"sbatch{where} fails: {reply.message()}"
    )
    if not selected:
        detail += " (slurm is not the selected scheduler)"
    return Check("slurm", False, detail, "slurm")


def controller_check(reply: Reply) -> Check:
    """``scontrol ping``'s answer."""
    text = scheduler_message(reply.stdout or reply.stderr)
    up = reply.ok and "is UP" in reply.stdout
    return Check(
        "slurm controller", up, text or f"scontrol ping exited {reply.returncode}", "slurm"
    )


def accounting_check(config: Mapping[str, str]) -> Check:
    """Whether sacct has a history, from ``scontrol show config``."""
    if not config:
        return Check("slurm accounting", False, "scontrol show config gave nothing")
    storage = config.get("AccountingStorageType", "?")
    limits = f"MinJobAge={config.get('MinJobAge', '?')}, MaxArraySize={max_array_size(config)}"
    if "none" in storage:
        return Check(
            "slurm accounting",
            True,
            f"off ({storage}): finished jobs come from squeue for MinJobAge, then from the "
            f"exit-code file; {limits}",
        )
    return Check("slurm accounting", True, f"on ({storage}): sacct has job history; {limits}")


def packing_check(srun: Reply, found: Reply, flux: str, where: str) -> Check:
    """Whether ``submit-many --pack`` (``srun … flux start`` in each allocation) can work,
    from ``srun --version`` and ``flux version``'s answers."""
    name = "slurm packing"
    if not srun.ok:
        return Check(name, False, f"not possible: no srun{where} to start Flux in an allocation")
    if not found.ok:
        return Check(
            name,
            False,
            f"not possible: {flux} not found{where}; set HPCBRIDGE_FLUX_COMMAND to the "
            "flux the compute nodes have",
        )
    version = parse_flux_version_output(found.stdout).get("commands", "?")
    return Check(
        name,
        True,
        f"--pack can run: each allocation starts {flux} ({version}) with srun - the "
        "compute nodes need it at the same path",
    )
