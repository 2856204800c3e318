"""``hpcbridge doctor`` for Slurm: commands, controller, accounting, driver, packing - each
asked here, judged by ``checks``; for the REST driver: slurmrestd and its token."""

from __future__ import annotations

import functools
from typing import List, Optional

from ...errors import ConfigurationError, SchedulerAdapterError
from ...settings.config import Settings
from ...settings.doctor import Check
from ...transports.base import Executor
from ...transports.local import LocalExecutor
from ..flux.commands import version_argv
from . import checks as judge
from .adapter import sbatch_found
from .cli_driver import SlurmCliDriver
from .native_driver import choose_slurm_driver


def checks(settings: Settings, executor: Optional[Executor]) -> List[Check]:
    """What is usable for Slurm from here; never raises."""
    if executor is None:
        executor = LocalExecutor(settings.command_timeout, env=settings.command_env)
    where = "" if executor.kind == "local" else f" on {executor.host}"
    url = settings.slurm_rest_url
    try:
        probe = functools.partial(sbatch_found, executor, settings.command_env)
        reason = judge.rest_reason(settings.slurm_driver, url, probe, executor.host)
    except SchedulerAdapterError as exc:
        return [Check("slurm", False, f"cannot run sbatch{where}: {exc}", "slurm")]
    if reason:
        return [Check("slurm driver", True, f"rest ({reason})"), *rest_checks(settings, executor)]
    try:
        version = executor.run(["sbatch", "--version"], timeout=30)
    except SchedulerAdapterError as exc:
        return [Check("slurm", False, f"cannot run sbatch{where}: {exc}", "slurm")]
    found = [judge.commands_check(version, where, settings.scheduler == "slurm")]
    if not version.ok:
        return found
    try:
        found.append(judge.controller_check(executor.run(["scontrol", "ping"], timeout=30)))
    except SchedulerAdapterError as exc:
        found.append(Check("slurm controller", False, f"scontrol ping failed: {exc}", "slurm"))
    cli = SlurmCliDriver(executor, min(settings.command_timeout, 30.0))
    try:
        found.append(judge.accounting_check(cli.config()))
    except SchedulerAdapterError as exc:
        found.append(Check("slurm accounting", False, f"scontrol show config failed: {exc}"))
    # pyslurm only through the driver choice, which checks first that it is safe to import.
    _, choice = choose_slurm_driver("auto", executor, cli, settings.command_env)
    # Without pyslurm the commands do the work, unless pyslurm was asked for.
    needed = "slurm" if settings.slurm_driver == "native" else None
    found.append(Check("pyslurm", choice.name == "native", choice.reason, needed))
    found.append(Check("slurm driver", True, f"{choice.name} ({choice.reason})"))
    try:
        srun = executor.run(["srun", "--version"], timeout=30)
        flux = executor.run(version_argv(settings.flux_command), timeout=30)
        shapes = mpi = ""
        if srun.ok and flux.ok:  # what a pack's allocations would hold
            shapes = executor.run(["sinfo", "--noheader", "--format=%P %D %c"], timeout=30).stdout
            mpi = executor.run(["srun", "--mpi=list"], timeout=30).stdout
    except SchedulerAdapterError as exc:
        return found + [Check("slurm packing", False, f"not checked: {exc}")]
    packing = judge.packing_check(srun, flux, settings.flux_command, where, shapes, mpi)
    return found + [packing]


def rest_checks(settings: Settings, executor: Executor) -> List[Check]:
    """slurmrestd at ``HPCBRIDGE_SLURM_REST_URL``: the data parser version chosen, Slurm's
    release, its ping, and the token's remaining life."""
    from . import rest_requests
    from .rest_driver import build_rest_driver, send

    url, command = settings.slurm_rest_url or "", settings.slurm_rest_token_command
    cli = SlurmCliDriver(executor, min(settings.command_timeout, 30.0))
    try:
        driver = build_rest_driver(executor, cli, url, token_command=command)
        asked = send(driver.client, rest_requests.openapi())
        if asked.status in (502, 503, 504):  # never reached: no version to choose
            return [judge.rest_failure(url, asked.message(), unreached=True)]
        version = driver.api_version()
        ping = send(driver.client, rest_requests.ping(version))
    except SchedulerAdapterError as exc:  # a setting's error says what to set
        return [judge.rest_failure(url, str(exc), not isinstance(exc, ConfigurationError))]
    token = driver.client.token
    assert token is not None  # build_rest_driver gives every client one
    left, renewable = token.remaining(), token.renewable
    return [
        judge.rest_check(url, version, driver.version(), ping.status, ping.body),
        judge.token_check(token.held, left, renewable, token.given_from, token.setting),
    ]
