"""Opening a Flux session once: the instance (a URI, or a target such as ``slurm:ID`` resolved
like ``flux uri --remote``), the bindings (also found beside the ``flux`` command), the driver
and the release.  URI precedence: ``uri=`` > ``HPCBRIDGE_FLUX_URI`` > a local ``FLUX_URI``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import platform
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Protocol, Tuple

from ...config import Settings
from ...engine.driver import DriverChoice, NativeDriverBroken, SchedulerDriver, choose_driver
from ...errors import ConfigurationError, JobNotFoundError, SchedulerUnavailableError
from ...retrying import retry
from ...transports.base import Executor
from .bindings_driver import BindingsConnection, NativeDriver
from .command_driver import CLIDriver
from .command_line import scheduler_message
from .commands import FluxCommands
from .instance import (
    POLICIES,
    FluxOptions,
    FluxPolicy,
    InstanceFacts,
    QueueInfo,
    UriSetting,
    choose_policy,
    facts,
    policy_by_name,
)
from .jobspec import error_text
from .status import is_job_id, parse_job_id
from .submission import NEVER_REACHED, TimeLeft

log = logging.getLogger("hpcbridge")

# `flux getattr` with no broker says "flux_open: <errno text>"; submit and the
# bindings say "Unable to connect to Flux"
NO_BROKER = (*NEVER_REACHED, "flux_open:")


def no_broker(message: str) -> bool:
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
    """The enclosing ``FLUX_URI`` counts only for local commands (it names a local socket)."""
    return choose_uri(
        uri, settings.flux_uri, settings.enclosing_flux_uri, local_transport=executor.is_local
    )


def load_bindings(executor: Executor, options: FluxOptions) -> Bindings:
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


def learn_facts(
    uri: Optional[str],
    broker_version: Optional[str],
    options: FluxOptions,
    fetch_queues: Callable[[FluxPolicy], Optional[QueueInfo]],
) -> InstanceFacts:
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


#: what the first import loads; the rest of the bindings come through their packages
_FIRST_IMPORTS = ("flux", "flux.job", "_flux")


class BindingsUnavailable(Exception):
    """The Flux bindings cannot be used here; ``str()`` says why."""


def bindings_dir_for(flux_command: Optional[str]) -> Optional[str]:
    """``<prefix>/lib/flux/python3.X`` beside a ``<prefix>/bin/flux``, where flux-core installs
    its bindings (``flux python`` sets PYTHONPATH to it, a plain Python does not)."""
    if not flux_command:
        return None
    path = flux_command if os.sep in flux_command else shutil.which(flux_command)
    if not path:
        return None
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(path)))
    candidate = os.path.join(
        prefix, "lib", "flux", f"python{sys.version_info[0]}.{sys.version_info[1]}"
    )
    return candidate if os.path.isdir(os.path.join(candidate, "flux")) else None


def import_bindings(flux_command: Optional[str] = None, discover: bool = True) -> Any:
    """``flux`` with ``flux.job`` imported; any failure is ``BindingsUnavailable``."""
    try:
        return _import()
    except Exception as first:  # noqa: BLE001 - every failure means "use the CLI"
        reason = _describe(first)
        extra = bindings_dir_for(flux_command) if discover else None
        if extra is None or extra in sys.path or sys.modules.get("flux", False) is None:
            raise BindingsUnavailable(reason) from first
        try:
            module = _import_from(extra)
        except Exception as second:  # noqa: BLE001
            raise BindingsUnavailable(f"{reason}; with {extra}: {_describe(second)}") from second
        log.debug("flux bindings found beside %s: %s", flux_command, extra)
        return module


def _import() -> Any:
    module = importlib.import_module("flux")
    importlib.import_module("flux.job")
    _keep_sigint_handler()
    return module


class _SigintKept:
    """The ``signal`` module as ``flux.util`` sees it: SIGINT's handler left as it is."""

    def __getattr__(self, name: str) -> Any:
        return getattr(signal, name)

    @staticmethod
    def signal(signum: int, handler: Any) -> Any:
        if signum == signal.SIGINT:
            return signal.getsignal(signum)
        return signal.signal(signum, handler)


def _keep_sigint_handler() -> None:
    # flux.util's `interruptible` sets SIGINT to SIG_DFL around each blocking future call
    # in the main thread: Ctrl-C there kills the process, no `finally` run (a pack's
    # allocations stay held). SIGINT keeps its handler instead, acted on once the call
    # returns (hpcbridge's calls are bounded by timeouts).
    util: Any = sys.modules.get("flux.util")
    if util is not None and getattr(util, "signal", None) is signal:
        util.signal = _SigintKept()


def _import_from(directory: str) -> Any:
    """Import the bindings with ``directory`` on the path for this import only (later imports
    of their modules go through the packages' ``__path__``)."""
    _forget_failed_imports()
    sys.path.append(directory)  # after PYTHONPATH and site: a flux found there comes first
    try:
        module = _import()
        try:  # the C parts: a package of its own beside ``flux`` in every release
            importlib.import_module("_flux")
        except ImportError:
            log.debug("flux bindings: no _flux package")
        return module
    except BaseException:
        _forget_failed_imports()
        raise
    finally:
        sys.path.remove(directory)


def _forget_failed_imports() -> None:
    for name in list(sys.modules):
        ours = name in _FIRST_IMPORTS or name.startswith(("flux.", "_flux."))
        if ours and sys.modules[name] is not None:
            sys.modules.pop(name, None)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def bindings_version(flux_module: Any) -> Optional[str]:
    try:
        inner = importlib.import_module("flux.core.inner")
        return str(inner.ffi.string(inner.lib.flux_core_version_string()).decode())
    except Exception:  # noqa: BLE001 - only informative
        version = getattr(flux_module, "__version__", None)
        return None if version is None else str(version)


URI_SCHEMES = ("local", "ssh")
TARGET_SCHEMES = ("slurm", "lsf", "jobid", "pid")


def choose_uri(
    explicit: Optional[str],
    settings_uri: Optional[str],
    enclosing_uri: Optional[str],
    *,
    local_transport: bool,
) -> UriSetting:
    if explicit:
        return UriSetting(explicit.strip(), "uri= argument")
    if settings_uri:
        return UriSetting(settings_uri.strip(), "HPCBRIDGE_FLUX_URI")
    if local_transport and enclosing_uri and enclosing_uri.strip():
        return UriSetting(enclosing_uri.strip(), "FLUX_URI environment")
    return UriSetting(None, "system instance")


def classify(value: str) -> Tuple[str, str]:
    """``("uri", value)`` for a usable URI, ``("target", normalized)`` to resolve (a bare job id
    becomes ``jobid:<id>``); ``ConfigurationError`` for anything else."""
    text = value.strip()
    scheme, sep, _rest = text.partition(":")
    if sep and scheme in URI_SCHEMES:
        return "uri", text
    if sep and scheme in TARGET_SCHEMES:
        return "target", text
    if is_job_id(text):
        return "target", f"jobid:{text}"
    raise ConfigurationError(
        f"cannot use {value!r} as a Flux URI: expected local://PATH, ssh://HOST/PATH, "
        "slurm:JOBID, lsf:JOBID, pid:PID, jobid:ID or a Flux job id"
    )


def local_form(uri: str, here: Optional[str]) -> str:
    """``ssh://HOST/path`` -> ``local:///path`` when HOST is where commands run."""
    # An ssh:// URI needs an sshd on HOST even on the same machine ("Connection refused").
    if not uri.startswith("ssh://") or not here:
        return uri
    rest = uri[len("ssh://") :]
    host, slash, path = rest.partition("/")
    user_host = host.rsplit("@", 1)[-1].split(":", 1)[0]
    short_here = here.split(".", 1)[0]
    if slash and user_host in (here, short_here, "localhost", "127.0.0.1"):
        return "local:///" + path.split("?", 1)[0]
    return uri


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
    uri = _native_uri(flux_module, text, parent_uri, budget) if flux_module else ""
    if not uri:
        parent = commands.for_uri(parent_uri or None)
        try:
            # before the target's release is known: the one forced, else the newest
            version = options.adapter_version
            policy = policy_by_name(version) if version else POLICIES[0]
            uri = parent.resolve_uri(text, policy, budget)
        except LookupError as exc:
            raise not_resolved(target, str(exc)) from None
    if local is False:
        return uri
    localized = local_form(uri, here())
    if local and localized == uri and uri.startswith("ssh://"):
        localized = "local:///" + uri.split("/", 3)[-1]
    return localized


def not_resolved(target: str, why: str) -> JobNotFoundError:
    return JobNotFoundError(
        f"cannot resolve {target!r}: no running job with a Flux instance ({why}); check "
        "that the job exists and runs (squeue, flux jobs), or wait until it started"
    )


def _native_uri(flux_module: Any, target: str, parent_uri: Optional[str], budget: float) -> str:
    said: List[str] = []
    try:
        with _stderr_kept(said):
            return retry(
                lambda: resolve_uri_natively(flux_module, target, parent_uri),
                budget=budget,
                retry_on=(LookupError,),
                what=f"resolving {target}",
            )
    except LookupError as exc:
        raise not_resolved(target, str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - the CLI may still manage
        words = "; ".join(said)
        log.debug(
            "native URI resolution of %s failed (%s: %s); trying flux uri", target, exc, words
        )
        return ""


@contextlib.contextmanager
def _stderr_kept(said: List[str]) -> Iterator[None]:
    """Keep in ``said`` what the resolver's subprocesses write to stderr (Flux's Slurm plugin
    runs ``squeue``: "slurm_load_jobs error: ...")."""
    try:
        fileno = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # no real stderr (captured): nothing leaks
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fileno)
    with tempfile.TemporaryFile(mode="w+b") as kept:
        os.dup2(kept.fileno(), fileno)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, fileno)
            os.close(saved)
            kept.seek(0)
            text = kept.read().decode("utf-8", "replace")
            said.extend(line.strip() for line in text.splitlines() if line.strip())


def resolve_uri_natively(flux_module: Any, target: str, parent_uri: Optional[str]) -> str:
    """``flux uri --remote TARGET`` in-process; ``LookupError``: not published yet."""
    from flux.uri import FluxURIResolver, JobURI

    scheme, _, rest = target.partition(":")
    if scheme != "jobid" and ":" in target:
        return str(JobURI(str(FluxURIResolver().resolve(target))).remote)
    job_text = rest if scheme == "jobid" else target
    parent = flux_module.Flux(parent_uri) if parent_uri else flux_module.Flux()
    info = flux_module.job.job_list_id(parent, parse_job_id(job_text)).get_jobinfo()
    if info.state != "RUN":
        raise ValueError(f"Flux job {job_text} is not running (state {info.state})")
    try:
        uri = str(info.user.uri)
    except (AttributeError, KeyError):
        uri = ""
    if not uri or uri == "None":
        raise LookupError(f"Flux job {job_text} has not published its URI yet")
    return str(JobURI(uri).remote)
