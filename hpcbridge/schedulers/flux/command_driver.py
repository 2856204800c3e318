"""The Flux CLI driver: ``flux`` commands through the executor (local or SSH).

Used when the bindings are missing or broken, or the broker is only
reachable over SSH.  The commands run through ``commands.FluxCommands``;
the ``flux`` that runs is the broker's own release, since clients of another
release break (``Protocol error``, ``invalid payload``, hangs).

One job goes in as ``flux batch`` (a batch job) or ``flux submit`` (a plain
job); many go in through one process, ``flux python`` running ``jobspec.py``
(the same jobspec builder and pipelined send as the native driver) on the
broker's side - not one process per job.  (``flux submit --cc`` is one
process too, but ``flux batch`` has no ``--cc``; and ``flux python`` sets the
bindings' PYTHONPATH itself, which plain jobs and ``flux start``'s initial
program do not get.)  Every job carries its key; a submission whose answer was
lost (a dropped SSH connection, a timeout) is found by it or sent once more
(``commands.KeyFinder``).
"""

from __future__ import annotations

import logging
import shlex
import time
from typing import Dict, List, Optional, Sequence

from ...engine.driver import Capabilities, Planned, SubmitBatch, Submitted, Waiter
from ...errors import (
    JobSubmissionError,
    JobTimeoutError,
    SubmissionUncertainError,
)
from ...model import JobState, JobStatus
from ...transports.base import CommandResult
from . import command_line as cl
from . import commands, status, submission
from . import jobspec as jobspec_module
from .commands import FluxCommands
from .instance import InstanceFacts
from .status import parse_eventlog
from .submission import (
    DROPPED_KEYS,
    FluxPlan,
    Outcome,
    Questions,
    SubmitRequest,
    TimeLeft,
    flux_plan,
    jobspec_params,
    kind_of,
    plan_batch,
    send,
)

log = logging.getLogger("hpcbridge")

CAPABILITIES = Capabilities(events=False, arrays=False, dropped_keys=DROPPED_KEYS)

#: jobs per submission (one jobspec, many task indices): the bound of both Flux drivers
MAX_BATCH = 10000
#: ids per ``flux jobs`` call (keeps the command line short)
_QUERY_CHUNK = 400


def _helper_source() -> str:
    with open(jobspec_module.__file__, encoding="utf-8") as handle:
        return handle.read()


class CLIDriver:
    """Submits, follows and cancels Flux jobs with ``flux`` commands."""

    name = "cli"
    capabilities = CAPABILITIES

    def __init__(
        self,
        commands: FluxCommands,
        facts: InstanceFacts,
        ready_timeout: float = 30.0,
        outer_time_margin: float = 60.0,
    ) -> None:
        self.commands = commands
        self.facts = facts
        self.policy = facts.policy
        self.flux = commands.flux
        self.ready_timeout = ready_timeout
        self.outer_time_margin = outer_time_margin
        self.time_left = TimeLeft(commands.expiration)
        #: what planning asks this instance (each only when a batch needs it)
        self.questions = Questions(
            self.time_left, self.commands.native_attributes, self.commands.associations
        )
        self._ready = False

    # -- submission --------------------------------------------------------

    def plan(self, batch: SubmitBatch) -> Planned:
        return plan_batch(batch, self.facts, self.questions, self.outer_time_margin)

    def describe(self, planned: Planned) -> str:
        request = flux_plan(planned).request
        prefix = f"FLUX_URI={shlex.quote(self.facts.uri)} " if self.facts.uri else ""
        return prefix + shlex.join(cl.submit_argv(self.flux, self.policy, request))

    def submit_many(self, planned: Planned) -> List[Submitted]:
        plan = flux_plan(planned)
        if not self._ready:
            self.commands.wait_ready(self.ready_timeout)
            self._ready = True
        one = len(plan.environments) == 1
        what = "flux submit" if one else "flux python (bulk submit)"
        attempt = (lambda: [self._submit_one(plan.job(0))]) if one else lambda: self._bulk(plan)
        return send(
            attempt,
            output=plan.request.output,
            kind=kind_of(planned.batch).value,
            what=what,
            ready_timeout=self.ready_timeout,
        )

    def _submit_one(self, request: SubmitRequest) -> Outcome:
        argv = cl.submit_argv(self.flux, self.policy, request)
        started = time.time()
        try:
            return self._outcome(argv, self._submission(argv, request.cwd))
        except SubmissionUncertainError as lost:
            if not request.key:
                raise
            what = "flux " + " ".join(argv[1 : 2 + (argv[1] == "mini")])
            log.warning("%s's answer was lost (%s); looking for job %s", what, lost, request.key)
            finder = commands.KeyFinder(self.commands, self.policy, started)

            def resubmit() -> str:
                ok, value = self._outcome(argv, self._submission(argv, request.cwd))
                if not ok:
                    raise submission.submission_error(value, argv, what)
                return value

            return True, commands.adopt_one(finder, request.key, resubmit, self._where())

    def _submission(
        self,
        argv: List[str],
        cwd: str,
        input: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> CommandResult:
        """A submitting command, run once: a lost answer (dropped connection, timeout)
        is ``SubmissionUncertainError``."""
        try:
            return self.commands.run(argv, idempotent=False, cwd=cwd, input=input, timeout=timeout)
        except JobTimeoutError as exc:
            raise SubmissionUncertainError(f"{exc}: its answer was lost", argv=argv) from exc

    @staticmethod
    def _outcome(argv: List[str], result: CommandResult) -> Outcome:
        if not result.ok:
            return False, result.stderr + "\n" + result.stdout
        try:
            return True, cl.parse_submit_output(result.stdout)
        except ValueError as exc:
            raise JobSubmissionError(str(exc), argv=argv) from None

    def _where(self) -> str:
        return f"the Flux instance {self.facts.label}"

    def _bulk(self, plan: FluxPlan) -> List[Outcome]:
        """One ``flux python`` process submits every job (pipelined inside)."""
        if not self.policy.python_command:
            # 0.26's `flux python` runs whatever python is first on PATH: one by one.
            return [self._submit_one(plan.job(index)) for index in range(len(plan.environments))]
        started = time.time()
        try:
            return self._bulk_once(plan)
        except SubmissionUncertainError as lost:
            if not plan.keys:
                raise
            log.warning("the bulk submission's answer was lost (%s); looking for its jobs", lost)
            finder = commands.KeyFinder(self.commands, self.policy, started)

            def resend(indices: List[int]) -> List[Outcome]:
                return self._bulk_once(plan.only(indices))

            return commands.adopt_all(finder, plan.keys, resend, self._where())

    def _bulk_once(self, plan: FluxPlan) -> List[Outcome]:
        count = len(plan.environments)
        argv = cl.bulk_argv(self.flux, _helper_source())
        payload = cl.bulk_input(
            jobspec_params(plan.request), plan.environments, plan.keys, plan.names
        )
        timeout = max(self.commands.command_timeout, 0.1 * count)
        result = self._submission(argv, plan.request.cwd, input=payload, timeout=timeout)
        outcomes = cl.parse_bulk_output(result.stdout) if result.stdout else []
        if len(outcomes) < count:
            # Some went in before the helper stopped: the rest count as failed,
            # never submitted twice.
            message = result.message() or "the bulk helper stopped early"
            outcomes += [(False, message)] * (count - len(outcomes))
        return outcomes

    # -- status ------------------------------------------------------------

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        answers: Dict[str, JobStatus] = {}
        for start in range(0, len(job_ids), _QUERY_CHUNK):
            answers.update(self._query_chunk(list(job_ids[start : start + _QUERY_CHUNK])))
        return answers

    def _query_chunk(self, job_ids: List[str]) -> Dict[str, JobStatus]:
        result = self.commands.run(cl.jobs_argv(self.flux, self.policy, job_ids))
        if result.ok or status.only_unknown_ids(result.stderr):
            return self._from_listing(job_ids, result)
        message = result.message()
        if "invalid payload" in message or "Protocol error" in message:
            # `flux jobs` of another release than the broker: the C
            # eventlog reader still works.
            return self._query_eventlogs(job_ids)
        if "Unable to connect" in message or "was not found" in message:
            # The broker's socket is gone: a nested instance whose job ended.
            return status.unknown(
                job_ids, f"the Flux instance {self.facts.label} is gone or unreachable ({message})"
            )
        return status.unknown(job_ids, f"flux jobs failed: {message}")

    def _from_listing(self, job_ids: List[str], result: CommandResult) -> Dict[str, JobStatus]:
        parse = status.parse_jobs_json if self.policy.jobs_json else status.parse_jobs_format
        try:
            facts = parse(result.stdout)
        except (ValueError, KeyError) as exc:
            return status.unknown(job_ids, f"cannot parse flux jobs output: {exc}")
        answers = status.statuses_from_facts(
            job_ids, facts, "not known to the Flux instance (flux jobs)"
        )
        for job_id in status.parse_unknown_ids(result.stderr):
            if job_id in answers and answers[job_id].state is JobState.UNKNOWN:
                answers[job_id] = answers[job_id].with_(reason="flux jobs: JobID unknown")
        return answers

    def _query_eventlogs(self, job_ids: List[str]) -> Dict[str, JobStatus]:
        answers = {}
        for job_id in job_ids:
            result = self.commands.run(cl.eventlog_argv(self.flux, job_id))
            if result.ok:
                facts = parse_eventlog(job_id, result.stdout)
                answers[job_id] = status.status_from_facts(facts)
            else:
                answers[job_id] = JobStatus(job_id, JobState.UNKNOWN, reason=result.message())
        return answers

    # -- the rest of the contract -----------------------------------------------

    def cancel(self, job_ids: Sequence[str]) -> None:
        errors = []
        for group in cl.cancel_groups(self.policy, job_ids):
            result = self.commands.run(cl.cancel_argv(self.flux, self.policy, group))
            if not result.ok:
                errors.append(result.message())
        cl.raise_cancel_errors(errors)

    def max_batch(self) -> int:
        return MAX_BATCH

    def queue_limit(self, account: Optional[str] = None) -> Optional[int]:
        """flux-accounting's ``max_active_jobs`` of the user's bank (``account``, else
        the default), as its service tells it (read every few minutes); ``None`` where
        the instance has no accounting (flux-core caps no user's jobs) or will not say -
        a cap met anyway is a refusal, "user has max active jobs", which holds a sweep
        back (``LimitRefusedError``) and becomes its cap."""
        return submission.active_cap(self.commands.associations(), account)

    def find_submitted(
        self, planned: Planned, since: Optional[float] = None
    ) -> Optional[List[Submitted]]:
        """By the keys in the jobs' jobspecs (``commands.find_by_keys``)."""
        return commands.find_by_keys(self.commands, self.policy, planned, since, self._where())

    def find_output(self, job_id: str) -> Optional[str]:
        return self.commands.output_of(job_id)

    def waiter(self, job_ids: Sequence[str]) -> Optional[Waiter]:
        """The commands hear no job events: the wait loop sleeps between its ticks."""
        return None

    def close(self) -> None:
        """Nothing held open: every command is its own process."""
