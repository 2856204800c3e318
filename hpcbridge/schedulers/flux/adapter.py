"""FluxAdapter: the Flux scheduler = a session (instance, release, driver) x an executor.

The base adapter does the scheduler-neutral work; this class builds its
``session`` once, on first use (``session.build_session``): the instance
to talk to, the driver - the bindings when ``import flux`` works here, the
transport is local and a handle to the instance answers within
``probe_timeout``; else the ``flux`` commands, see ``driver.choose_driver``
- and the version policy of the broker's release.  It knows Flux's id forms
and output template, and describes a dry run even where no Flux is reachable.
"""

from __future__ import annotations

import shlex
import threading
from typing import Any, Dict, Optional

from ...config import Settings
from ...errors import ConfigurationError, JobNotFoundError, SchedulerUnavailableError
from ...registry import check_driver_choice
from ...store import JobStore
from ...transports.base import Executor
from ..base import SchedulerAdapter
from ..driver import DriverChoice, SubmitBatch
from .doctor import adapter_info
from .ids import F58_PREFIX, InvalidJobIdError, canonical_job_id
from .nesting import NestedChoice, choose_nested
from .planning import FluxOptions, plan_one
from .queues import QueueInfo
from .requests import submit_argv
from .runner import FluxCommands
from .session import (
    FluxDriver,
    FluxSession,
    build_session,
    choose_uri_setting,
    load_bindings,
    target_policy,
)
from .target import command_host, resolve_target
from .uri import UriSetting
from .versions import POLICIES, FluxPolicy


class FluxAdapter(SchedulerAdapter):
    """Submit batch jobs (nested instances) or plain jobs to a Flux broker and follow them."""

    scheduler_name = "flux"
    output_template = "flux-{id}.out"
    # Flux expands the mustache template itself (to the F58 id with "ƒ").
    output_placeholder = "{{id}}"

    def __init__(
        self,
        executor: Optional[Executor] = None,
        remote_workdir: Optional[str] = None,
        uri: Optional[str] = None,
        *,
        settings: Optional[Settings] = None,
        store: Optional[JobStore] = None,
        driver: Optional[str] = None,
        adapter_version: Optional[str] = None,
        flux_command: Optional[str] = None,
        parent_uri: Optional[str] = None,
        unknown_limit: Optional[int] = None,
        command_timeout: Optional[float] = None,
        outer_time_margin: float = 60.0,
        ready_timeout: float = 30.0,
        probe_timeout: float = 10.0,
        discover_bindings: bool = True,
    ) -> None:
        super().__init__(
            executor,
            remote_workdir,
            settings=settings,
            store=store,
            unknown_limit=unknown_limit,
            command_timeout=command_timeout,
        )
        self.options = FluxOptions(
            flux_command=flux_command or self.settings.flux_command,
            requested_driver=check_driver_choice("flux", driver)
            if driver
            else self.settings.flux_driver,
            adapter_version=adapter_version or self.settings.flux_adapter_version or "",
            parent_uri=parent_uri,
            command_timeout=self.command_timeout,
            ready_timeout=ready_timeout,
            probe_timeout=probe_timeout,
            outer_time_margin=outer_time_margin,
            discover_bindings=discover_bindings,
        )
        self.uri_setting: UriSetting = choose_uri_setting(self.settings, self.executor, uri)
        self._session: Optional[FluxSession] = None
        self._session_lock = threading.Lock()

    # -- the session ----------------------------------------------------------

    @property
    def session(self) -> FluxSession:
        """The instance, its release and the driver; built once, on first use."""
        session = self._session
        if session is None:
            with self._session_lock:
                if self._session is None:
                    self._session = build_session(self.uri_setting, self.executor, self.options)
                session = self._session
        return session

    @property
    def driver(self) -> FluxDriver:
        return self.session.driver

    @property
    def driver_choice(self) -> DriverChoice:  # type: ignore[override]  # base: an attribute
        """Which driver and why (made with the session)."""
        return self.session.choice

    @property
    def driver_kind(self) -> str:
        return self.session.driver.name

    @property
    def requested_driver(self) -> str:
        return self.options.requested_driver

    @property
    def flux_command(self) -> str:
        return self.options.flux_command

    @property
    def uri(self) -> Optional[str]:
        """The resolved URI of the target instance (``None`` = system instance)."""
        return self.session.uri

    @property
    def instance_label(self) -> Optional[str]:
        return self.session.uri

    @property
    def policy(self) -> FluxPolicy:
        """The version policy of the broker's release."""
        return self.session.policy

    def queue_info(self) -> Optional[QueueInfo]:
        """The broker's queues (read with the session)."""
        return self.session.queues

    def time_left(self) -> Optional[float]:
        """Seconds until the target instance ends (inside a time-limited job), else ``None``."""
        return self.session.driver.time_left()

    def resolve_target(self, target: str, *, local: Optional[bool] = None) -> str:
        """The URI of ``target`` (``slurm:ID``, ``lsf:ID``, ``jobid:ID``, a Flux job id).

        Like ``flux uri --remote TARGET``, then turned into the ``local://``
        form when the target runs where the commands run (``local=None``),
        always (``local=True``) or never (``local=False``).  A job that is
        still starting is waited for, up to ``ready_timeout``.
        """
        commands = FluxCommands(self.executor, self.flux_command, self.command_timeout)
        return resolve_target(
            target,
            commands=commands,
            options=self.options,
            policy=target_policy(self.options),
            flux_module=load_bindings(self.executor, self.options).module,
            here=lambda: command_host(self.executor, commands),
            local=local,
        )

    # -- ids, dry runs, logs -------------------------------------------------

    def normalize_job_id(self, job_id: Any) -> str:
        try:
            return canonical_job_id(job_id)
        except InvalidJobIdError as exc:
            raise JobNotFoundError(str(exc)) from None

    @property
    def nested_choice(self) -> NestedChoice:
        """Batch or plain jobs by default here, and why (``doctor``)."""
        return choose_nested(None, self.settings, self.uri_setting)

    def choose_nested(self, nested: Optional[bool]) -> Optional[bool]:
        """The keyword, else ``HPCBRIDGE_FLUX_NESTED``, else the instance's default."""
        return choose_nested(nested, self.settings, self.uri_setting).nested

    def launcher(self, nested: Optional[bool]) -> str:
        """``flux run`` (``flux mini run`` on 0.26) in a batch job; none in a plain job."""
        if nested is False:
            return ""
        # Expanded unquoted by the script (`$HPCBRIDGE_LAUNCHER -n 2 app`): plain words.
        return " ".join([self.flux_command, *self.policy.run_command])

    def _describe_batch(self, batch: SubmitBatch) -> str:
        try:
            driver = self.driver
        except (SchedulerUnavailableError, ConfigurationError, OSError) as exc:
            # A dry run must work where no Flux is reachable (a laptop, CI): show
            # what the newest adapter would run, and say what could not be checked.
            newest = POLICIES[0]
            request = plan_one(batch, newest, None)
            line = shlex.join(submit_argv(self.flux_command, newest, request))
            return f"{line}\n# not checked against a broker ({exc}); adapter {newest.name} assumed"
        return driver.describe(batch)

    def get_job_logs(self, job_id: Any) -> str:
        text = super().get_job_logs(job_id)
        if text:
            return text
        path = self.log_path(job_id)
        if F58_PREFIX in path:
            # Some releases/locales spell the id with an ASCII "f" in {{id}}.
            ascii_path = path.replace(F58_PREFIX, "f")
            try:
                if self.executor.exists(ascii_path):
                    return self.executor.read_text(ascii_path)
            except OSError:
                return ""
        return text

    # -- diagnostics ----------------------------------------------------------

    def doctor_info(self) -> Dict[str, Any]:
        """What this adapter uses and why (``hpcbridge doctor``); never raises."""
        info = adapter_info(
            lambda: self.session,
            transport=self.executor.kind,
            flux_command=self.flux_command,
            uri_setting=self.uri_setting,
        )
        choice = self.nested_choice
        info["job_kind"] = f"{choice.kind} ({choice.reason})"
        return info

    def describe(self) -> str:
        """``flux via TRANSPORT (DRIVER driver, URI)``; the requested driver if Flux is unusable."""
        try:
            kind, target = self.driver_kind, self.uri or "system instance"
        except (SchedulerUnavailableError, ConfigurationError, OSError):
            kind, target = self.requested_driver, self.uri_setting.value or "system instance"
        return f"flux via {self.executor.kind} ({kind} driver, {target})"

    def close(self) -> None:
        if self._session is not None:
            self._session.driver.close()
        super().close()


__all__ = ["FluxAdapter"]
