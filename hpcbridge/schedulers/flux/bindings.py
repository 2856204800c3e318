"""Loading flux-core's Python bindings, and what they are.

``import flux`` works as is where the bindings are on the path (``flux
python``, a job's environment, a site install).  Otherwise they are looked
for beside the ``flux`` command, ``<prefix>/lib/flux/python3.X``, where
flux-core installs them.  That directory is put on ``sys.path`` only while
``flux`` and ``flux.job`` are imported, then taken off again: later imports
of the bindings' own modules (``flux.uri``, ``flux.kvs``, ``_flux._hostlist``)
go through the already-imported packages' ``__path__``, so the process's
path is left as it was.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import sys
from typing import Any, Optional

log = logging.getLogger("hpcbridge")

#: what the first import loads; the rest of the bindings come through their packages
_FIRST_IMPORTS = ("flux", "flux.job", "_flux")


class BindingsUnavailable(Exception):
    """The Flux bindings cannot be used here; ``str()`` says why."""


def bindings_dir_for(flux_command: Optional[str]) -> Optional[str]:
    """``<prefix>/lib/flux/python3.X`` beside a ``<prefix>/bin/flux``, if it exists.

    That is where flux-core installs its own bindings; ``flux start`` and
    ``flux python`` set PYTHONPATH to it, but a plain Python does not.
    """
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
    """``flux`` with ``flux.job`` imported; raises ``BindingsUnavailable``.

    Any failure counts: ``ImportError`` (not installed, ``ply`` missing),
    ``OSError`` (``libflux-core.so.2`` not on the loader path), or anything a
    half-broken install raises.
    """
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
    return module


def _import_from(directory: str) -> Any:
    """Import the bindings with ``directory`` on the path for this import only."""
    _forget_failed_imports()
    sys.path.append(directory)  # after PYTHONPATH and site: a flux found there comes first
    try:
        module = _import()
        # the C parts: a package of its own beside ``flux`` in every release
        _import_optional("_flux")
        return module
    except BaseException:
        _forget_failed_imports()
        raise
    finally:
        sys.path.remove(directory)


def _import_optional(name: str) -> None:
    try:
        importlib.import_module(name)
    except ImportError:
        log.debug("flux bindings: no %s package", name)


def _forget_failed_imports() -> None:
    """Drop half-imported bindings modules so the next attempt starts afresh."""
    for name in list(sys.modules):
        ours = name in _FIRST_IMPORTS or name.startswith(("flux.", "_flux."))
        if ours and sys.modules[name] is not None:
            sys.modules.pop(name, None)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def bindings_version(flux_module: Any) -> Optional[str]:
    """The libflux-core version the bindings are linked with."""
    try:
        inner = importlib.import_module("flux.core.inner")
        return str(inner.ffi.string(inner.lib.flux_core_version_string()).decode())
    except Exception:  # noqa: BLE001 - only informative
        version = getattr(flux_module, "__version__", None)
        return None if version is None else str(version)
