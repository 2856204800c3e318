"""RealSlurmAdapter: Slurm through pyslurm or its CLI, over any executor."""

from __future__ import annotations

import functools
import logging
import os
import shutil
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence

from ...engine.adapter import SchedulerAdapter
from ...errors import JobNotFoundError
from ...settings.schedulers import check_driver_choice
from .ids import job_id_of

if TYPE_CHECKING:
    from ...engine.driver import OpenDriver
    from ...model import Charge
    from ...transports.base import Executor

log = logging.getLogger(__name__)


def sbatch_found(executor: Executor, env: Mapping[str, str]) -> bool:
    """Whether ``sbatch`` is reachable: locally on ``PATH``, over SSH by asking."""
    from .checks import sbatch_missing

    if executor.is_local:
        return bool(shutil.which("sbatch", path=env.get("PATH") or os.environ.get("PATH")))
    return not sbatch_missing(executor.run(["sbatch", "--version"], timeout=30, env=env))


class RealSlurmAdapter(SchedulerAdapter["OpenDriver"]):
    """Submits, follows, logs and cancels Slurm jobs."""

    scheduler_name = "slurm"
    output_template = "slurm-{id}.out"
    output_placeholder = "%j"
    # Flux's job kind (batch or plain job): Slurm has one kind of job.
    ignored_options = frozenset({"nested"})

    def __init__(
        self,
        executor: Optional[Executor] = None,
        remote_workdir: Optional[str] = None,
        *,
        driver: Optional[str] = None,
        max_array_size: Optional[int] = None,
        command_env: Optional[Mapping[str, str]] = None,
        **common: Any,
    ) -> None:
        """``driver``: "auto", "native" (pyslurm), "cli" or "rest"; default from
        ``HPCBRIDGE_SLURM_DRIVER``.  ``command_env``: extra environment for the Slurm
        commands (``SLURM_CONF`` over SSH).  ``max_array_size`` overrides the cluster's
        ``MaxArraySize``."""
        super().__init__(executor, remote_workdir, **common)
        self.requested_driver = (
            check_driver_choice("slurm", driver) if driver else self.settings.slurm_driver
        )
        self.command_env = dict(command_env or {})
        self._max_array_size = max_array_size

    def _open_session(self) -> OpenDriver:
        # the drivers, the runner and the cap's cache are loaded when a session opens
        from ...engine.driver import OpenDriver
        from ...store.caps import LimitCache
        from .checks import rest_reason
        from .cli_driver import SlurmCliDriver
        from .native_driver import choose_slurm_driver

        cli = SlurmCliDriver(
            self.executor,
            self.command_timeout,
            self.command_env,
            self._max_array_size,
            limit_cache=LimitCache(self.settings.state_path / "cache"),
        )
        conf_env = {**self.settings.command_env, **self.command_env}
        url = self.settings.slurm_rest_url
        found = functools.partial(sbatch_found, self.executor, conf_env)
        reason = rest_reason(self.requested_driver, url, found, self.executor.host)
        if reason:
            from ...engine.driver import DriverChoice
            from .rest_driver import build_rest_driver

            log.info("slurm: using the REST driver (%s)", reason)
            command = self.settings.slurm_rest_token_command
            rest = build_rest_driver(self.executor, cli, url, token_command=command)
            return OpenDriver(rest, DriverChoice("rest", reason))
        driver, choice = choose_slurm_driver(self.requested_driver, self.executor, cli, conf_env)
        return OpenDriver(driver, choice)

    @property
    def poll_target(self) -> str:
        """One shared poll per cluster: the slurm.conf the commands read names it."""
        from . import cluster

        envs = [self.command_env, self.settings.command_env]
        conf = cluster.slurm_conf(envs, os.environ, self.executor.is_local)
        return f"{super().poll_target}|{conf}"

    def normalize_job_id(self, job_id: Any) -> str:
        try:
            return job_id_of(job_id)
        except ValueError as exc:
            raise JobNotFoundError(str(exc)) from None

    def charges(self, job_ids: Sequence[str]) -> Dict[str, Charge]:
        """What sacct says these jobs were charged (``cluster.parse_sacct_charges``)."""
        from ...engine.runner import Runner
        from . import cluster

        if not job_ids:
            return {}
        env = {**self.settings.command_env, **self.command_env}
        runner = Runner(self.executor, timeout=self.command_timeout, env=env)
        return runner.ask(cluster.sacct_charges_argv(job_ids), cluster.charges_reply)

    def max_array_size(self) -> int:
        """Tasks per array: the cluster's ``MaxArraySize`` (asked once) or the override."""
        return self.open().driver.max_batch()
