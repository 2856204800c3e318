"""FluxAdapter: a Flux session (instance, release, driver) over an executor.

Default job kind: batch jobs on the system instance, plain jobs in an enclosing or named one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Union

from ...engine.adapter import SchedulerAdapter
from ...errors import ConfigurationError, JobNotFoundError, SchedulerUnavailableError
from ...settings.schedulers import check_driver_choice
from .ids import InvalidJobIdError, canonical_job_id
from .instance import POLICIES, FluxOptions, FluxPolicy, InstanceFacts, UriSetting, facts
from .jobspec import F58_PREFIX
from .uri import choose_uri_setting

if TYPE_CHECKING:
    from ...engine.submitting import Order
    from ...model import Charge
    from ...transports.base import Executor
    from .session import FluxSession

# The session (bindings, drivers), the commands and doctor are imported when first used,
# the planning when an adapter is made: importing the adapter class loads none of them.


class FluxAdapter(SchedulerAdapter["FluxSession"]):
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
        driver: Optional[str] = None,
        adapter_version: Optional[str] = None,
        flux_command: Optional[str] = None,
        parent_uri: Optional[str] = None,
        outer_time_margin: float = 60.0,
        ready_timeout: float = 30.0,
        probe_timeout: float = 10.0,
        discover_bindings: bool = True,
        **common: Any,
    ) -> None:
        """``uri``: a URI, ``slurm:ID``, ``lsf:ID`` or a Flux job id; ``driver``: auto/native/cli"""
        from .planning import JobKinds

        super().__init__(executor, remote_workdir, **common)
        requested = check_driver_choice("flux", driver) if driver else self.settings.flux_driver
        self.options = FluxOptions(
            flux_command=flux_command or self.settings.flux_command,
            requested_driver=requested,
            adapter_version=adapter_version or self.settings.flux_adapter_version or "",
            parent_uri=parent_uri,
            command_timeout=self.command_timeout,
            ready_timeout=ready_timeout,
            probe_timeout=probe_timeout,
            outer_time_margin=outer_time_margin,
            discover_bindings=discover_bindings,
        )
        local = self.executor.is_local
        self.uri_setting: UriSetting = choose_uri_setting(self.settings, local, uri)
        # `nested`, read by job_options into the job kind both drivers read (and the launcher)
        self.own_keywords = JobKinds(self.settings, self.uri_setting)

    def _open_session(self) -> FluxSession:
        from .session import open_session

        return open_session(self.uri_setting, self.executor, self.options)

    @property
    def instance_label(self) -> Optional[str]:
        return self.open().instance

    def charges(self, job_ids: Sequence[str]) -> Dict[str, Charge]:
        """What ``flux jobs`` says these jobs held (their R's cores and GPUs) x their run
        time (``command_line.parse_charges``)."""
        from .commands import charges_argv
        from .instance_answers import parse_charges
        from .status import only_unknown_ids

        if not job_ids:
            return {}
        session = self.open()
        result = session.commands.run(charges_argv(self.options.flux_command, job_ids))
        if not result.ok and not only_unknown_ids(result.stderr):
            raise SchedulerUnavailableError(
                f"flux jobs cannot say what jobs held: {result.message()}"
            )
        return parse_charges(result.stdout)

    def time_left(self) -> Optional[float]:
        return self.open().driver.time_left()

    def resolve_target(self, target: str, *, local: Optional[bool] = None) -> str:
        """The URI of ``target``, as ``flux uri --remote``; ``local``: None/True/False."""
        from .bindings import load_bindings
        from .command_runner import FluxCommands
        from .session import command_host, resolve_target

        module = load_bindings(self.executor, self.options).module
        commands = FluxCommands(self.executor, self.options.flux_command, self.command_timeout)
        here = lambda: command_host(self.executor, commands)  # noqa: E731
        return resolve_target(target, commands, self.options, module, here, local)

    def describe_order(self, order: Order) -> str:
        """Also the CLI driver's command lines; with no Flux reachable, the newest adapter's."""
        try:
            session = self.open()
        except (SchedulerUnavailableError, ConfigurationError, OSError) as exc:
            newest = POLICIES[0]
            lines = self._command_lines(order, newest)
            return f"{lines}\n# not checked against a broker ({exc}); adapter {newest.name} assumed"
        text = super().describe_order(order)
        if session.driver.name != "native":
            return text
        lines = self._command_lines(order, session.facts)
        return f"{text}\n# the same by command (the CLI driver):\n{lines}"

    def _command_lines(self, order: Order, known: Union[InstanceFacts, FluxPolicy]) -> str:
        from ...engine.describing import dry_batches
        from .command_runner import FluxCommands
        from .commands import command_lines
        from .request import MAX_BATCH

        if isinstance(known, FluxPolicy):
            known = facts(self.uri_setting.value, None, known, "assumed", None)
        runner = FluxCommands(self.executor, self.options.flux_command, self.command_timeout)
        batches = dry_batches(order, self.stager, MAX_BATCH)
        return command_lines(batches, known, self.options.flux_command, runner.native_attributes)

    def normalize_job_id(self, job_id: Any) -> str:
        try:
            return canonical_job_id(job_id)
        except InvalidJobIdError as exc:
            raise JobNotFoundError(str(exc)) from None

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

    def doctor_info(self) -> Dict[str, Any]:
        from .doctor import adapter_info
        from .planning import choose_kind

        info = adapter_info(
            self.open,
            transport=self.executor.kind,
            flux_command=self.options.flux_command,
            uri_setting=self.uri_setting,
        )
        choice = choose_kind(None, self.settings, self.uri_setting)
        info["job_kind"] = f"{choice.kind.value} ({choice.reason})"
        return info

    def describe(self) -> str:
        try:
            session = self.open()
            kind, target = session.driver.name, session.instance or "system instance"
        except (SchedulerUnavailableError, ConfigurationError, OSError):
            kind = self.options.requested_driver
            target = self.uri_setting.value or "system instance"
        return f"flux via {self.executor.kind} ({kind} driver, {target})"


__all__ = ["FluxAdapter"]
