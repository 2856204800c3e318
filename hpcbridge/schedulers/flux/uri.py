"""Which Flux instance an adapter means: the URI setting and where it came from (``uri=`` >
``HPCBRIDGE_FLUX_URI`` > a local ``FLUX_URI``), a URI told from a target to resolve
(``slurm:ID``, a Flux job id, ...), and a remote URI made local where commands run.  Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

from ...errors import ConfigurationError, JobNotFoundError
from .ids import is_job_id
from .instance import UriSetting

if TYPE_CHECKING:
    from ...settings.config import Settings

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


def not_resolved(target: str, why: str) -> JobNotFoundError:
    return JobNotFoundError(
        f"cannot resolve {target!r}: no running job with a Flux instance ({why}); check "
        "that the job exists and runs (squeue, flux jobs), or wait until it started"
    )


def choose_uri_setting(settings: Settings, local: bool, uri: Optional[str]) -> UriSetting:
    """The enclosing ``FLUX_URI`` counts only for ``local`` commands (it names a local socket)."""
    return choose_uri(uri, settings.flux_uri, settings.enclosing_flux_uri, local_transport=local)


def localized(uri: str, here: Optional[str], local: Optional[bool]) -> str:
    """``uri`` as the commands on ``here`` reach it (``local_form``); ``local=True``: an
    ``ssh://`` URI always as ``local://``."""
    found = local_form(uri, here)
    if local and found == uri and uri.startswith("ssh://"):
        found = "local:///" + uri.split("/", 3)[-1]
    return found
