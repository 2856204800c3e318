"""Which Flux instance to talk to: the URI setting's precedence and what a value means.

Precedence: an explicit ``uri=`` > ``HPCBRIDGE_FLUX_URI`` (settings) > the
``FLUX_URI`` of the environment the settings were read from (set inside an
allocation; only meaningful for the local transport - over SSH it names a
socket on *this* machine) > the system instance (``None``: no ``FLUX_URI``).

A value is either a URI, used as given (``local://``, ``ssh://``), or a
*target* resolved like ``flux uri --remote TARGET`` (``resolve_target``):
``slurm:<id>``, ``lsf:<id>``, ``pid:<pid>``, ``jobid:<id>`` or a bare Flux
job id (a nested instance made by ``flux batch``) - in-process with the
bindings when they work here, else by running ``flux uri`` where the commands
run.  A job that is still starting is waited for, up to the ready timeout;
a target that names no running job (never existed, ended, still not up)
raises ``JobNotFoundError``.  The answer is turned into the ``local://``
form when the target runs where the commands run (``local_form``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import sys
import tempfile
from typing import Any, Callable, Iterator, List, Optional, Tuple

from ...errors import ConfigurationError, JobNotFoundError
from ...retrying import retry
from ...transports.base import Executor
from .commands import FluxCommands
from .ids import is_job_id, parse_job_id
from .instance import FluxOptions, UriSetting
from .versions import POLICIES, FluxPolicy, policy_by_name

log = logging.getLogger("hpcbridge")

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


def command_host(executor: Executor, commands: FluxCommands) -> Optional[str]:
    """The host the commands run on (where a ``local://`` URI is usable)."""
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
    """The URI of ``target``; ``ConfigurationError`` when it cannot be resolved.

    A bare job id is looked up in ``options.parent_uri`` (else the commands'
    default instance).  ``local=None``: the ``local://`` form when the target
    runs on the host ``here()`` names (where the commands run); ``True``:
    always; ``False``: never.
    """
    kind, text = classify(target)
    if kind == "uri":
        return text
    budget, parent_uri = options.ready_timeout, options.parent_uri
    uri = _native_uri(flux_module, text, parent_uri, budget) if flux_module else ""
    if not uri:
        parent = commands.for_uri(parent_uri or None)
        try:
            uri = parent.resolve_uri(text, target_policy(options), budget)
        except LookupError as exc:
            raise not_resolved(target, str(exc)) from None
    if local is False:
        return uri
    localized = local_form(uri, here())
    if local and localized == uri:
        localized = always_local(uri)
    return localized


def target_policy(options: FluxOptions) -> FluxPolicy:
    """The policy for resolving a target, before its broker's release is known."""
    return policy_by_name(options.adapter_version) if options.adapter_version else POLICIES[0]


def not_resolved(target: str, why: str) -> JobNotFoundError:
    """A target that names no running job with an instance to reach (exit 4)."""
    return JobNotFoundError(
        f"cannot resolve {target!r}: no running job with a Flux instance ({why}); check "
        "that the job exists and runs (squeue, flux jobs), or wait until it started"
    )


def _native_uri(flux_module: Any, target: str, parent_uri: Optional[str], budget: float) -> str:
    """In-process resolution, retried while the job is starting; "" to let the CLI try."""
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
    """Keep what the resolver's own subprocesses write to stderr (Flux's Slurm plugin runs
    ``squeue``, whose "slurm_load_jobs error: ..." would appear as a raw line) in ``said``."""
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
    """``flux uri --remote TARGET`` in-process.

    A job id is looked up in ``parent_uri`` (or the enclosing instance);
    other schemes (``slurm:``, ``lsf:``, ``pid:``) go through
    ``flux.uri.FluxURIResolver``.  ``LookupError``: not published yet.
    """
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
