"""Loading pyslurm only where it cannot take the process down or talk to the wrong cluster,
and catching what libslurm writes to the process's stderr while pyslurm calls it."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import logging
import os
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import replace
from typing import IO, Any, Callable, Dict, Iterator, List, Optional

from ...engine.driver import Call
from ...errors import SchedulerUnavailableError
from .pyslurm_records import PYSLURM_SKIP_REASON, Outcome, conf_problem, split

# libslurm reads the process's SLURM_CONF once, at import; a missing file makes it retry
# ~60 s then exit the process, one that does not parse exits at once: no exception.

#: seconds a probe import in a child process may take (libslurm retries ~60 s on a bad config)
PROBE_TIMEOUT = 15.0

#: the SLURM_CONF pyslurm was loaded with in this process, once loaded (None: unset)
_loaded: Dict[str, Optional[str]] = {}
#: a probe's verdict per process SLURM_CONF: None when the import is safe, else why not
_probed: Dict[Optional[str], Optional[str]] = {}


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


log = logging.getLogger("hpcbridge.slurm")

# -- libslurm's words on fd 2 --------------------------------------------------------

_lock = threading.Lock()
#: one temporary file per process, emptied before each call
_sink: Optional[IO[bytes]] = None


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


def calling(call: Callable[[], Any], shown: bool = False) -> Outcome:
    """``call()``'s value or the exception it raised, with what libslurm wrote to stderr
    meanwhile (caught, not shown: logged, at INFO after a ``shown`` call that worked)."""
    said: List[str] = []
    try:
        with caught(said):
            outcome = Outcome(call())
    except Exception as exc:  # RPCError from Slurm; ValueError/TypeError from pyslurm
        outcome = Outcome(error=exc)
    level = logging.INFO if shown and outcome.error is None else logging.DEBUG
    for line in said:
        log.log(level, "libslurm: %s", line)
    return replace(outcome, said=tuple(said))


def call(what: str, fn: Callable[[], Any], shown: bool = False) -> Call:
    """A request into pyslurm for the runner: ``fn()`` ``calling``'s way, named ``what``."""
    return Call(what, lambda: calling(fn, shown))
