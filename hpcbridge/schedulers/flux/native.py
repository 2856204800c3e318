"""The native driver: flux-core's Python bindings, in this process.

Used only when ``import flux`` works *and* a handle to the broker opens and
answers (``NativeConnection.probe``): bindings that import but cannot talk
to the broker (a missing ``libflux-core.so.2``, an ABI or protocol mismatch
with the broker's release, no broker) make the adapter use the CLI.

Submissions are pipelined ``submit_async`` futures of one jobspec built
once (one round trip for many jobs), status for many ids is one
``JobList(h, ids=...)``, and waiting is event driven (``native_wait``).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...errors import JobSubmissionError, SchedulerAdapterError
from ...model import JobStatus
from ..driver import Capabilities, SubmitBatch, Submitted, Waiter
from . import jobspec as jobspec_module
from .cli import find_output, raise_cancel_errors
from .ids import canonical_job_id, parse_job_id
from .native_wait import ResultWaiter
from .planning import (
    FluxOptions,
    InstanceFacts,
    Readiness,
    TimeLeft,
    plan_requests,
    submitted_or_raise,
)
from .queues import QueueInfo, queue_info_from_config
from .requests import DROPPED_KEYS, SubmitRequest, jobspec_params
from .runner import FluxCommands
from .states import facts_from_jobinfo, statuses_from_facts, unknown

log = logging.getLogger("hpcbridge")

CAPABILITIES = Capabilities(events=True, arrays=False, dropped_keys=DROPPED_KEYS)
MAX_BATCH = 10000
#: how long a listed state of a job a waiter will hear the end of is answered
#: again without asking: many jobs ending apart must not each cost a listing of all
RELIST_AFTER = 1.0


def error_text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class NativeConnection:
    """Handles to one broker through the bindings, one per thread; the instance's own facts."""

    def __init__(
        self,
        flux_module: Any,
        uri: Optional[str],
        rpc_timeout: float = 30.0,
        flux_bin_dir: Optional[str] = None,
    ) -> None:
        self.flux = flux_module
        self.uri = uri
        self.rpc_timeout = rpc_timeout
        self.flux_bin_dir = flux_bin_dir
        self._local = threading.local()

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

    def rpc(self, topic: str, payload: Any = None, timeout: Optional[float] = None) -> Any:
        future = self.handle().rpc(topic, payload)
        future.wait_for(self.rpc_timeout if timeout is None else timeout)
        return future.get()

    def probe(self, timeout: float) -> str:
        """Open a handle and ask the broker's version, bounded; return the version.

        A client of another release may hang on the first request (newer
        clients to a 0.26 broker) or fail with "Protocol error": both surface
        here, before the adapter commits to the native driver.
        """
        return str(self.rpc("attr.get", {"name": "version"}, timeout=timeout)["value"])

    def wait_ready(self, timeout: float) -> None:
        """Block until the broker finished starting (``state-machine.wait``), bounded.

        A nested instance publishes its URI before rc1 is done; the first
        submit would otherwise fail with "No service matching job-ingest.submit".
        """
        try:
            self.rpc("state-machine.wait", None, timeout=timeout)
        except OSError as exc:
            if exc.errno != errno.ENOSYS:  # older brokers: the submit retry covers it
                raise

    def queue_info(self) -> QueueInfo:
        return queue_info_from_config(self.rpc("config.get") or {}, source="config.get RPC")

    def expiration(self) -> Optional[float]:
        """The instance's own expiration (inside a time-limited job), else ``None``."""
        try:
            resource_r = self.rpc("resource.status")["R"]
        except (OSError, KeyError, TypeError):
            try:
                kvs = __import__("flux.kvs", fromlist=["get"])
                resource_r = kvs.get(self.handle(), "resource.R")
            except Exception:  # noqa: BLE001 - unknown: no check
                return None
        try:
            expiration = float(resource_r["execution"].get("expiration") or 0.0)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return expiration if expiration > 0 else None

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

    def jobspec(self, request: SubmitRequest) -> Any:
        return jobspec_module.build_jobspec(
            self.flux.job.JobspecV1, jobspec_params(request), self.job_environment()
        )


class NativeDriver:
    """Submits, follows and cancels Flux jobs through the bindings."""

    name = "native"
    capabilities = CAPABILITIES

    def __init__(
        self,
        connection: NativeConnection,
        facts: InstanceFacts,
        options: FluxOptions,
        commands: FluxCommands,
        choice_reason: str = "",
    ) -> None:
        self.connection = connection
        self.flux = connection.flux
        self.facts = facts
        self.options = options
        #: for a job's jobspec (``find_output``): the same instance, by command
        self.commands = commands
        self.choice_reason = choice_reason
        self.time_left = TimeLeft(connection.expiration)
        self.readiness = Readiness(connection.wait_ready, options.ready_timeout)
        #: final statuses the waiters' result futures brought (answered once, then dropped)
        self._ended: Dict[str, JobStatus] = {}
        self._waiters: List[ResultWaiter] = []
        #: the last listed state of each job, and when (monotonic)
        self._listed: Dict[str, Tuple[float, JobStatus]] = {}

    # -- submission --------------------------------------------------------

    def describe(self, batch: SubmitBatch) -> str:
        request = plan_requests(batch, self.facts, self.options, None)[0]
        spec = self.connection.jobspec(request)
        spec.environment = {"...": "(the submitting process's environment)"}
        return f"flux.job.submit(Flux({self.facts.uri or ''!s}), {spec.dumps()})"

    def submit_many(self, batch: SubmitBatch) -> List[Submitted]:
        requests = plan_requests(batch, self.facts, self.options, self.time_left)
        self.readiness.ensure()
        results = self._submit_until_ready(requests)
        return submitted_or_raise(results, batch.output, "flux.job.submit")

    def _submit_until_ready(self, requests: Sequence[SubmitRequest]) -> List[Tuple[bool, str]]:
        deadline = time.monotonic() + self.options.ready_timeout
        while True:
            try:
                results = self._submit_once(requests)
            except OSError as exc:
                self.connection.reset()
                raise JobSubmissionError(
                    f"cannot submit to the Flux instance {self.facts.uri or '(system)'}: "
                    f"{error_text(exc)}"
                ) from exc
            # A nested instance still starting has no job-ingest service yet
            # ("No service matching job-ingest.submit"): nothing was accepted,
            # so sending again is safe.  Anything else is final.
            not_ready = not any(ok for ok, _ in results) and all(
                "job-ingest" in value for _, value in results
            )
            if not not_ready or time.monotonic() >= deadline:
                return results
            time.sleep(0.25)

    def _submit_once(self, requests: Sequence[SubmitRequest]) -> List[Tuple[bool, str]]:
        """Pipelined: every ``submit_async`` is in flight before the first id is read.

        The jobs of one batch differ only in their environment (the task
        index), so the jobspec is built once.
        """
        try:
            spec = self.connection.jobspec(requests[0])
        except (ValueError, TypeError, KeyError) as exc:
            raise JobSubmissionError(f"cannot build the Flux jobspec: {exc}") from exc
        environment = dict(spec.environment)
        handle = self.connection.handle()
        futures = []
        for request in requests:
            spec.environment = {**environment, **request.environment}
            futures.append(self.flux.job.submit_async(handle, spec.dumps()))
        results: List[Tuple[bool, str]] = []
        for future in futures:
            try:
                # submit returns a JobID (0.49+) or an int (0.26): both are ints.
                results.append((True, canonical_job_id(int(future.get_id()))))
            except OSError as exc:
                results.append((False, error_text(exc)))
        return results

    # -- status ------------------------------------------------------------

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """The ends a waiter heard; the state listed less than ``RELIST_AFTER`` ago of
        a job a waiter will hear end; one ``JobList(h, ids=...)`` for the rest."""
        answers = {job_id: self._ended.pop(job_id) for job_id in job_ids if job_id in self._ended}
        for job_id in answers:
            self._listed.pop(job_id, None)
        now = time.monotonic()
        for job_id in job_ids:
            recent = None if job_id in answers else self._recent(job_id, now)
            if recent is not None:
                answers[job_id] = recent
        rest = [job_id for job_id in job_ids if job_id not in answers]
        if rest:
            fresh = self._list(rest)
            for job_id, status in fresh.items():
                if status.is_terminal:
                    self._listed.pop(job_id, None)
                else:
                    self._listed[job_id] = (now, status)
            answers.update(fresh)
        return answers

    def _recent(self, job_id: str, now: float) -> Optional[JobStatus]:
        """The state listed less than ``RELIST_AFTER`` ago, if a waiter will hear the end."""
        listed = self._listed.get(job_id)
        if listed is None or now - listed[0] >= RELIST_AFTER:
            return None
        return listed[1] if any(waiter.hears(job_id) for waiter in self._waiters) else None

    def _list(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """One ``JobList(h, ids=...)`` for all: pipelined list-id RPCs."""
        try:
            listing = self.flux.job.JobList(self.connection.handle(), ids=self._jobids(job_ids))
            infos = listing.jobs()
        except OSError as exc:
            self.connection.reset()
            where = self.facts.uri or "(default)"
            return unknown(job_ids, f"cannot reach the Flux instance {where}: {error_text(exc)}")
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

    # -- the rest of the contract -----------------------------------------------

    def cancel(self, job_ids: Sequence[str]) -> None:
        """Cancel all (pipelined); an already ended job is not an error."""
        try:
            handle = self.connection.handle()
            futures = [
                (job_id, self.flux.job.cancel_async(handle, parse_job_id(job_id)))
                for job_id in job_ids
            ]
        except OSError as exc:
            self.connection.reset()
            raise SchedulerAdapterError(
                f"cannot reach the Flux instance {self.facts.label} to cancel: {error_text(exc)}"
            ) from exc
        errors = []
        for job_id, future in futures:
            try:
                future.get()
            except OSError as exc:
                errors.append(f"{job_id}: {error_text(exc)}")
        raise_cancel_errors(errors)

    def max_batch(self) -> int:
        return MAX_BATCH

    def find_output(self, job_id: str) -> Optional[str]:
        return find_output(self.commands, job_id)

    def waiter(self, job_ids: Sequence[str]) -> Optional[Waiter]:
        """Wakes the wait loop the moment a job ends; ``None`` (sleep) when it cannot."""
        self._waiters = [waiter for waiter in self._waiters if not waiter.closed]
        try:
            waiter = ResultWaiter(self.flux, self.facts.uri, list(job_ids), self._ended)
            self._waiters.append(waiter)
            return waiter
        except Exception as exc:  # noqa: BLE001 - fall back to sleeping
            log.debug("flux: cannot watch job results (%s); polling", exc)
            self.connection.reset()
            return None

    def expiration(self) -> Optional[float]:
        return self.connection.expiration()

    def close(self) -> None:
        self.connection.reset()
