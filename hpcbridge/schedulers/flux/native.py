"""The native driver: flux-core's Python bindings, in this process.

Used only when ``import flux`` works *and* a handle to the broker opens and
answers (see ``probe``): bindings that import but cannot talk to the broker
(a missing ``libflux-core.so.2``, an ABI or protocol mismatch with the
broker's release, no broker) make the adapter fall back to the CLI.

Submissions are pipelined ``submit_async`` futures (one round trip for many
jobs), status for many ids is one ``JobList(h, ids=...)``, and waiting is
event driven: ``result_async`` futures wake the waiter the moment a job
becomes inactive instead of a fixed polling interval.
"""

from __future__ import annotations

import errno
import importlib
import logging
import os
import shutil
import sys
import threading
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from ...model import JobState, JobStatus
from . import jobspec as jobspec_module
from .commands import SubmitRequest, jobspec_params, statuses_from_facts
from .ids import canonical_job_id, parse_job_id
from .queues import QueueInfo, queue_info_from_config

log = logging.getLogger("hpcbridge")


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
        sys.path.append(extra)
        try:
            module = _import()
        except Exception as second:  # noqa: BLE001
            sys.path.remove(extra)
            raise BindingsUnavailable(f"{reason}; with {extra}: {_describe(second)}") from second
        log.debug("flux bindings found beside %s: %s", flux_command, extra)
        return module


def _import() -> Any:
    module = importlib.import_module("flux")
    importlib.import_module("flux.job")
    return module


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def bindings_version(flux_module: Any) -> Optional[str]:
    """The libflux-core version the bindings are linked with."""
    try:
        from flux.core.inner import ffi, lib

        return str(ffi.string(lib.flux_core_version_string()).decode())
    except Exception:  # noqa: BLE001 - only informative
        return getattr(flux_module, "__version__", None)


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class NativeDriver:
    """Talks to one broker through the bindings; one handle per thread."""

    kind = "native"

    def __init__(
        self,
        uri: Optional[str],
        flux_module: Any,
        rpc_timeout: float = 30.0,
        flux_bin_dir: Optional[str] = None,
    ) -> None:
        self.uri = uri
        self.flux = flux_module
        self.rpc_timeout = rpc_timeout
        self.flux_bin_dir = flux_bin_dir
        self._local = threading.local()

    def job_environment(self) -> Dict[str, str]:
        """The environment jobs get: ours, like ``flux batch`` gives its own.

        A batch job's command is ``flux broker ...``, found on the job's PATH:
        the ``flux`` front command puts its own directory there for its
        subcommands, bindings loaded from elsewhere do not - so add it.
        """
        environment = dict(os.environ)
        if self.flux_bin_dir:
            parts = environment.get("PATH", "").split(os.pathsep)
            if self.flux_bin_dir not in parts:
                environment["PATH"] = os.pathsep.join([self.flux_bin_dir, *[p for p in parts if p]])
        return environment

    # -- handles ---------------------------------------------------------

    def handle(self) -> Any:
        handle = getattr(self._local, "handle", None)
        if handle is None:
            handle = self.flux.Flux(self.uri) if self.uri else self.flux.Flux()
            self._local.handle = handle
        return handle

    def reset(self) -> None:
        """Forget this thread's handle (after a lost connection)."""
        handle = getattr(self._local, "handle", None)
        self._local.handle = None
        if handle is not None:
            try:
                handle.close()
            except Exception:  # noqa: BLE001, S110 - closing a dead handle may fail
                pass

    def _rpc(self, topic: str, payload: Any = None, timeout: Optional[float] = None) -> Any:
        future = self.handle().rpc(topic, payload)
        future.wait_for(self.rpc_timeout if timeout is None else timeout)
        return future.get()

    def probe(self, timeout: float = 10.0) -> str:
        """Open a handle and ask the broker's version, bounded; return the version.

        A client of another release may hang on the first request (newer
        clients to a 0.26 broker) or fail with "Protocol error": both surface
        here, before the adapter commits to the native driver.
        """
        answer = self._rpc("attr.get", {"name": "version"}, timeout=timeout)
        return str(answer["value"])

    def attr(self, name: str) -> Optional[str]:
        try:
            return str(self._rpc("attr.get", {"name": name})["value"])
        except OSError:
            return None

    def wait_ready(self, timeout: float) -> None:
        """Block until the broker finished starting (``state-machine.wait``), bounded.

        A nested instance publishes its URI before rc1 is done; the first
        submit would otherwise fail with "No service matching job-ingest.submit".
        """
        try:
            self._rpc("state-machine.wait", None, timeout=timeout)
        except OSError as exc:
            if exc.errno == errno.ENOSYS:
                return  # older brokers: the submit retry covers it
            raise

    # -- submission --------------------------------------------------------

    def submit(self, request: SubmitRequest) -> str:
        results = self.submit_many([request])
        ok, value = results[0]
        if not ok:
            raise OSError(errno.EINVAL, value)
        return value

    def submit_many(self, requests: Sequence[SubmitRequest]) -> List[Tuple[bool, str]]:
        """Pipelined: every ``submit_async`` is in flight before the first id is read."""
        handle = self.handle()
        params = [jobspec_params(request) for request in requests]
        environment = self.job_environment()
        results = jobspec_module.submit_all(handle, self.flux.job, params, environment)
        # submit returns JobID (0.49+) or int (0.26): both are ints.
        return [(ok, canonical_job_id(value) if ok else str(value)) for ok, value in results]

    def submit_prepared(self, jobspecs: Sequence[str]) -> List[Tuple[bool, str]]:
        """Submit already-encoded jobspecs (the bulk fast path), pipelined."""
        handle = self.handle()
        submit_async = self.flux.job.submit_async
        futures = [submit_async(handle, text) for text in jobspecs]
        results: List[Tuple[bool, str]] = []
        for future in futures:
            try:
                results.append((True, canonical_job_id(int(future.get_id()))))
            except OSError as exc:
                results.append((False, _error_text(exc)))
        return results

    def jobspec(self, request: SubmitRequest) -> Any:
        return jobspec_module.build_batch_jobspec(
            self.flux.job.JobspecV1, jobspec_params(request), self.job_environment()
        )

    # -- status --------------------------------------------------------------

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """One ``JobList(h, ids=...)`` for all: pipelined list-id RPCs."""
        try:
            listing = self.flux.job.JobList(self.handle(), ids=self._jobids(job_ids))
            infos = listing.jobs()
        except OSError as exc:
            self.reset()
            reason = f"cannot reach the Flux instance {self.uri or '(default)'}: {_error_text(exc)}"
            return {
                job_id: JobStatus(job_id, JobState.UNKNOWN, reason=reason) for job_id in job_ids
            }
        errors = "; ".join(getattr(listing, "errors", []) or [])
        facts = [facts_from_jobinfo(info) for info in infos]
        return statuses_from_facts(
            job_ids, facts, f"not known to the Flux instance ({errors or 'no answer'})"
        )

    def _jobids(self, job_ids: Sequence[str]) -> List[Any]:
        """``JobID`` objects where the bindings have them (0.49+), else ints.

        0.49's ``JobList`` reports an unknown id as ``JobID {id.orig} unknown``
        and raises ``AttributeError: 'int' object has no attribute 'orig'``
        when it was given a plain int.
        """
        jobid_class = getattr(self.flux.job, "JobID", None)
        numbers = [parse_job_id(job_id) for job_id in job_ids]
        return [jobid_class(number) for number in numbers] if jobid_class else numbers

    # -- cancel --------------------------------------------------------------

    def cancel(self, job_ids: Sequence[str]) -> List[str]:
        """Cancel all (pipelined); return the errors (e.g. already inactive)."""
        handle = self.handle()
        futures = [
            (job_id, self.flux.job.cancel_async(handle, parse_job_id(job_id))) for job_id in job_ids
        ]
        errors = []
        for job_id, future in futures:
            try:
                future.get()
            except OSError as exc:
                errors.append(f"{job_id}: {_error_text(exc)}")
        return errors

    # -- instance facts --------------------------------------------------------

    def queue_info(self) -> QueueInfo:
        return queue_info_from_config(self._rpc("config.get") or {}, source="config.get RPC")

    def expiration(self) -> Optional[float]:
        """The instance's own expiration (inside a time-limited job), else ``None``."""
        try:
            status = self._rpc("resource.status")
            expiration = float(status["R"]["execution"].get("expiration") or 0.0)
        except (OSError, KeyError, TypeError, ValueError):
            try:
                import flux.kvs

                resource_r = flux.kvs.get(self.handle(), "resource.R")
                expiration = float(resource_r["execution"].get("expiration") or 0.0)
            except Exception:  # noqa: BLE001 - unknown: no check
                return None
        return expiration if expiration > 0 else None

    def jobid(self) -> Optional[str]:
        """This instance's job id in its parent, when it is a job."""
        return self.attr("jobid")

    # -- waiting -----------------------------------------------------------------

    def waiter(self, job_ids: Iterable[str]) -> ResultWaiter:
        return ResultWaiter(self, list(job_ids))

    # -- uri -------------------------------------------------------------------

    def resolve_uri(self, target: str, parent_uri: Optional[str]) -> str:
        """``flux uri --remote TARGET`` in-process.

        A job id is looked up in ``parent_uri`` (or the enclosing instance);
        other schemes (``slurm:``, ``lsf:``, ``pid:``) go through
        ``flux.uri.FluxURIResolver``.
        """
        from flux.uri import FluxURIResolver, JobURI

        scheme, _, rest = target.partition(":")
        if scheme == "jobid" or ":" not in target:
            job_text = rest if scheme == "jobid" else target
            parent = self.flux.Flux(parent_uri) if parent_uri else self.flux.Flux()
            info = self.flux.job.job_list_id(parent, parse_job_id(job_text)).get_jobinfo()
            if info.state != "RUN":
                raise ValueError(f"Flux job {job_text} is not running (state {info.state})")
            uri = ""
            try:
                uri = str(info.user.uri)
            except (AttributeError, KeyError):
                uri = ""
            if not uri or uri == "None":
                raise LookupError(f"Flux job {job_text} has not published its URI yet")
            return str(JobURI(uri).remote)
        return str(JobURI(str(FluxURIResolver().resolve(target))).remote)


class ResultWaiter:
    """Wakes up when any watched job becomes inactive (``result_async``).

    Owns its handle: a status query that resets the thread's handle after a
    lost connection must not pull it from under a running reactor.
    """

    def __init__(self, driver: NativeDriver, job_ids: List[str]) -> None:
        self.flux = driver.flux
        self.handle = self.flux.Flux(driver.uri) if driver.uri else self.flux.Flux()
        self._done: Set[str] = set()
        self._futures = []
        self.broken = False
        for job_id in job_ids:
            future = self.flux.job.result_async(self.handle, parse_job_id(job_id))
            future.then(self._fulfilled, job_id)
            self._futures.append(future)

    def _fulfilled(self, future: Any, job_id: str) -> None:
        self._done.add(job_id)
        self.handle.reactor_stop()

    def wait(self, timeout: float) -> Set[str]:
        """Run the reactor until a job ends or ``timeout`` passes; the ids that ended."""
        if not self._done and not self.broken:
            timer = self.handle.timer_watcher_create(
                max(timeout, 0.0), lambda *_args: self.handle.reactor_stop()
            )
            timer.start()
            try:
                self.handle.reactor_run()
            except OSError as exc:
                # The broker went away: no more wake-ups from this handle.
                log.debug("flux reactor stopped: %s", exc)
                self.broken = True
            finally:
                timer.stop()
                timer.destroy()
        done, self._done = self._done, set()
        return done

    def close(self) -> None:
        self._futures = []
        try:
            self.handle.close()
        except Exception:  # noqa: BLE001, S110 - a dead handle may not close cleanly
            pass


def facts_from_jobinfo(info: Any) -> Dict[str, Any]:
    """The facts of a ``flux.job.JobInfo`` (same keys as the CLI parsers)."""

    def get(name: str, default: Any = None) -> Any:
        try:
            value = getattr(info, name)
        except (AttributeError, KeyError):
            return default
        return default if value in ("", None) else value

    exception = get("exception")
    occurred = bool(getattr(exception, "occurred", False)) if exception is not None else False
    sched = None
    try:
        sched = info.sched
    except (AttributeError, KeyError):
        sched = None
    reason_pending = ""
    if sched is not None:
        try:
            reason_pending = str(sched.reason_pending or "")
        except (AttributeError, KeyError):
            reason_pending = ""
    return {
        "id": canonical_job_id(int(info.id)),
        "state": str(get("state", "")),
        "result": str(get("result", "")),
        "returncode": _int_or_none(get("returncode")),
        "waitstatus": _int_or_none(get("waitstatus")),
        "t_submit": get("t_submit") or None,
        "t_run": get("t_run") or None,
        "t_cleanup": get("t_cleanup") or None,
        "t_inactive": get("t_inactive") or None,
        "exception_type": str(getattr(exception, "type", "") or "") if occurred else "",
        "exception_note": str(getattr(exception, "note", "") or "") if occurred else "",
        "dependencies": list(get("dependencies", []) or []),
        "reason_pending": reason_pending if reason_pending != "None" else "",
        "expiration": get("expiration") or None,
        "uri": "",
    }


def _int_or_none(value: Any) -> Optional[int]:
    try:
        return None if value in (None, "") else int(value)
    except (TypeError, ValueError):
        return None
