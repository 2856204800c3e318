"""Opening a Flux session once: the instance (a URI, or a target such as ``slurm:ID`` resolved
like ``flux uri --remote``), the bindings (also found beside the ``flux`` command), the driver
and the release.  URI precedence: ``uri=`` > ``HPCBRIDGE_FLUX_URI`` > a local ``FLUX_URI``.
"""

from __future__ import annotations

import logging
import os
import platform
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Tuple

from ...engine.driver import DriverChoice, NativeDriverBroken, SchedulerDriver, choose_driver
from ...errors import SchedulerUnavailableError
from ...transports.base import Executor
from .bindings import Bindings, _native_uri, load_bindings
from .cli_driver import CLIDriver
from .command_runner import FluxCommands
from .driver_base import TimeLeftClock
from .instance import (
    FluxOptions,
    InstanceFacts,
    UriSetting,
    assumed_policy,
    learn_facts,
    opened,
)
from .instance_answers import no_broker, no_system_instance
from .jobspec import error_text
from .native_driver import BindingsConnection, NativeDriver
from .uri import classify, localized, not_resolved

log = logging.getLogger("hpcbridge")


class FluxDriver(SchedulerDriver, Protocol):
    """What both Flux drivers offer beyond the contract (``doctor`` reads it)."""

    #: what the session learned about the instance
    facts: InstanceFacts
    #: seconds until the instance ends (inside a time-limited job), else ``None``
    time_left: TimeLeftClock


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
    #: the resolved URI of the instance, recorded with each job (``None`` = the system instance)
    instance: Optional[str]


def open_session(setting: UriSetting, executor: Executor, options: FluxOptions) -> FluxSession:
    """Resolve the instance, choose and make the driver; raises when Flux is unusable."""
    bindings = load_bindings(executor, options)
    commands = FluxCommands(executor, options.flux_command, options.command_timeout)
    host: Optional[str] = None
    uri = setting.value
    if uri and classify(uri)[0] == "target":
        host = command_host(executor, commands)
        uri = resolve_target(uri, commands, options, bindings.module, lambda: host)
    aimed = commands.for_uri(uri)

    def native() -> Tuple[FluxDriver, str]:
        return _native_driver(bindings, uri, options, aimed)

    def cli() -> FluxDriver:
        found = aimed.versions()
        version = found.get("broker")
        unreached = found.get("broker_error", "")
        if version is None and uri is None and no_broker(unreached):
            raise SchedulerUnavailableError(no_system_instance(unreached))
        learned = learn_facts(uri, version, options, aimed.queue_info)
        return CLIDriver(aimed, learned, options.ready_timeout, options.outer_time_margin)

    driver, choice = choose_driver("flux", options.requested_driver, native, cli)
    log.info("flux: %s", opened(driver.facts, setting.source, choice.name, choice.reason))
    return FluxSession(setting, driver.facts, driver, choice, bindings, aimed, host, uri)


def _native_driver(
    bindings: Bindings, uri: Optional[str], options: FluxOptions, commands: FluxCommands
) -> Tuple[NativeDriver, str]:
    if bindings.module is None:
        raise SchedulerUnavailableError(bindings.error)
    command = options.flux_command
    # A flux given by path: its directory goes on native jobs' PATH.
    bin_dir = os.path.dirname(os.path.abspath(command)) if os.sep in command else None
    connection = BindingsConnection(bindings.module, uri, options.command_timeout, bin_dir)
    label = uri or "the system instance"
    try:
        version = connection.probe(options.probe_timeout)
    except Exception as exc:  # noqa: BLE001 - any failure means "use the CLI"
        connection.reset()
        why = error_text(exc)
        if uri is None and no_broker(why):
            # no system instance: not the bindings' fault (the commands say so next)
            raise SchedulerUnavailableError(f"no broker answers at {label}: {why}") from exc
        raise NativeDriverBroken(f"cannot use a handle to {label}: {why}") from exc
    learned = learn_facts(uri, version, options, lambda _policy: connection.queue_info())
    driver = NativeDriver(
        connection, learned, commands, options.ready_timeout, options.outer_time_margin
    )
    return driver, f"bindings {bindings.version or '?'} talk to {label}"


def command_host(executor: Executor, commands: FluxCommands) -> Optional[str]:
    if executor.is_local:
        return platform.node()
    return commands.hostname()


def resolve_target(
    target: str,
    commands: FluxCommands,
    options: FluxOptions,
    flux_module: Any,
    here: Callable[[], Optional[str]],
    local: Optional[bool] = None,
) -> str:
    """The URI of ``target`` (a job id in ``options.parent_uri``); ``local=None``: the
    ``local://`` form when it runs on ``here()``, ``True`` always, ``False`` never."""
    kind, text = classify(target)
    if kind == "uri":
        return text
    budget, parent_uri = options.ready_timeout, options.parent_uri
    # slurm:ID by commands (squeue, then srun on the job's first node: `command_runner`)
    native = flux_module and not text.startswith("slurm:")
    uri = _native_uri(flux_module, text, parent_uri, budget) if native else ""
    if not uri:
        parent = commands.for_uri(parent_uri or None)
        try:
            uri = parent.resolve_uri(text, assumed_policy(options.adapter_version), budget)
        except LookupError as exc:
            raise not_resolved(target, str(exc)) from None
    return uri if local is False else localized(uri, here(), local)
