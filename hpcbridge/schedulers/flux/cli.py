"""The CLI driver: ``flux`` commands through the executor (local or SSH).

Used when the bindings are missing or broken, or the broker is only
reachable over SSH.  One job goes in as ``flux batch`` (a batch job) or ``flux
submit`` (a plain job); many go in through
one process: ``flux python`` running ``jobspec.py`` (the same jobspec
builder as the native driver) on the broker's side, reading the job
descriptions from stdin - not one ``flux batch`` process per job.
(``flux submit --cc=0-N`` is one process too, but ``flux batch`` has no
``--cc``, and the jobs of one batch differ in their task index.  ``flux python``
sets the bindings' PYTHONPATH itself, which plain jobs and ``flux start``'s
initial program do not get.)
"""

from __future__ import annotations

import json
import logging
import shlex
import time
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ...errors import JobSubmissionError, SchedulerAdapterError
from ...model import JobState, JobStatus
from ...transports.base import CommandResult
from ..driver import Capabilities, SubmitBatch, Submitted, Waiter
from . import jobs
from . import jobspec as jobspec_module
from .planning import (
    FluxOptions,
    InstanceFacts,
    Readiness,
    TimeLeft,
    log_path,
    plan_requests,
    submitted_or_raise,
)
from .queues import submission_error
from .requests import (
    DROPPED_KEYS,
    SubmitRequest,
    bulk_argv,
    bulk_input,
    parse_bulk_output,
    parse_submit_output,
    submit_argv,
)
from .runner import FluxCommands
from .states import status_from_facts, statuses_from_facts, unknown

log = logging.getLogger("hpcbridge")

CAPABILITIES = Capabilities(events=False, arrays=False, dropped_keys=DROPPED_KEYS)

#: ids per ``flux jobs`` call (keeps the command line short)
_QUERY_CHUNK = 400
#: jobs per bulk helper run
MAX_BATCH = 10000
#: the longest pause between status rounds while a watched job runs: a job's end is
#: seen within about this long, at one ``flux jobs`` process per pause
RUNNING_PAUSE = 1.0

# A freshly started (nested) instance answers before its job-ingest module is
# loaded; such a submission was not accepted, so retrying it is safe.
_NOT_READY = ("No service matching job-ingest.submit", "Function not implemented")
# What `flux cancel` says of a job that already ended or never existed.
CANCEL_NOT_NEEDED = ("inactive", "unknown", "No such", "not found", "already")


def _helper_source() -> str:
    with open(jobspec_module.__file__, encoding="utf-8") as handle:
        return handle.read()


def _not_ready(result: CommandResult) -> bool:
    return any(marker in result.stderr + result.stdout for marker in _NOT_READY)


class CLIDriver:
    """Submits, follows and cancels Flux jobs with ``flux`` commands."""

    name = "cli"
    capabilities = CAPABILITIES

    def __init__(self, commands: FluxCommands, facts: InstanceFacts, options: FluxOptions) -> None:
        self.commands = commands
        self.facts = facts
        self.options = options
        self.policy = facts.policy
        self.flux = commands.flux
        self.time_left = TimeLeft(commands.expiration)
        self.readiness = Readiness(commands.wait_ready, options.ready_timeout)
        #: the ids the last status round saw running
        self.running: Set[str] = set()

    # -- submission --------------------------------------------------------

    def describe(self, batch: SubmitBatch) -> str:
        request = plan_requests(batch, self.facts, self.options, None)[0]
        prefix = f"FLUX_URI={shlex.quote(self.facts.uri)} " if self.facts.uri else ""
        return prefix + shlex.join(submit_argv(self.flux, self.policy, request))

    def submit_many(self, batch: SubmitBatch) -> List[Submitted]:
        requests = plan_requests(batch, self.facts, self.options, self.time_left)
        self.readiness.ensure()
        if len(requests) == 1:
            job_id = self._submit_one(requests[0])
            return [Submitted(job_id, log_path(batch.output, job_id))]
        outcome = self._submit_bulk(requests)
        return submitted_or_raise(outcome, batch.output, "flux python (bulk submit)")

    def _retrying(
        self,
        argv: Sequence[str],
        cwd: str,
        input: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> CommandResult:
        """Run a submission, again while the instance is still starting (nothing went in)."""
        deadline = time.monotonic() + self.options.ready_timeout
        while True:
            result = self.commands.run(
                argv, idempotent=False, cwd=cwd, input=input, timeout=timeout
            )
            if result.ok or not _not_ready(result) or time.monotonic() >= deadline:
                return result
            time.sleep(0.5)

    def _submit_one(self, request: SubmitRequest) -> str:
        argv = submit_argv(self.flux, self.policy, request)
        result = self._retrying(argv, cwd=request.cwd)
        if not result.ok:
            raise submission_error(
                result.stderr + "\n" + result.stdout, argv=argv, what=" ".join(argv[:2])
            )
        try:
            return parse_submit_output(result.stdout)
        except ValueError as exc:
            raise JobSubmissionError(str(exc), argv=argv) from None

    def _submit_bulk(self, requests: Sequence[SubmitRequest]) -> List[Tuple[bool, str]]:
        """One ``flux python`` process submits every request (pipelined inside)."""
        if not self.policy.python_command:
            return [self._try_one(request) for request in requests]
        argv = bulk_argv(self.flux, _helper_source())
        timeout = max(self.commands.command_timeout, 0.1 * len(requests))
        payload = json.dumps(bulk_input(requests))
        result = self._retrying(argv, requests[0].cwd, input=payload, timeout=timeout)
        outcome = parse_bulk_output(result.stdout) if result.stdout else []
        if result.ok and len(outcome) == len(requests):
            return outcome
        if outcome:
            # Some went in before the helper stopped: the rest count as failed,
            # never submitted twice.
            message = result.message() or "the bulk helper stopped early"
            return outcome + [(False, message)] * (len(requests) - len(outcome))
        raise submission_error(
            result.stderr + "\n" + result.stdout, argv=argv[:2], what="flux python (bulk submit)"
        )

    def _try_one(self, request: SubmitRequest) -> Tuple[bool, str]:
        try:
            return True, self._submit_one(request)
        except JobSubmissionError as exc:
            return False, exc.scheduler_message or str(exc)

    # -- status ------------------------------------------------------------

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        answers: Dict[str, JobStatus] = {}
        for start in range(0, len(job_ids), _QUERY_CHUNK):
            answers.update(self._query_chunk(list(job_ids[start : start + _QUERY_CHUNK])))
        self.running.difference_update(job_ids)
        self.running.update(i for i, s in answers.items() if s.state is JobState.RUNNING)
        return answers

    def _query_chunk(self, job_ids: List[str]) -> Dict[str, JobStatus]:
        result = self.commands.run(jobs.jobs_argv(self.flux, self.policy, job_ids))
        if result.ok or jobs.only_unknown_ids(result.stderr):
            return self._from_listing(job_ids, result)
        message = result.message()
        if "invalid payload" in message or "Protocol error" in message:
            # `flux jobs` of another release than the broker: the C
            # eventlog reader still works.
            return self._query_eventlogs(job_ids)
        if "Unable to connect" in message or "was not found" in message:
            # The broker's socket is gone: a nested instance whose job ended.
            return unknown(
                job_ids, f"the Flux instance {self.facts.label} is gone or unreachable ({message})"
            )
        return unknown(job_ids, f"flux jobs failed: {message}")

    def _from_listing(self, job_ids: List[str], result: CommandResult) -> Dict[str, JobStatus]:
        parse = jobs.parse_jobs_json if self.policy.jobs_json else jobs.parse_jobs_format
        try:
            facts = parse(result.stdout)
        except (ValueError, KeyError) as exc:
            return unknown(job_ids, f"cannot parse flux jobs output: {exc}")
        answers = statuses_from_facts(job_ids, facts, "not known to the Flux instance (flux jobs)")
        for job_id in jobs.parse_unknown_ids(result.stderr):
            if job_id in answers and answers[job_id].state is JobState.UNKNOWN:
                answers[job_id] = answers[job_id].with_(reason="flux jobs: JobID unknown")
        return answers

    def _query_eventlogs(self, job_ids: List[str]) -> Dict[str, JobStatus]:
        answers = {}
        for job_id in job_ids:
            result = self.commands.run(jobs.eventlog_argv(self.flux, job_id))
            if result.ok:
                answers[job_id] = status_from_facts(jobs.parse_eventlog(job_id, result.stdout))
            else:
                answers[job_id] = JobStatus(job_id, JobState.UNKNOWN, reason=result.message())
        return answers

    # -- the rest of the contract -----------------------------------------------

    def cancel(self, job_ids: Sequence[str]) -> None:
        errors = []
        for group in jobs.cancel_groups(self.policy, job_ids):
            result = self.commands.run(jobs.cancel_argv(self.flux, self.policy, group))
            if not result.ok:
                errors.append(result.message())
        raise_cancel_errors(errors)

    def max_batch(self) -> int:
        return MAX_BATCH

    def find_output(self, job_id: str) -> Optional[str]:
        return find_output(self.commands, job_id)

    def waiter(self, job_ids: Sequence[str]) -> Optional[Waiter]:
        return RunningPause(self.running, job_ids)

    def expiration(self) -> Optional[float]:
        return self.commands.expiration()

    def close(self) -> None:
        """Nothing held open: every command is its own process."""


class RunningPause:
    """A ``driver.Waiter`` for polling: while a watched job runs, pauses of at most
    ``RUNNING_PAUSE`` (its end is near: a plain job's whole life may be a second);
    otherwise the wait loop's own backed-off pause."""

    def __init__(self, running: Set[str], job_ids: Sequence[str]) -> None:
        self.running = running
        self.job_ids = list(job_ids)

    def pause(self, seconds: float) -> bool:
        if any(job_id in self.running for job_id in self.job_ids):
            seconds = min(seconds, RUNNING_PAUSE)
        time.sleep(max(seconds, 0.0))
        return False

    def close(self) -> None:
        """Nothing held."""


def raise_cancel_errors(errors: Sequence[str]) -> None:
    """Raise for cancel failures other than "already ended" / "unknown"."""
    real = [error for error in errors if not any(m in error for m in CANCEL_NOT_NEEDED)]
    for error in errors:
        log.debug("flux cancel: %s", error)
    if real:
        raise SchedulerAdapterError(f"flux cancel failed: {'; '.join(real)}")


def find_output(commands: FluxCommands, job_id: str) -> Optional[str]:
    """From the job's jobspec (``flux job info ID jobspec``) when there is no record."""
    result = commands.run(jobs.jobspec_argv(commands.flux, job_id))
    if not result.ok:
        return None
    return jobs.output_path_from_jobspec(result.stdout, job_id)
