"""Loading pyslurm only where it cannot take the process down or talk to the wrong cluster,
and catching what libslurm writes to the process's stderr while pyslurm calls it."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from typing import IO, Any, Dict, Iterator, List, Mapping, Optional, Tuple

from ...errors import SchedulerUnavailableError
from .commands import parse_version

# libslurm reads the process's SLURM_CONF once, at import; a missing file makes it retry
# ~60 s then exit the process, one that does not parse exits at once: no exception.

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
    """Why pyslurm must not be used for ``wanted``; None when it may. ``loaded``: (already
    imported, the SLURM_CONF it was imported with)."""
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
    """Import pyslurm in a child process (once per SLURM_CONF): None when that works."""
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


def versions_match(pyslurm_version: Optional[str], slurm_version: Optional[str]) -> bool:
    """pyslurm ``X.Y.Z`` is built for Slurm ``X.Y`` (``24.5.1`` ~ ``24.05.4``)."""
    ours, theirs = parse_version(pyslurm_version or ""), parse_version(slurm_version or "")
    return ours is not None and theirs is not None and ours[:2] == theirs[:2]


# -- libslurm's words on fd 2 --------------------------------------------------------

#: a line of libslurm's log (``python: error: invalid partition specified: nosuchpart``)
_LOG_LINE = re.compile(r"^\S+: (?:error|fatal|warning|info|verbose|debug\d*): (?P<message>.*)$")

_lock = threading.Lock()
#: one temporary file per process, emptied before each call
_sink: Optional[IO[bytes]] = None


def split(text: str) -> Tuple[List[str], str]:
    """libslurm's messages (their level and program name stripped), and the rest of
    ``text`` as it was written.  Pure."""
    messages: List[str] = []
    rest: List[str] = []
    for line in text.splitlines(keepends=True):
        match = _LOG_LINE.match(line.rstrip("\n"))
        if match:
            messages.append(match.group("message").strip())
        else:
            rest.append(line)
    return messages, "".join(rest)


def _flush_stderr() -> None:
    try:
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # no stderr, or a closed one
        pass


@contextmanager
def caught(messages: List[str]) -> Iterator[None]:
    """Run the block with fd 2 caught; libslurm's lines are appended to ``messages`` when it
    ends, anything else written meanwhile (another thread's) goes on to the real stderr.
    One block at a time; where fd 2 cannot be redirected, the block runs as it is."""
    global _sink
    with _lock:
        _flush_stderr()
        try:
            if _sink is None:
                _sink = tempfile.TemporaryFile()  # noqa: SIM115 - kept for the process's life
            sink = _sink
            sink.seek(0)
            sink.truncate()
            saved: Optional[int] = os.dup(2)
        except OSError:
            saved = None
        if saved is None:
            yield
            return
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            _flush_stderr()  # another thread's Python output, into the file too
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            found, rest = split(sink.read().decode("utf-8", errors="replace"))
            messages.extend(found)
            if rest:
                _write_all(2, rest.encode("utf-8", errors="replace"))


def _write_all(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # the real stderr is gone: nothing to write to
