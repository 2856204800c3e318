"""What ``hpcbridge doctor`` makes of Slurm's answers (``doctor`` asks): its commands,
its controller, its accounting, and whether ``--pack`` can start Flux in an allocation.
Pure, no I/O."""

from __future__ import annotations

from typing import Mapping, Optional, Tuple

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
    # Slurm 23.02 and later say (null) where there is no accounting storage
    if "none" in storage or storage in ("(null)", ""):
        return Check(
            "slurm accounting",
            True,
            f"off ({storage}): finished jobs come from squeue for MinJobAge, then from the "
            f"exit-code file; {limits}",
        )
    return Check("slurm accounting", True, f"on ({storage}): sacct has job history; {limits}")


def packing_check(
    srun: Reply, found: Reply, flux: str, where: str, shapes: str = "", mpi: str = ""
) -> Check:
    """Whether ``submit-many --pack`` (``srun … flux start`` in each allocation) can work,
    from ``srun --version`` and ``flux version``'s answers; what a pack's allocations
    hold, from the partitions' ``shapes`` (``sinfo --format='%P %D %c'``) and ``mpi``
    (``srun --mpi=list``: the brokers of several nodes join through pmi2)."""
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
    said = [
        f"--pack can run: each allocation starts {flux} ({version}) with srun, a broker per "
        "node - the compute nodes need it at the same path"
    ]
    shape = default_partition_shape(shapes)
    if shape:
        partition, nodes, cpus = shape
        said.append(
            f"partition {partition} (the default): {nodes} node(s) of {cpus} CPUs - a pack of "
            f"nodes=N of whole nodes is a Flux instance of N x {cpus} cores (fewer where a "
            "node has fewer cores than Slurm says)"
        )
    if mpi and "pmi2" not in mpi.split():
        said.append(
            "srun has no pmi2 (srun --mpi=list): the brokers of a pack of several nodes "
            "cannot join one instance; use nodes=1"
        )
    return Check(name, True, "; ".join(said))


def default_partition_shape(shapes: str) -> Optional[Tuple[str, str, str]]:
    """The default partition's name, node count and CPUs per node from ``sinfo
    --format='%P %D %c'`` (the default is marked ``*``; CPUs ``2+`` where they differ)."""
    for line in shapes.splitlines():
        words = line.split()
        if len(words) == 3 and words[0].endswith("*"):
            return words[0].rstrip("*"), words[1], words[2]
    return None
