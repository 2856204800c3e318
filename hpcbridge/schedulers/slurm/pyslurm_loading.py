"""Loading pyslurm only where it cannot take the process down or talk to the wrong cluster.

``import pyslurm`` initialises libslurm with the *process's* ``SLURM_CONF``
(read once, for the life of the process).  When that file is missing,
libslurm retries for about a minute and then exits the whole process; when
it does not parse, it exits at once: no exception reaches Python.  So the
``SLURM_CONF`` the settings say is checked before the import (it must be the
process's, and a child process must import pyslurm with it first, ~0.25 s
once per process), and pyslurm is used only for that one configuration.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from typing import Any, Dict, Mapping, Optional, Tuple

from ...errors import SchedulerUnavailableError
from .commands import parse_version

#: why the real-driver tests skip here
PYSLURM_SKIP_REASON = "pyslurm not importable (PyPI has it only for Slurm 25.11)"

#: seconds a probe import in a child process may take (libslurm retries ~60 s on a bad config)
PROBE_TIMEOUT = 15.0

#: the SLURM_CONF pyslurm was loaded with in this process, once loaded (None: unset)
_loaded: Dict[str, Optional[str]] = {}
#: a probe's verdict per process SLURM_CONF: None when the import is safe, else why not
_probed: Dict[Optional[str], Optional[str]] = {}


def wanted_slurm_conf(
    command_env: Mapping[str, str], process_env: Mapping[str, str]
) -> Optional[str]:
    """The ``SLURM_CONF`` the Slurm commands run with: the settings' first, else the process's."""
    return command_env.get("SLURM_CONF") or process_env.get("SLURM_CONF") or None


def conf_problem(
    wanted: Optional[str], process_conf: Optional[str], loaded: Tuple[bool, Optional[str]]
) -> Optional[str]:
    """Why pyslurm must not be used for ``wanted``; None when it may (pure).

    ``loaded`` is (already imported, the SLURM_CONF it was imported with).
    """
    imported, loaded_conf = loaded
    if imported:
        if loaded_conf != wanted:
            return (
                f"pyslurm in this process was loaded for SLURM_CONF={loaded_conf or '(unset)'}, "
                f"the settings say {wanted or '(unset)'}"
            )
        return None
    if wanted != process_conf:
        return (
            f"pyslurm reads the process's SLURM_CONF ({process_conf or 'unset'}), "
            f"not the settings' ({wanted}): export SLURM_CONF={wanted} to use it"
        )
    return None


def _probe(process_conf: Optional[str]) -> Optional[str]:
    """Import pyslurm in a child process: None when that works, else why not."""
    if process_conf in _probed:
        return _probed[process_conf]
    try:
        child = subprocess.run(
            [sys.executable, "-c", "import pyslurm"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        lines = (child.stderr or child.stdout).strip().splitlines()
        last = lines[-1] if lines else f"exit {child.returncode}"
        verdict = None if child.returncode == 0 else f"import pyslurm fails here: {last}"
    except subprocess.TimeoutExpired:
        verdict = f"import pyslurm did not finish in {PROBE_TIMEOUT:g} s (no usable slurm.conf?)"
    except OSError as exc:
        verdict = f"cannot probe import pyslurm: {exc}"
    _probed[process_conf] = verdict
    return verdict


def installed_pyslurm_version() -> Optional[str]:
    """pyslurm's version from its installed metadata, without importing it (None: not installed)."""
    try:
        return importlib.metadata.version("pyslurm")
    except importlib.metadata.PackageNotFoundError:
        return None


def import_pyslurm() -> Any:
    """``import pyslurm``, the process's SLURM_CONF noted; exceptions as the import raises them."""
    conf = os.environ.get("SLURM_CONF") or None
    module = importlib.import_module("pyslurm")
    _loaded.setdefault("conf", conf)
    return module


def ensure_loadable(wanted: Optional[str]) -> None:
    """``SchedulerUnavailableError`` saying why ``import pyslurm`` is not safe for
    the cluster ``wanted`` names; nothing when it is."""
    process_conf = os.environ.get("SLURM_CONF") or None
    imported = "pyslurm" in sys.modules
    if not imported and importlib.util.find_spec("pyslurm") is None:
        raise SchedulerUnavailableError(f"{PYSLURM_SKIP_REASON}: no module named 'pyslurm'")
    loaded_conf = _loaded.get("conf", process_conf) if imported else None
    problem = conf_problem(wanted, process_conf, (imported, loaded_conf))
    if problem is None and not imported:
        # A readable file may still not parse: libslurm then ends the process at once.
        problem = (_readable_problem(wanted) if wanted else None) or _probe(process_conf)
    if problem:
        raise SchedulerUnavailableError(problem)


def _readable_problem(conf: str) -> Optional[str]:
    if os.path.isfile(conf) and os.access(conf, os.R_OK):
        return None
    return f"SLURM_CONF {conf} is not a readable file (libslurm would end the process)"


def major_minor(version: Optional[str]) -> Optional[Tuple[int, int]]:
    parsed = parse_version(version or "")
    return (parsed[0], parsed[1]) if parsed and len(parsed) >= 2 else None


def versions_match(pyslurm_version: Optional[str], slurm_version: Optional[str]) -> bool:
    """pyslurm ``X.Y.Z`` is built for Slurm ``X.Y`` (``24.5.1`` ~ ``24.05.4``)."""
    ours, theirs = major_minor(pyslurm_version), major_minor(slurm_version)
    return ours is not None and ours == theirs
