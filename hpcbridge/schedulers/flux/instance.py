"""What an adapter knows of its Flux instance (options, where, release, queues), and the version
policies of the releases (0.26, 0.49, 0.88): the newest whose minimum the broker reaches.  Pure.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from packaging.version import InvalidVersion, Version

from ...errors import ConfigurationError, SchedulerUnavailableError

log = logging.getLogger("hpcbridge")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class FluxOptions:
    """How the adapter was asked to talk to Flux (constructor arguments over settings)."""

    flux_command: str = "flux"
    #: "auto", "native" or "cli"
    requested_driver: str = "auto"
    #: a version policy name forced by the settings, else "" (detect)
    adapter_version: str = ""
    #: the instance in which a bare job id target is looked up
    parent_uri: Optional[str] = None
    command_timeout: float = 60.0
    ready_timeout: float = 30.0
    probe_timeout: float = 10.0
    outer_time_margin: float = 60.0
    #: look for the bindings beside the flux command when ``import flux`` fails
    discover_bindings: bool = True


@dataclass(frozen=True)
class UriSetting:
    """The instance the settings name (``None``: the system instance) and where from."""

    value: Optional[str]
    source: str


@dataclass(frozen=True)
class QueueInfo:
    """The queues of one broker; ``names`` empty = only the anonymous queue."""

    names: Tuple[str, ...] = ()
    default: Optional[str] = None
    #: where the answer came from (for doctor and messages)
    source: str = ""


@dataclass(frozen=True)
class InstanceFacts:
    """What the session learned about its instance before making a driver."""

    #: ``None`` = the system instance
    uri: Optional[str]
    broker_version: Optional[str]
    policy: FluxPolicy
    policy_reason: str
    #: ``None`` when the queues could not be read
    queues: Optional[QueueInfo]
    #: how the instance is named in messages ("the system instance" or its URI)
    label: str


#: what flux-accounting writes for "no limit" in an integer column (0.23's INT_MAX)
NO_LIMIT = 2147483647


@dataclass(frozen=True)
class Association:
    """One bank of the user in flux-accounting, with the limits set on it."""

    bank: str
    default_bank: str
    #: jobs that may be pending or running at once (``None``: no limit)
    max_active_jobs: Optional[int] = None
    max_running_jobs: Optional[int] = None


def facts(
    uri: Optional[str],
    broker_version: Optional[str],
    policy: FluxPolicy,
    policy_reason: str,
    queues: Optional[QueueInfo],
) -> InstanceFacts:
    return InstanceFacts(
        uri, broker_version, policy, policy_reason, queues, uri or "the system instance"
    )


def queue_info_from_config(config: Mapping[str, Any], source: str = "config.get") -> QueueInfo:
    queues = config.get("queues") or {}
    names = tuple(queues) if isinstance(queues, Mapping) else ()
    default = None
    try:
        default = config["policy"]["jobspec"]["defaults"]["system"]["queue"]
    except (KeyError, TypeError):
        default = None
    return QueueInfo(names=names, default=str(default) if default else None, source=source)


def parse_config_json(text: str) -> QueueInfo:
    text = text.strip()
    config = json.loads(text) if text else {}
    if not isinstance(config, dict):
        raise ValueError(f"flux config get printed {type(config).__name__}, not an object")
    return queue_info_from_config(config, source="flux config get")


def strip_ansi(text: str) -> str:
    # `flux queue list` (0.88) colours its EN/ST marks even when piped.
    return _ANSI.sub("", text)


def parse_queue_list(text: str) -> QueueInfo:
    """``flux queue list``: a QUEUE column only where named queues are; the default has a ``*``."""
    # 0.88 prints EN/ST columns with ANSI colours; 0.49 has none.
    lines = [line for line in strip_ansi(text).splitlines() if line.strip()]
    if not lines:
        raise ValueError("flux queue list printed nothing")
    header = lines[0].split()
    if not header or header[0] != "QUEUE":
        return QueueInfo(source="flux queue list")
    names = []
    default = None
    for line in lines[1:]:
        name = line.split()[0]
        if name.endswith("*"):
            name = name.rstrip("*")
            default = name
        names.append(name)
    return QueueInfo(names=tuple(names), default=default, source="flux queue list")


_LEADING_VERSION = re.compile(r"(\d+(?:\.\d+)*)")


@dataclass(frozen=True)
class FluxPolicy:
    """The facts about one range of Flux releases that the drivers need."""

    name: str
    minimum: Version
    #: argv after ``flux`` for a batch job / a plain job / a cancel
    batch_command: Tuple[str, ...]
    submit_command: Tuple[str, ...]
    #: argv after ``flux`` that starts parallel tasks inside a job (``HPCBRIDGE_LAUNCHER``)
    run_command: Tuple[str, ...]
    cancel_command: Tuple[str, ...]
    #: named queues exist (``--queue``, ``config.get``, queue RPCs)
    queues: bool
    #: ``flux jobs --json``
    jobs_json: bool
    #: ``flux jobs --since=WHEN`` (inactive jobs only from WHEN on)
    jobs_since: bool
    #: the ``config.get`` RPC and ``flux config get``
    config_rpc: bool
    #: RFC 26 dependencies (``--dependency=afterok:ID``)
    dependencies: bool
    #: RFC 35 constraints (``--requires``)
    constraints: bool
    #: ``flux uri`` and ``flux.uri``
    uri_resolution: bool
    #: ``flux python`` runs the bindings' interpreter whatever ``python`` is first on PATH
    python_command: bool
    #: whole nodes (``exclusive`` of the jobspec's node resource, ``--exclusive``)
    exclusive: bool = False
    #: a start time (the ``begin-time`` dependency scheme, ``--begin-time``)
    begin_time: bool = False
    #: a signal before the time limit (the shell's ``signal`` option, ``--signal``)
    warning_signal: bool = False

    def __str__(self) -> str:
        return self.name


POLICY_0_26 = FluxPolicy(
    name="0.26",
    minimum=Version("0.26"),
    # 0.26 has only the "mini" spellings and no top-level `flux cancel`.
    batch_command=("mini", "batch"),
    submit_command=("mini", "submit"),
    run_command=("mini", "run"),
    cancel_command=("job", "cancel"),
    # `--queue` is an unrecognized argument and system.queue is ignored.
    queues=False,
    jobs_json=False,
    # `flux jobs` has no --since: every job of the user is listed.
    jobs_since=False,
    # config.get answers "Unknown service method".
    config_rpc=False,
    dependencies=False,
    constraints=False,
    uri_resolution=False,
    # `flux python` execs the first "python" on PATH: the bindings fail ('_cffi_backend').
    python_command=False,
)

POLICY_0_49 = FluxPolicy(
    name="0.49",
    minimum=Version("0.49"),
    batch_command=("batch",),
    submit_command=("submit",),
    run_command=("run",),
    cancel_command=("cancel",),
    queues=True,
    jobs_json=True,
    jobs_since=True,
    config_rpc=True,
    dependencies=True,
    constraints=True,
    uri_resolution=True,
    python_command=True,
    exclusive=True,
    begin_time=True,
)

POLICY_0_88 = replace(
    POLICY_0_49,
    name="0.88",
    minimum=Version("0.88"),
    # 0.49's shell ignores shell.options.signal; 0.88's sends it (the first tested here).
    warning_signal=True,
)

#: newest first
POLICIES: Tuple[FluxPolicy, ...] = (POLICY_0_88, POLICY_0_49, POLICY_0_26)
OLDEST = POLICIES[-1]


def parse_version(text: str) -> Version:
    """A comparable version (``0.9 < 0.49``) of ``0.88.0``, ``0.50.0-12-g3d9c``, ``v0.49.0``."""
    match = _LEADING_VERSION.search(str(text).strip())
    if not match:
        raise ValueError(f"no version number in {text!r}")
    try:
        return Version(match.group(1))
    except InvalidVersion as exc:  # pragma: no cover - the regex only lets digits through
        raise ValueError(f"cannot parse version {text!r}: {exc}") from None


def parse_flux_version_output(text: str) -> Dict[str, str]:
    """``flux version`` output as ``{"commands": ..., "libflux-core": ..., "broker": ...}``."""
    found: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        value = value.strip()
        if key in ("commands", "libflux-core", "broker", "libflux-security", "build-options"):
            found[key] = value
    return found


def policy_for_version(version: str) -> FluxPolicy:
    parsed = parse_version(version)
    for policy in POLICIES:
        if parsed >= policy.minimum:
            return policy
    raise SchedulerUnavailableError(
        f"Flux {version} is too old: hpcbridge supports flux-core {OLDEST.minimum} and newer "
        f"(adapter versions {', '.join(p.name for p in POLICIES)})"
    )


def policy_by_name(name: str) -> FluxPolicy:
    """The policy an override names (``0.26``, ``0.49.0``, ``latest``), as a broker would."""
    text = str(name).strip()
    if text.lower() in ("latest", "newest"):
        return POLICIES[0]
    try:
        return policy_for_version(text)
    except ValueError:
        raise ConfigurationError(
            f"unknown Flux adapter version {name!r}; choose one of "
            f"{', '.join(p.name for p in POLICIES)}"
        ) from None
    except SchedulerUnavailableError as exc:
        raise ConfigurationError(str(exc)) from None


def choose_policy(
    broker_version: Optional[str], override: Optional[str] = None
) -> Tuple[FluxPolicy, str]:
    if override and override.strip().lower() not in ("", "auto"):
        policy = policy_by_name(override)
        return policy, f"set to {override!r} by the adapter-version setting"
    if broker_version is None:
        return POLICIES[0], "broker version unknown: newest adapter assumed"
    policy = policy_for_version(broker_version)
    return policy, f"broker {broker_version} >= {policy.minimum}"


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


def assumed_policy(forced: str) -> FluxPolicy:
    """Before an instance's release is known: the one forced, else the newest."""
    return policy_by_name(forced) if forced else POLICIES[0]


def opened(facts: InstanceFacts, source: str, driver: str, reason: str) -> str:
    """What a session opened, for the log."""
    queues = facts.queues
    said = "queues unknown" if queues is None else (", ".join(queues.names) or "anonymous queue")
    return (
        f"{facts.label} ({source}): broker {facts.broker_version or '?'}, adapter "
        f"{facts.policy.name}, {driver} driver ({reason}), {said}"
    )


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
