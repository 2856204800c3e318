"""Opening a Flux session: which instance, which driver, which release - learned once.

``open_session`` is the named step ``FluxAdapter.open`` takes, once.  In order:

1. **the instance**: the URI setting, or a target (``slurm:ID``, a Flux job
   id...) resolved to its URI (``uri.resolve_target``);
2. **the driver**: the bindings when they import here, the transport is local
   and a handle to the instance answers within ``probe_timeout``; else the
   ``flux`` commands (``driver.choose_driver``);
3. **the release**: the broker's version picks the version policy (0.26 or
   0.49, ``versions``), and where the release has named queues they are read.

It logs one line saying what it learned.  The facts are fixed once learned;
the driver made with them keeps its own working state (readiness, the ends
its waiters heard).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Tuple

from ...config import Settings
from ...errors import SchedulerUnavailableError
from ...transports.base import Executor
from ..driver import DriverChoice, NativeDriverBroken, SchedulerDriver, choose_driver
from .bindings import BindingsUnavailable, bindings_version, import_bindings
from .bindings_driver import BindingsConnection, NativeDriver, error_text
from .command_driver import CLIDriver
from .command_line import scheduler_message
from .commands import FluxCommands
from .instance import FluxOptions, InstanceFacts, QueueInfo, UriSetting, facts
from .plan import TimeLeft
from .sending import NEVER_REACHED
from .uri import choose_uri, classify, command_host, resolve_target
from .versions import FluxPolicy, choose_policy

log = logging.getLogger("hpcbridge")

# `flux getattr` with no broker says "flux_open: <errno text>"; submit and the
# bindings say "Unable to connect to Flux"
NO_BROKER = (*NEVER_REACHED, "flux_open:")


def no_broker(message: str) -> bool:
    """Whether ``message`` says no broker answered at all (``NO_BROKER``)."""
    return any(marker in message for marker in NO_BROKER)


class FluxDriver(SchedulerDriver, Protocol):
    """What both Flux drivers offer beyond the contract (``doctor`` reads it)."""

    #: what the session learned about the instance
    facts: InstanceFacts
    #: seconds until the instance ends (inside a time-limited job), else ``None``
    time_left: TimeLeft


@dataclass(frozen=True)
class Bindings:
    """The imported ``flux`` module, or why there is none."""

    module: Any
    error: str = ""
    #: the libflux-core release the bindings are linked with, when they imported
    version: Optional[str] = None


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
    #: the resolved URI of the instance (``None`` = the system instance)
    uri: Optional[str]


def choose_uri_setting(settings: Settings, executor: Executor, uri: Optional[str]) -> UriSetting:
    """The URI precedence (see ``uri.py``); the enclosing ``FLUX_URI`` only for local commands."""
    return choose_uri(
        uri, settings.flux_uri, settings.enclosing_flux_uri, local_transport=executor.is_local
    )


def load_bindings(executor: Executor, options: FluxOptions) -> Bindings:
    """The bindings, where they can be used: the CLI driver not forced, commands local."""
    if options.requested_driver == "cli":
        return Bindings(
            None, "the CLI driver was asked for (HPCBRIDGE_FLUX_DRIVER=cli, driver='cli')"
        )
    if not executor.is_local:
        return Bindings(
            None,
            f"the transport is {executor.kind}: the bindings reach brokers from this "
            "process only, the CLI runs where the broker is",
        )
    try:
        module = import_bindings(options.flux_command, options.discover_bindings)
    except BindingsUnavailable as exc:
        return Bindings(None, f"flux bindings unusable: {exc}")
    return Bindings(module, version=bindings_version(module))


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
    learned = driver.facts
    queues = learned.queues
    log.info(
        "flux: %s (%s): broker %s, adapter %s, %s driver (%s), %s",
        learned.label,
        setting.source,
        learned.broker_version or "?",
        learned.policy.name,
        choice.name,
        choice.reason,
        "queues unknown" if queues is None else (", ".join(queues.names) or "anonymous queue"),
    )
    return FluxSession(setting, learned, driver, choice, bindings, aimed, host, uri)


def no_system_instance(why: str) -> str:
    """Why no Flux instance was asked for and none runs here, and what to set."""
    return (
        f"no Flux instance to submit to: no URI was given and the system instance does not "
        f"answer ({scheduler_message(why)}); inside a Flux allocation FLUX_URI is set for "
        "you, from elsewhere set HPCBRIDGE_FLUX_URI (or --flux-uri) to the instance: its "
        "URI, a Flux job id, or slurm:<id> / lsf:<id> of the allocation that runs it"
    )


def _native_driver(
    bindings: Bindings, uri: Optional[str], options: FluxOptions, commands: FluxCommands
) -> Tuple[NativeDriver, str]:
    if bindings.module is None:
        raise SchedulerUnavailableError(bindings.error)
    connection = BindingsConnection(
        bindings.module, uri, options.command_timeout, _flux_bin_dir(options.flux_command)
    )
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
    return facts(uri, broker_version, policy, reason, queues)


def _flux_bin_dir(flux_command: str) -> Optional[str]:
    """The directory of a ``flux`` given by path (put on the PATH of native jobs)."""
    if os.sep in flux_command:
        return os.path.dirname(os.path.abspath(flux_command))
    return None
