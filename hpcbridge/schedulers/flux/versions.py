"""Version policies: what differs between the Flux releases we support.

Two small policies, 0.26 and 0.49, each a list of facts about the release
(command names, queue support, which RPCs and output formats exist).  The
one whose minimum is the highest one not above the broker's version is
chosen, by comparing parsed versions (``0.9 < 0.49 < 0.88``, which string
comparison gets wrong); ``HPCBRIDGE_FLUX_ADAPTER_VERSION`` overrides it.
Everything else is the same code for every release.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from packaging.version import InvalidVersion, Version

from ...errors import ConfigurationError, SchedulerUnavailableError

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
    # `flux python` execs its interpreter with argv[0] "python": another python
    # first on PATH (a virtualenv, pyenv) lends it its library path and the
    # bindings fail to import (No module named '_cffi_backend').
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
)

#: newest first
POLICIES: Tuple[FluxPolicy, ...] = (POLICY_0_49, POLICY_0_26)
OLDEST = POLICIES[-1]


def parse_version(text: str) -> Version:
    """A comparable version from Flux's spellings.

    ``0.88.0``, ``0.50.0-12-g3d9c4b2`` (git describe), ``v0.49.0``: the
    leading dotted numbers count.
    """
    match = _LEADING_VERSION.search(str(text).strip())
    if not match:
        raise ValueError(f"no version number in {text!r}")
    try:
        return Version(match.group(1))
    except InvalidVersion as exc:  # pragma: no cover - the regex only lets digits through
        raise ValueError(f"cannot parse version {text!r}: {exc}") from None


def parse_flux_version_output(text: str) -> Dict[str, str]:
    """``flux version`` output as ``{"commands": ..., "libflux-core": ..., "broker": ...}``.

    The ``broker`` line appears only when a broker could be reached.
    """
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
    """The newest policy whose minimum the version reaches; refuse anything older."""
    parsed = parse_version(version)
    for policy in POLICIES:
        if parsed >= policy.minimum:
            return policy
    raise SchedulerUnavailableError(
        f"Flux {version} is too old: hpcbridge supports flux-core {OLDEST.minimum} and newer "
        f"(adapter versions {', '.join(p.name for p in POLICIES)})"
    )


def policy_by_name(name: str) -> FluxPolicy:
    """The policy an override names: ``0.26``, ``0.26.0``, ``0.49``, ...

    A version between two policies picks the older one, like a broker of that
    version would.
    """
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
    """The policy to use and why (for ``doctor``)."""
    if override and override.strip().lower() not in ("", "auto"):
        policy = policy_by_name(override)
        return policy, f"set to {override!r} by the adapter-version setting"
    if broker_version is None:
        return POLICIES[0], "broker version unknown: newest adapter assumed"
    policy = policy_for_version(broker_version)
    return policy, f"broker {broker_version} >= {policy.minimum}"
