"""Resolving a target (``slurm:ID``, ``jobid:ID``, a Flux job id, ...) to a URI.

Like ``flux uri --remote TARGET``: in-process with the bindings when they
work here, else by running ``flux uri`` where the commands run.  A job that
is still starting is waited for, up to the ready timeout.  The answer is
turned into the ``local://`` form when the target runs where the commands
run (see ``uri.local_form``).
"""

from __future__ import annotations

import logging
import platform
import time
from typing import Any, Callable, Optional

from ...errors import ConfigurationError
from ...transports.base import Executor
from .ids import parse_job_id
from .planning import FluxOptions
from .runner import FluxCommands
from .uri import always_local, classify, local_form
from .versions import FluxPolicy

log = logging.getLogger("hpcbridge")


def command_host(executor: Executor, commands: FluxCommands) -> Optional[str]:
    """The host the commands run on (where a ``local://`` URI is usable)."""
    if executor.is_local:
        return platform.node()
    return commands.hostname()


def resolve_target(
    target: str,
    *,
    commands: FluxCommands,
    options: FluxOptions,
    policy: FluxPolicy,
    flux_module: Any,
    here: Callable[[], Optional[str]],
    local: Optional[bool] = None,
) -> str:
    """The URI of ``target``; ``ConfigurationError`` when it cannot be resolved.

    ``local=None``: the ``local://`` form when the target runs on the host
    ``here()`` names (where the commands run); ``True``: always; ``False``: never.
    """
    kind, text = classify(target)
    if kind == "uri":
        return text
    uri = _native_uri(flux_module, text, options) if flux_module is not None else ""
    if not uri:
        parent = commands.for_uri(options.parent_uri or None)
        try:
            uri = parent.resolve_uri(text, policy, options.ready_timeout)
        except LookupError as exc:
            raise ConfigurationError(f"cannot resolve {target!r}: {exc}") from None
    if local is False:
        return uri
    localized = local_form(uri, here())
    if local and localized == uri:
        localized = always_local(uri)
    return localized


def _native_uri(flux_module: Any, target: str, options: FluxOptions) -> str:
    """In-process resolution, retried while the job is starting; "" to let the CLI try."""
    deadline = time.monotonic() + options.ready_timeout
    while True:
        try:
            return resolve_uri_natively(flux_module, target, options.parent_uri)
        except LookupError as exc:
            if time.monotonic() >= deadline:
                raise ConfigurationError(f"cannot resolve {target!r}: {exc}") from None
            time.sleep(0.25)
        except Exception as exc:  # noqa: BLE001 - the CLI may still manage
            log.debug("native URI resolution of %s failed (%s); trying flux uri", target, exc)
            return ""


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
