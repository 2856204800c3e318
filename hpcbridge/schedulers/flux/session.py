"""The Flux session: what an adapter learned about its instance, built once.

``build_session`` answers, in order: which instance (the URI setting, a
target resolved to its URI), whether the bindings can talk to it (else the
CLI driver, see ``driver.choose_driver``), its release (the version policy,
0.26 or 0.49) and its queues - and makes the driver with those facts.  The
result is immutable: nothing is filled in later, no method depends on
another having run first.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from ...config import Settings
from ...errors import SchedulerUnavailableError
from ...transports.base import Executor
from ..driver import DriverChoice, NativeDriverBroken, choose_driver
from .bindings import BindingsUnavailable, bindings_version, import_bindings
from .cli import CLIDriver
from .native import NativeConnection, NativeDriver, error_text
from .planning import FluxOptions, InstanceFacts
from .queues import QueueInfo
from .runner import FluxCommands
from .target import command_host, resolve_target
from .uri import UriSetting, choose_uri, classify
from .versions import POLICIES, FluxPolicy, choose_policy, policy_by_name

log = logging.getLogger("hpcbridge")

FluxDriver = Union[NativeDriver, CLIDriver]


@dataclass(frozen=True)
class Bindings:
    """The imported ``flux`` module, or why there is none."""

    module: Any
    error: str = ""

    @property
    def version(self) -> Optional[str]:
        return bindings_version(self.module) if self.module is not None else None


@dataclass(frozen=True)
class FluxSession:
    """One adapter's view of its instance and the driver made for it."""

    uri_setting: UriSetting
    facts: InstanceFacts
    driver: FluxDriver
    choice: DriverChoice
    bindings: Bindings
    #: ``flux`` commands aimed at the instance (doctor, a job's jobspec)
    commands: FluxCommands
    #: the host the commands run on, when a target had to be resolved
    command_host: Optional[str]

    @property
    def uri(self) -> Optional[str]:
        return self.facts.uri

    @property
    def policy(self) -> FluxPolicy:
        return self.facts.policy

    @property
    def queues(self) -> Optional[QueueInfo]:
        return self.facts.queues


def choose_uri_setting(settings: Settings, executor: Executor, uri: Optional[str]) -> UriSetting:
    """The URI precedence (see ``uri.py``); the enclosing ``FLUX_URI`` only for local commands."""
    return choose_uri(
        uri, settings.flux_uri, settings.enclosing_flux_uri, local_transport=executor.is_local
    )


def load_bindings(executor: Executor, options: FluxOptions) -> Bindings:
    """The bindings, where they can be used: the CLI driver not forced, commands local."""
    if options.requested_driver == "cli":
        return Bindings(None, "driver='cli' requested")
    if not executor.is_local:
        return Bindings(
            None,
            f"the transport is {executor.kind}: the bindings reach brokers from this "
            "process only, the CLI runs where the broker is",
        )
    try:
        return Bindings(import_bindings(options.flux_command, options.discover_bindings))
    except BindingsUnavailable as exc:
        return Bindings(None, f"flux bindings unusable: {exc}")


def target_policy(options: FluxOptions) -> FluxPolicy:
    """The policy for resolving a target, before its broker's release is known."""
    return policy_by_name(options.adapter_version) if options.adapter_version else POLICIES[0]


def build_session(setting: UriSetting, executor: Executor, options: FluxOptions) -> FluxSession:
    """Resolve the instance, choose and make the driver; raises when Flux is unusable."""
    bindings = load_bindings(executor, options)
    commands = FluxCommands(executor, options.flux_command, options.command_timeout)
    here: Optional[str] = None
    resolved = setting.value
    if resolved and classify(resolved)[0] == "target":
        here = command_host(executor, commands)
        resolved = resolve_target(
            resolved,
            commands=commands,
            options=options,
            policy=target_policy(options),
            flux_module=bindings.module,
            here=lambda: here,
        )
    aimed = commands.for_uri(resolved)

    def native() -> FluxDriver:
        return _native_driver(bindings, resolved, options, aimed)

    def cli() -> FluxDriver:
        return _cli_driver(resolved, options, aimed)

    driver, choice = choose_driver("flux", options.requested_driver, native, cli)
    return FluxSession(setting, driver.facts, driver, choice, bindings, aimed, here)


def _native_driver(
    bindings: Bindings, uri: Optional[str], options: FluxOptions, commands: FluxCommands
) -> NativeDriver:
    if bindings.module is None:
        raise SchedulerUnavailableError(bindings.error)
    connection = NativeConnection(
        bindings.module, uri, options.command_timeout, _flux_bin_dir(options.flux_command)
    )
    label = uri or "the system instance"
    try:
        version = connection.probe(options.probe_timeout)
    except Exception as exc:  # noqa: BLE001 - any failure means "use the CLI"
        connection.reset()
        raise NativeDriverBroken(f"cannot use a handle to {label}: {error_text(exc)}") from exc
    facts = learn_facts(uri, version, options, lambda _policy: connection.queue_info())
    reason = f"bindings {bindings.version or '?'} talk to {label}"
    return NativeDriver(connection, facts, options, commands, reason)


def _cli_driver(uri: Optional[str], options: FluxOptions, commands: FluxCommands) -> CLIDriver:
    version = commands.versions().get("broker")
    facts = learn_facts(uri, version, options, commands.queue_info)
    return CLIDriver(commands, facts, options)


def learn_facts(
    uri: Optional[str],
    broker_version: Optional[str],
    options: FluxOptions,
    fetch_queues: Callable[[FluxPolicy], Optional[QueueInfo]],
) -> InstanceFacts:
    """The version policy for the broker's release and, where queues exist, its queues."""
    policy, reason = choose_policy(broker_version, options.adapter_version or None)
    queues = None
    if not policy.queues:
        queues = QueueInfo(source=f"Flux {policy.name} has only the anonymous queue")
    elif broker_version is not None:
        try:
            queues = fetch_queues(policy)
        except OSError as exc:
            log.debug("flux: cannot read the queue configuration: %s", exc)
    return InstanceFacts(uri, broker_version, policy, reason, queues)


def _flux_bin_dir(flux_command: str) -> Optional[str]:
    """The directory of a ``flux`` given by path (put on the PATH of native jobs)."""
    if os.sep in flux_command:
        return os.path.dirname(os.path.abspath(flux_command))
    return None
