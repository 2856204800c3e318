"""The native driver: flux-core's Python bindings in this process, used only where a handle
opens and answers (``BindingsConnection.probe``); lost answers are found by key, by command.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import signal
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

from ...engine.driver import Capabilities, Planned, SubmitBatch, Submitted, Waiter
from ...errors import JobSubmissionError, SchedulerAdapterError
from ...model import JobStatus
from . import bulk_helper, jobspec, planning
from .answers import Outcome, lost_answer, output_path_from_jobspec, raise_cancel_errors
from .command_runner import FluxCommands
from .driver_base import FluxDriverBase
from .ids import bindings_job_ids, parse_job_id
from .instance import InstanceFacts, QueueInfo, queue_info_from_config
from .jobspec import error_text, jobspec_params
from .journal import Journal, JournalWaiter, ResultWaiter, make_waiter, open_journal
from .journal_events import Relisting
from .planning import flux_plan, launcher_for, plan_batch, send_plan
from .request import DROPPED_KEYS, FluxPlan
from .status import listed_infos, unknown

log = logging.getLogger("hpcbridge")

CAPABILITIES = Capabilities(events=True, arrays=False, dropped_keys=DROPPED_KEYS)
#: seconds a listed state of a job a waiter will hear end is answered again without asking
RELIST_AFTER = 1.0


class NativeDriver(FluxDriverBase):
    """Submits, follows and cancels Flux jobs through the bindings."""

    name = "native"
    capabilities = CAPABILITIES

    def __init__(
        self,
        connection: BindingsConnection,
        facts: InstanceFacts,
        commands: FluxCommands,
        ready_timeout: float = 30.0,
        outer_time_margin: float = 60.0,
    ) -> None:
        time_left = TimeLeft(connection.expiration)
        super().__init__(commands, facts, time_left, ready_timeout, outer_time_margin)
        self.connection = connection
        self.flux = connection.flux
        #: Flux's own parser of ``--requires`` text, where the bindings have one
        self.constraint_parser = bulk_helper.constraint_parser()
        #: final statuses the waiters' result futures brought (answered once, then dropped)
        self._ended: Dict[str, JobStatus] = {}
        self._waiters: List[Union[JournalWaiter, ResultWaiter]] = []
        #: the instance's journal, one stream for all our jobs (``journal``); why not
        self._journal: Optional[Journal] = None
        self._no_journal: Optional[str] = None
        #: the jobs this driver submitted (canonical ids)
        self._ours: Set[str] = set()
        #: the last listed state of each job, and when
        self._listed = Relisting(RELIST_AFTER)

    def describe(self, planned: Planned) -> str:
        params = jobspec_params(flux_plan(planned).request)
        environment = self.connection.job_environment()
        spec = jobspec.build_jobspec(
            self.flux.job.JobspecV1, params, environment, self.constraint_parser
        )
        return jobspec.submit_call(spec, self.facts.uri)

    def plan(self, batch: SubmitBatch) -> Planned:
        return plan_batch(batch, self.facts, self.questions, self.outer_time_margin)

    def launcher(self, options: object) -> str:
        return launcher_for(self.commands.flux, self.facts.policy, options)

    def submit_many(self, planned: Planned) -> List[Submitted]:
        if not self._ready:
            self.connection.wait_ready(self.ready_timeout)
            self._ready = True
        sent = send_plan(planned, self._submit, "flux.job.submit", self.sender)
        self._ours.update(item.job_id for item in sent)  # canonical: the journal's keys
        return sent

    def _open_journal(self) -> Optional[Journal]:
        if self._journal is None and self._no_journal is None:
            handle, reading = self.connection.handle(), threading.Lock()
            self._journal, self._no_journal = open_journal(
                self.flux, handle, self.facts.uri, self._ended, self._ours, reading
            )
        return self._journal if self._journal is not None and not self._journal.broken else None

    def _submit(self, plan: FluxPlan) -> List[Outcome]:
        """Every job, pipelined; an answer later than the RPC timeout (>= 0.1 s a job) is lost."""
        ends = time.monotonic() + max(self.connection.rpc_timeout, 0.1 * len(plan.environments))
        try:
            found = jobspec.submit_all(
                self.connection.handle(),
                self.flux.job,
                jobspec_params(plan.request),
                plan.environments,
                self.connection.job_environment(),
                plan.keys,
                remaining=lambda: ends - time.monotonic(),
                names=plan.names,
                constraint_parser=self.constraint_parser,
            )
        except OSError as exc:
            self.connection.reset()
            raise JobSubmissionError(
                f"cannot submit to the Flux instance {self.facts.label}: {error_text(exc)} "
                "(check that it is still running: hpcbridge doctor)"
            ) from exc
        if any(not ok and lost_answer(str(value)) for ok, value in found):
            self.connection.reset()  # answers came too late: the next sending opens anew
        return [(ok, jobspec.f58(value) if ok else str(value)) for ok, value in found]

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """Ends heard, then the journal's events, then a recent listing (``RELIST_AFTER``) of
        a job a waiter will hear end; one ``JobList(h, ids=...)`` for the rest."""
        journal = self._journal if self._journal is not None else None
        if journal is not None:
            journal.drain()
        answers = {job_id: self._ended.pop(job_id) for job_id in job_ids if job_id in self._ended}
        self._listed.forget(answers)
        now = time.monotonic()
        for job_id in job_ids:
            if job_id in answers:
                continue
            heard = journal.status(job_id) if journal is not None else None
            hears = any(waiter.hears(job_id) for waiter in self._waiters)
            recent = heard or self._listed.recent(job_id, now, hears)
            if recent is not None:
                answers[job_id] = recent
        rest = [job_id for job_id in job_ids if job_id not in answers]
        if rest:
            answers.update(self._listed.note(self._list(rest), now))
        return answers

    def _list(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        try:
            listing = self.flux.job.JobList(
                self.connection.handle(), ids=bindings_job_ids(self.flux, job_ids)
            )
            infos = listing.jobs()
        except OSError as exc:
            self.connection.reset()
            where = self.facts.label
            return unknown(job_ids, f"cannot reach the Flux instance {where}: {error_text(exc)}")
        # JobList keeps the per-id failures ("JobID ... unknown") in .errors.
        return listed_infos(job_ids, infos, getattr(listing, "errors", None) or [])

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
                f"cannot reach the Flux instance {self.facts.label} to cancel: "
                f"{error_text(exc)} (check that it is still running: hpcbridge doctor)"
            ) from exc
        errors = []
        for job_id, future in futures:
            try:
                future.get()
            except OSError as exc:
                errors.append(f"{job_id}: {error_text(exc)}")
        raise_cancel_errors(errors)

    def find_output(self, job_id: str) -> Optional[str]:
        """From the job's jobspec (the ``job-info.lookup`` RPC, else the command)."""
        try:
            found = self.connection.rpc(
                "job-info.lookup", {"id": parse_job_id(job_id), "keys": ["jobspec"], "flags": 0}
            )
            return output_path_from_jobspec(str(found["jobspec"]), job_id)
        except (OSError, KeyError, TypeError) as exc:
            log.debug("flux: job-info.lookup of %s: %s; asking the command", job_id, exc)
        return self.commands.output_of(job_id)

    def waiter(self, job_ids: Sequence[str]) -> Optional[Waiter]:
        self._waiters = [waiter for waiter in self._waiters if not waiter.closed]
        made = make_waiter(self.flux, self.facts.uri, self._open_journal(), job_ids, self._ended)
        if made is None:
            self.connection.reset()
            return None
        self._waiters.append(made)
        return made

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal, self._no_journal = None, None
        self.connection.reset()


class BindingsConnection:
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
        """The broker's version, bounded: a client of another release hangs (newer clients to
        a 0.26 broker) or fails ("Protocol error") here, before the driver is chosen."""
        return str(self.rpc("attr.get", {"name": "version"}, timeout=timeout)["value"])

    def wait_ready(self, timeout: float) -> None:
        """Until the broker finished starting: a nested instance publishes its URI before rc1."""
        try:
            self.rpc("state-machine.wait", None, timeout=timeout)
        except OSError as exc:
            # Older brokers have no state-machine.wait: the submit retry covers them.
            if exc.errno != errno.ENOSYS:
                log.debug("flux: readiness check failed: %s", exc)

    def queue_info(self) -> QueueInfo:
        return queue_info_from_config(self.rpc("config.get") or {}, source="config.get RPC")

    def expiration(self) -> Optional[float]:
        try:
            resource_r = self.rpc("resource.status")["R"]
        except (OSError, KeyError, TypeError):
            try:
                kvs = __import__("flux.kvs", fromlist=["get"])
                resource_r = kvs.get(self.handle(), "resource.R")
            except Exception:  # noqa: BLE001 - unknown: no check
                return None
        return planning.expiration_of(resource_r)

    def job_environment(self) -> Dict[str, str]:
        """Ours, as ``flux batch`` gives its own, with the ``flux`` directory on PATH (a batch
        job runs ``flux broker``; bindings loaded from elsewhere do not add it)."""
        return jobspec.with_on_path(dict(os.environ), self.flux_bin_dir)


class SigintKept:
    """The ``signal`` module as ``flux.util`` sees it: SIGINT's handler left as it is
    (``bindings.keep_sigint_handler``; here: where a bindings call passes)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(signal, name)

    @staticmethod
    def signal(signum: int, handler: Any) -> Any:
        if signum == signal.SIGINT:
            return signal.getsignal(signum)
        return signal.signal(signum, handler)


#: how long the instance's expiration is trusted before asking again
EXPIRATION_TTL = 60.0


class TimeLeft:
    """Seconds until the instance ends, from its expiration (asked at most once a minute), by
    this process's clock; the CLI driver's too (here: where a bindings submission passes)."""

    def __init__(self, expiration: Callable[[], Optional[float]]) -> None:
        self._expiration = expiration
        self._lock = threading.Lock()
        self._cached: Tuple[float, Optional[float]] = (-math.inf, None)

    def __call__(self) -> Optional[float]:
        with self._lock:
            fetched, expiration = self._cached
            if time.monotonic() - fetched > EXPIRATION_TTL:
                try:
                    expiration = self._expiration()
                except Exception as exc:  # noqa: BLE001 - unknown: no check
                    log.debug("flux: cannot read the instance expiration: %s", exc)
                    expiration = None
                self._cached = (time.monotonic(), expiration)
        if expiration is None:
            return None
        # The client's clock; over SSH a skew of seconds is covered by the margin.
        return expiration - time.time()
