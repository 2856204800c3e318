"""Which Flux instance to talk to: the URI setting's precedence and what a value means.

Precedence: an explicit ``uri=`` > ``HPCBRIDGE_FLUX_URI`` (settings) > the
``FLUX_URI`` of the environment the settings were read from (set inside an
allocation; only meaningful for the local transport - over SSH it names a
socket on *this* machine) > the system instance (``None``: no ``FLUX_URI``).

A value is either a URI, used as given (``local://``, ``ssh://``), or a
*target* resolved like ``flux uri --remote TARGET`` (see ``target.py``):
``slurm:<id>``, ``lsf:<id>``, ``pid:<pid>``, ``jobid:<id>`` or a bare Flux
job id (a nested instance made by ``flux batch``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

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


def local_form(uri: str, here: Optional[str]) -> str:
    """``ssh://HOST/path`` -> ``local:///path`` when HOST is where commands run.

    ``flux uri --remote`` always answers ``ssh://HOST/...``; connecting that
    way needs an sshd on port 22 of HOST even on the same machine (``flux
    proxy`` fails with "Connection refused" without one).  The local form
    needs nothing.
    """
    if not uri.startswith("ssh://") or not here:
        return uri
    rest = uri[len("ssh://") :]
    host, slash, path = rest.partition("/")
    user_host = host.rsplit("@", 1)[-1].split(":", 1)[0]
    short_here = here.split(".", 1)[0]
    if slash and user_host in (here, short_here, "localhost", "127.0.0.1"):
        return "local:///" + path.split("?", 1)[0]
    return uri


def always_local(uri: str) -> str:
    """The ``local://`` form of an ``ssh://`` URI whatever its host (``hpcbridge uri --local``)."""
    if uri.startswith("ssh://"):
        return "local:///" + uri.split("/", 3)[-1]
    return uri
