"""flux-core's Python bindings: imported safely (also found beside the ``flux`` command, SIGINT
left to its handler), a handle per thread to one broker (``BindingsConnection``), and a
target's URI resolved in-process as ``flux uri --remote`` does.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional

from ...retrying import retry
from ...transports.base import Executor
from .ids import parse_job_id
from .instance import FluxOptions, bindings_dir_for
from .native_driver import SigintKept
from .uri import not_resolved

log = logging.getLogger("hpcbridge")


@dataclass(frozen=True)
class Bindings:
    """The imported ``flux`` module, or why there is none."""

    module: Any
    error: str = ""
    #: the libflux-core release the bindings are linked with, when they imported
    version: Optional[str] = None


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


#: what the first import loads; the rest of the bindings come through their packages
_FIRST_IMPORTS = ("flux", "flux.job", "_flux")


class BindingsUnavailable(Exception):
    """The Flux bindings cannot be used here; ``str()`` says why."""


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
    keep_sigint_handler()
    return module


def keep_sigint_handler() -> None:
    # flux.util's `interruptible` sets SIGINT to SIG_DFL around each blocking future call
    # in the main thread: Ctrl-C there kills the process, no `finally` run (a pack's
    # allocations stay held). SIGINT keeps its handler instead, acted on once the call
    # returns (hpcbridge's calls are bounded by timeouts).
    util: Any = sys.modules.get("flux.util")
    if util is not None and getattr(util, "signal", None) is signal:
        util.signal = SigintKept()


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
