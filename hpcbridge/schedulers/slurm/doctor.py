"""``hpcbridge doctor`` for Slurm: commands, controller, accounting, driver, packing."""

from __future__ import annotations

from typing import List, Optional

from ...config import Settings
from ...doctor import Check
from ...errors import SchedulerAdapterError
from ...transports.base import Executor
from ...transports.local import LocalExecutor
from ..flux.commands import version_argv
from ..flux.instance import parse_flux_version_output
from .cli import SlurmCliDriver
from .commands import max_array_size, scheduler_message
from .native import choose_slurm_driver


def checks(settings: Settings, executor: Optional[Executor]) -> List[Check]:
    """What is usable for Slurm from here; never raises."""
    if executor is None:
        executor = LocalExecutor(settings.command_timeout, env=settings.command_env)
    selected = settings.scheduler == "slurm"
    where = "" if executor.kind == "local" else f" on {executor.host}"
    try:
        version = executor.run(["sbatch", "--version"], timeout=30)
    except SchedulerAdapterError as exc:
        return [Check("slurm", False, f"cannot run sbatch{where}: {exc}", "slurm")]
    if not version.ok:
        # 127: no such command; anything else: it is there but fails (no slurm.conf...).
        detail = (
            f"sbatch not found{where}"
            if version.returncode == 127 or "not found" in version.message()
            else f"sbatch{where} fails: {version.message()}"
        )
        if not selected:
            detail += " (slurm is not the selected scheduler)"
        return [Check("slurm", False, detail, "slurm")]
    found: List[Check] = [Check("slurm commands", True, f"sbatch{where}: {version.stdout.strip()}")]
    found.append(_controller(executor))
    cli = SlurmCliDriver(executor, min(settings.command_timeout, 30.0))
    found.append(_accounting(cli))
    found.extend(_driver(executor, cli, settings))
    found.append(_packing(executor, settings.flux_command, where))
    return found


def _packing(executor: Executor, flux: str, where: str) -> Check:
    """Whether ``submit-many --pack`` (``srun … flux start`` in each allocation) can work."""
    name = "slurm packing"
    try:
        srun = executor.run(["srun", "--version"], timeout=30)
        found = executor.run(version_argv(flux), timeout=30)
    except SchedulerAdapterError as exc:
        return Check(name, False, f"not checked: {exc}")
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


def _controller(executor: Executor) -> Check:
    try:
        ping = executor.run(["scontrol", "ping"], timeout=30)
    except SchedulerAdapterError as exc:
        return Check("slurm controller", False, f"scontrol ping failed: {exc}", "slurm")
    text = scheduler_message(ping.stdout or ping.stderr)
    up = ping.ok and "is UP" in ping.stdout
    return Check("slurm controller", up, text or f"scontrol ping exited {ping.returncode}", "slurm")


def _accounting(cli: SlurmCliDriver) -> Check:
    try:
        config = cli.config()
    except SchedulerAdapterError as exc:
        return Check("slurm accounting", False, f"scontrol show config failed: {exc}")
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


def _driver(executor: Executor, cli: SlurmCliDriver, settings: Settings) -> List[Check]:
    """pyslurm only through the driver choice, which checks first that it is safe to import."""
    _, choice = choose_slurm_driver("auto", executor, cli, settings.command_env)
    # Without pyslurm the commands do the work, unless pyslurm was asked for.
    needed = "slurm" if settings.slurm_driver == "native" else None
    return [
        Check("pyslurm", choice.name == "native", choice.reason, needed),
        Check("slurm driver", True, f"{choice.name} ({choice.reason})"),
    ]
