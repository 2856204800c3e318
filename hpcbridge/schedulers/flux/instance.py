"""What an adapter asks of its Flux instance and knows of it: options, where, release, queues.

Pure.  ``InstanceFacts`` is learned once, when the session is opened
(``session.open_session``), and handed to the driver.  Instances come in two
kinds as far as queues go:

- **anonymous queue only** - the default of every ``flux start`` and nested
  ``flux batch`` instance.  A named queue is *rejected* there
  (``'debug' is not a valid queue``), so a requested queue is omitted;
- **named queues** (``[queues.NAME]`` in the config) - a job must name a
  valid one, unless ``policy.jobspec.defaults.system.queue`` names a
  default; otherwise Flux says ``no queue specified``.

The session fetches the config (``config.get`` RPC / ``flux config get``) or
the ``flux queue list`` table and hands the dict or text in here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from .versions import FluxPolicy

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
    """Which instance the settings name (a URI or a target, ``None`` = the system
    instance) and where that came from (``uri.choose_uri``)."""

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
    """From the broker's configuration (``config.get`` RPC or ``flux config get``)."""
    queues = config.get("queues") or {}
    names = tuple(queues) if isinstance(queues, Mapping) else ()
    default = None
    try:
        default = config["policy"]["jobspec"]["defaults"]["system"]["queue"]
    except (KeyError, TypeError):
        default = None
    return QueueInfo(names=names, default=str(default) if default else None, source=source)


def parse_config_json(text: str) -> QueueInfo:
    """``flux config get`` prints the whole configuration as one JSON object."""
    text = text.strip()
    config = json.loads(text) if text else {}
    if not isinstance(config, dict):
        raise ValueError(f"flux config get printed {type(config).__name__}, not an object")
    return queue_info_from_config(config, source="flux config get")


def strip_ansi(text: str) -> str:
    # `flux queue list` (0.88) colours its EN/ST marks even when piped.
    return _ANSI.sub("", text)


def parse_queue_list(text: str) -> QueueInfo:
    """``flux queue list``: a QUEUE column exists only when named queues do.

    0.88: ``QUEUE EN ST TDEFAULT ...`` with ANSI colour codes; 0.49 has no
    EN/ST columns.  The default queue carries a ``*`` after its name.
    An anonymous-only broker prints a table without the QUEUE column.
    """
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
