"""Which Flux instance to talk to: ``FLUX_URI`` precedence and target resolution.

Precedence: an explicit ``uri=`` > ``HPCBRIDGE_FLUX_URI`` (settings) >
``FLUX_URI`` in this process's environment (set inside an allocation; only
meaningful for the local transport - over SSH it names a socket on *this*
machine) > the system instance (``None``: no ``FLUX_URI`` at all).

A value is either a URI, used as given (``local://``, ``ssh://``), or a
*target* resolved like ``flux uri --remote TARGET``: ``slurm:<id>``,
``lsf:<id>``, ``pid:<pid>``, ``jobid:<id>`` or a bare Flux job id (a nested
instance made by ``flux batch``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from ...errors import ConfigurationError
from .ids import is_job_id

URI_SCHEMES = ("local", "ssh")
TARGET_SCHEMES = ("slurm", "lsf", "jobid", "pid")


@dataclass(frozen=True)
class UriSetting:
    """The chosen value and where it came from."""

    value: Optional[str]
    source: str


def choose_uri(
    explicit: Optional[str],
    settings_uri: Optional[str],
    environment: Optional[Mapping[str, str]],
    *,
    local_transport: bool,
) -> UriSetting:
    if explicit:
        return UriSetting(explicit.strip(), "uri= argument")
    if settings_uri:
        return UriSetting(settings_uri.strip(), "HPCBRIDGE_FLUX_URI")
    if local_transport and environment is not None and environment.get("FLUX_URI", "").strip():
        return UriSetting(environment["FLUX_URI"].strip(), "FLUX_URI environment")
    return UriSetting(None, "system instance")


def classify(value: str) -> Tuple[str, str]:
    """``("uri", value)`` for a usable URI, ``("target", normalized)`` to resolve.

    A bare job id becomes ``jobid:<id>``.  Raises ``ConfigurationError`` for
    anything else.
    """
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


def is_remote(uri: Optional[str]) -> bool:
    return bool(uri) and str(uri).startswith("ssh://")


def resolve_target_cli(settings: Any, target: str, local: bool = False) -> str:
    """``hpcbridge uri TARGET``: the URI a later ``HPCBRIDGE_FLUX_URI=...`` can use.

    Resolved like ``flux uri --remote`` (natively when the bindings work and
    the transport is local, else by running ``flux uri`` where the commands
    run); the ``local://`` form is printed when the target runs on the host
    the commands run on, or always with ``local=True``.
    """
    from ...factory import build_executor
    from .adapter import FluxAdapter

    adapter = FluxAdapter(executor=build_executor(settings), settings=settings)
    try:
        return adapter.resolve_target(target, local=True if local else None)
    finally:
        adapter.close()
