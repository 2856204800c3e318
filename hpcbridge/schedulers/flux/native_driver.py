"""The native driver: flux-core's Python bindings in this process, used only where a handle
opens and answers (``BindingsConnection.probe``); lost answers are found by key, by command.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union

from ...engine.driver import Capabilities, Planned, Submitted, Waiter
from ...errors import JobSubmissionError, SchedulerAdapterError
from ...model import JobStatus
from . import bulk_helper, jobspec
from .answers import Outcome, output_path_from_jobspec, raise_cancel_errors
from .bindings import BindingsConnection
from .command_runner import FluxCommands
from .driver_base import FluxDriverBase
from .ids import canonical_job_id, parse_job_id
from .instance import InstanceFacts
from .jobspec import error_text
from .journal import Journal, JournalWaiter, ResultWaiter, open_journal
from .request import DROPPED_KEYS, FluxPlan, flux_plan, jobspec_params
from .status import facts_from_jobinfo, statuses_from_facts, unknown

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
        super().__init__(commands, facts, connection.expiration, ready_timeout, outer_time_margin)
        self.connection = connection
        self.flux = connection.flux
        #: final statuses the waiters' result futures brought (answered once, then dropped)
        self._ended: Dict[str, JobStatus] = {}
        self._waiters: List[Union[JournalWaiter, ResultWaiter]] = []
        #: the instance's journal, one stream for all our jobs (``journal``); why not
        self._journal: Optional[Journal] = None
        self._no_journal: Optional[str] = None
        #: the jobs this driver submitted (canonical ids)
        self._ours: Set[str] = set()
        #: the last listed state of each job, and when (monotonic)
        self._listed: Dict[str, Tuple[float, JobStatus]] = {}

    def describe(self, planned: Planned) -> str:
        request = flux_plan(planned).request
        spec = jobspec.build_jobspec(
            self.flux.job.JobspecV1,
            jobspec_params(request),
            self.connection.job_environment(),
            bulk_helper.constraint_parser(),
        )
        spec.environment = {"...": "(the submitting process's environment)"}
        return f"flux.job.submit(Flux({self.facts.uri or ''!s}), {spec.dumps()})"

    def submit_many(self, planned: Planned) -> List[Submitted]:
        sent = self._send(planned, self.connection.wait_ready, self._submit, "flux.job.submit")
        self._ours.update(item.job_id for item in sent)  # canonical: the journal's keys
        return sent

    def _lost_connection(self) -> None:
        self.connection.reset()

    def _open_journal(self) -> Optional[Journal]:
        if self._journal is None and self._no_journal is None:
            self._journal, self._no_journal = open_journal(
                self.flux, self.connection.handle(), self.facts.uri, self._ended, self._ours
            )
        return self._journal if self._journal is not None and not self._journal.broken else None

    def _submit(self, plan: FluxPlan) -> List[Outcome]:
        """Every job, pipelined; an answer later than the RPC timeout (>= 0.1 s a job) is lost."""
        count = len(plan.environments)
        try:
            found = bulk_helper.submit_all(
                self.connection.handle(),
                self.flux.job,
                jobspec_params(plan.request),
                plan.environments,
                self.connection.job_environment(),
                plan.keys,
                timeout=max(self.connection.rpc_timeout, 0.1 * count),
                names=plan.names,
            )
        except OSError as exc:
            self.connection.reset()
            raise JobSubmissionError(
                f"cannot submit to the Flux instance {self.facts.label}: {error_text(exc)} "
                "(check that it is still running: hpcbridge doctor)"
            ) from exc
        return [(ok, canonical_job_id(value) if ok else str(value)) for ok, value in found]

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """Ends heard, then the journal's events, then a recent listing (``RELIST_AFTER``) of
        a job a waiter will hear end; one ``JobList(h, ids=...)`` for the rest."""
        journal = self._journal if self._journal is not None else None
        if journal is not None:
            journal.drain()
        answers = {job_id: self._ended.pop(job_id) for job_id in job_ids if job_id in self._ended}
        for job_id in answers:
            self._listed.pop(job_id, None)
        now = time.monotonic()
        for job_id in job_ids:
            if job_id in answers:
                continue
            heard = journal.status(job_id) if journal is not None else None
            recent = heard or self._recent(job_id, now)
            if recent is not None:
                answers[job_id] = recent
        rest = [job_id for job_id in job_ids if job_id not in answers]
        if rest:
            fresh = self._list(rest)
            for job_id, found in fresh.items():
                if found.is_terminal:
                    self._listed.pop(job_id, None)
                else:
                    self._listed[job_id] = (now, found)
            answers.update(fresh)
        return answers

    def _recent(self, job_id: str, now: float) -> Optional[JobStatus]:
        listed = self._listed.get(job_id)
        if listed is None or now - listed[0] >= RELIST_AFTER:
            return None
        return listed[1] if any(waiter.hears(job_id) for waiter in self._waiters) else None

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
        errors = "; ".join(listing.errors) if hasattr(listing, "errors") else ""
        facts = [facts_from_jobinfo(info) for info in infos]
        return statuses_from_facts(
            job_ids, facts, f"not known to the Flux instance ({errors or 'no answer'})"
        )

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
        journal = self._open_journal()
        if journal is not None:
            made = JournalWaiter(journal, list(job_ids))
            self._waiters.append(made)
            return made
        try:
            waiter = ResultWaiter(self.flux, self.facts.uri, list(job_ids), self._ended)
        except Exception as exc:  # noqa: BLE001 - fall back to sleeping
            log.debug("flux: cannot watch job results (%s); polling", exc)
            self.connection.reset()
            return None
        self._waiters.append(waiter)
        return waiter

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal, self._no_journal = None, None
        self.connection.reset()


def bindings_job_ids(flux_module: Any, job_ids: Sequence[str]) -> List[Any]:
    """``JobID`` objects where the bindings have them, else ints."""
    # 0.49's JobList raises AttributeError ('int' has no 'orig') on an unknown plain int.
    numbers = [parse_job_id(job_id) for job_id in job_ids]
    if hasattr(flux_module.job, "JobID"):
        return [flux_module.job.JobID(number) for number in numbers]
    return numbers
