"""The CLI driver: ``flux`` commands through the executor (local or SSH).

Used when the bindings are missing or broken, or the broker is only
reachable over SSH.  ``FLUX_URI`` goes into each command's environment when
a specific broker (e.g. a nested instance) is targeted.  The ``flux`` that
runs is the one on the broker's side - the CLI of the broker's own release,
since clients of another release break (``Protocol error``, ``invalid
payload``, hangs).

Bulk submission is one process: ``flux python`` running ``jobspec.py`` (the
same jobspec builder as the native driver) on the broker's side, reading the
job descriptions from stdin - not one ``flux batch`` process per job.
(``flux submit --cc=0-N`` is one process too, but ``flux batch`` has no
``--cc`` and ``flux submit`` jobs are not nested instances: with ``-n4`` it
would run the script four times.  ``flux python`` sets the bindings'
PYTHONPATH itself, which plain jobs and ``flux start``'s initial program do
not get.)
"""

from __future__ import annotations

import json
import logging
import time
from typing import Dict, List, Optional, Sequence, Tuple

from ...errors import JobSubmissionError, SchedulerUnavailableError
from ...model import JobState, JobStatus
from ...transports.base import CommandResult, Executor
from . import commands
from . import jobspec as jobspec_module
from .queues import QueueInfo, parse_config_json, parse_queue_list, submission_error
from .versions import POLICIES, FluxPolicy, parse_flux_version_output

log = logging.getLogger("hpcbridge")

#: ids per ``flux jobs`` call (keeps the command line short)
_QUERY_CHUNK = 400

# A freshly started (nested) instance answers before its job-ingest module is
# loaded; such a submission was not accepted, so retrying it is safe.
_NOT_READY = ("No service matching job-ingest.submit", "Function not implemented")


def _helper_source() -> str:
    with open(jobspec_module.__file__, encoding="utf-8") as handle:
        return handle.read()


class CLIDriver:
    """Runs ``flux`` subcommands through an executor."""

    kind = "cli"

    def __init__(
        self,
        executor: Executor,
        uri: Optional[str],
        flux_command: str = "flux",
        command_timeout: float = 60.0,
        ready_timeout: float = 30.0,
    ) -> None:
        self.executor = executor
        self.uri = uri
        self.flux = flux_command
        self.command_timeout = command_timeout
        self.ready_timeout = ready_timeout
        #: set by the adapter once the broker's version is known
        self.policy: FluxPolicy = POLICIES[0]

    # -- running -------------------------------------------------------------

    def env(self, uri: Optional[str] = None) -> Optional[Dict[str, str]]:
        target = uri if uri is not None else self.uri
        return {"FLUX_URI": target} if target else None

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: Optional[float] = None,
        idempotent: bool = True,
        input: Optional[str] = None,
        cwd: Optional[str] = None,
        uri: Optional[str] = None,
    ) -> CommandResult:
        result = self.executor.run(
            list(argv),
            timeout=timeout if timeout is not None else self.command_timeout,
            env=self.env(uri),
            cwd=cwd,
            input=input,
            idempotent=idempotent,
        )
        if result.returncode == 127 and not result.stdout:
            raise SchedulerUnavailableError(
                f"{argv[0]} not found where commands run ({self.executor.kind}): "
                f"{result.message()} - set the flux command path (flux_command=...)"
            )
        return result

    # -- versions ----------------------------------------------------------------

    def versions(self) -> Dict[str, str]:
        """``flux version``: commands, libflux-core and (when reachable) broker."""
        result = self.run(commands.version_argv(self.flux))
        found = parse_flux_version_output(result.stdout)
        if "broker" not in found:
            # The broker line appears only when the broker answered.
            attr = self.run(commands.getattr_argv(self.flux, "version"))
            if attr.ok and attr.stdout.strip():
                found["broker"] = attr.stdout.strip()
            else:
                found["broker_error"] = attr.message()
        return found

    def attr(self, name: str) -> Optional[str]:
        result = self.run(commands.getattr_argv(self.flux, name))
        return result.stdout.strip() if result.ok and result.stdout.strip() else None

    def hostname(self) -> Optional[str]:
        result = self.executor.run(commands.hostname_argv(), timeout=self.command_timeout)
        return result.stdout.strip() if result.ok else None

    # -- submission ----------------------------------------------------------------

    def submit(self, request: commands.SubmitRequest) -> str:
        argv = commands.batch_argv(self.flux, self.policy, request)
        deadline = time.monotonic() + self.ready_timeout
        while True:
            result = self.run(argv, idempotent=False, cwd=request.cwd)
            if result.ok:
                try:
                    return commands.parse_submit_output(result.stdout)
                except ValueError as exc:
                    raise JobSubmissionError(str(exc), argv=argv) from None
            if _not_ready(result) and time.monotonic() < deadline:
                time.sleep(0.5)
                continue
            raise submission_error(
                result.stderr + "\n" + result.stdout, argv=argv, what=" ".join(argv[:2])
            )

    def submit_many(self, requests: Sequence[commands.SubmitRequest]) -> List[Tuple[bool, str]]:
        """One ``flux python`` process submits every request (pipelined inside)."""
        argv = commands.bulk_argv(self.flux, _helper_source())
        payload = json.dumps({"jobs": [commands.jobspec_params(request) for request in requests]})
        timeout = max(self.command_timeout, 0.1 * len(requests))
        deadline = time.monotonic() + self.ready_timeout
        while True:
            result = self.run(
                argv, idempotent=False, input=payload, timeout=timeout, cwd=requests[0].cwd
            )
            outcome = commands.parse_bulk_output(result.stdout) if result.stdout else []
            if result.ok and len(outcome) == len(requests):
                return outcome
            if not outcome and _not_ready(result) and time.monotonic() < deadline:
                time.sleep(0.5)
                continue
            if outcome:
                # Some were submitted before the helper stopped: report them,
                # and the rest as failed - never submit them twice.
                message = result.message() or "the bulk helper stopped early"
                return outcome + [(False, message)] * (len(requests) - len(outcome))
            raise submission_error(
                result.stderr + "\n" + result.stdout,
                argv=argv[:2],
                what="flux python (bulk submit)",
            )

    # -- status ------------------------------------------------------------------

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        answers: Dict[str, JobStatus] = {}
        for start in range(0, len(job_ids), _QUERY_CHUNK):
            answers.update(self._query_chunk(list(job_ids[start : start + _QUERY_CHUNK])))
        return answers

    def _query_chunk(self, job_ids: List[str]) -> Dict[str, JobStatus]:
        argv = commands.jobs_argv(self.flux, self.policy, job_ids)
        result = self.run(argv)
        unknown = commands.parse_unknown_ids(result.stderr)
        if result.ok or commands.only_unknown_ids(result.stderr):
            parse = (
                commands.parse_jobs_json if self.policy.jobs_json else commands.parse_jobs_format
            )
            try:
                facts = parse(result.stdout)
            except (ValueError, KeyError) as exc:
                return _all_unknown(job_ids, f"cannot parse flux jobs output: {exc}")
            answers = commands.statuses_from_facts(
                job_ids, facts, "not known to the Flux instance (flux jobs)"
            )
            for job_id in unknown:
                if job_id in answers and answers[job_id].state is JobState.UNKNOWN:
                    answers[job_id] = answers[job_id].with_(reason="flux jobs: JobID unknown")
            return answers
        message = result.message()
        if "invalid payload" in message or "Protocol error" in message:
            # `flux jobs` of another release than the broker: the C
            # eventlog reader still works.
            return self._query_eventlogs(job_ids)
        if "Unable to connect" in message or "was not found" in message:
            # The broker's socket is gone: a nested instance whose job ended.
            where = self.uri or "the default instance"
            return _all_unknown(
                job_ids, f"the Flux instance {where} is gone or unreachable ({message})"
            )
        return _all_unknown(job_ids, f"flux jobs failed: {message}")

    def _query_eventlogs(self, job_ids: List[str]) -> Dict[str, JobStatus]:
        answers = {}
        for job_id in job_ids:
            result = self.run(commands.eventlog_argv(self.flux, job_id))
            if not result.ok:
                answers[job_id] = JobStatus(job_id, JobState.UNKNOWN, reason=result.message())
                continue
            answers[job_id] = commands.status_from_facts(
                commands.parse_eventlog(job_id, result.stdout)
            )
        return answers

    # -- cancel ------------------------------------------------------------------

    def cancel(self, job_ids: Sequence[str]) -> List[str]:
        groups = [list(job_ids)]
        if self.policy.cancel_command == ("job", "cancel"):
            groups = [[job_id] for job_id in job_ids]  # one id per `flux job cancel`
        errors = []
        for group in groups:
            result = self.run(commands.cancel_argv(self.flux, self.policy, group))
            if not result.ok:
                errors.append(result.message())
        return errors

    # -- instance facts ------------------------------------------------------------

    def queue_info(self) -> Optional[QueueInfo]:
        if self.policy.config_rpc:
            result = self.run(commands.config_get_argv(self.flux))
            if result.ok:
                try:
                    return parse_config_json(result.stdout)
                except ValueError as exc:
                    log.debug("flux config get: %s", exc)
        result = self.run(commands.queue_list_argv(self.flux))
        if result.ok:
            try:
                return parse_queue_list(result.stdout)
            except ValueError as exc:
                log.debug("flux queue list: %s", exc)
        return None

    def expiration(self) -> Optional[float]:
        result = self.run(commands.resource_r_argv(self.flux))
        if not result.ok:
            return None
        try:
            return commands.parse_expiration(result.stdout)
        except (ValueError, TypeError, AttributeError):
            return None

    def jobid(self) -> Optional[str]:
        return self.attr("jobid")

    def wait_ready(self, timeout: float) -> None:
        """A trivial request answered = the broker is up (submits retry on top)."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.run(commands.getattr_argv(self.flux, "rank"))
            if result.ok or time.monotonic() >= deadline:
                return
            time.sleep(0.5)

    # -- uri -------------------------------------------------------------------

    def resolve_uri(self, target: str, parent_uri: Optional[str], timeout: float) -> str:
        """``flux uri --remote TARGET`` on the broker's side (retried until published)."""
        if not self.policy.uri_resolution:
            raise SchedulerUnavailableError(
                f"Flux adapter {self.policy.name} has no `flux uri`; give an ssh:// or local:// URI"
            )
        argv = commands.uri_argv(self.flux, target)
        deadline = time.monotonic() + timeout
        while True:
            # An explicit parent, else the commands' default instance (no FLUX_URI).
            result = self.run(argv, uri=parent_uri or "")
            if result.ok and result.stdout.strip():
                return result.stdout.strip().splitlines()[-1].strip()
            message = result.message()
            # A job whose broker is still starting is worth waiting for: a Flux
            # job that has not published its URI yet, a Slurm job still pending
            # ("empty nodelist") or whose `flux start` is not up yet ("doesn't
            # seem to have a FLUX_URI").  "not running" / "not found" are final.
            retry = any(marker in message for marker in _URI_NOT_YET)
            if not retry or time.monotonic() >= deadline:
                raise LookupError(f"flux uri --remote {target}: {message}")
            time.sleep(0.5)


_URI_NOT_YET = ("URI not found", "doesn't seem to have a FLUX_URI", "empty nodelist")


def _not_ready(result: CommandResult) -> bool:
    text = result.stderr + result.stdout
    return any(marker in text for marker in _NOT_READY)


def _all_unknown(job_ids: Sequence[str], reason: str) -> Dict[str, JobStatus]:
    return {job_id: JobStatus(job_id, JobState.UNKNOWN, reason=reason) for job_id in job_ids}


def local_form(uri: str, here: Optional[str]) -> str:
    """``ssh://HOST/path`` -> ``local:///path`` when HOST is where commands run.

    ``flux uri --remote`` always answers ``ssh://HOST/...``; connecting that
    way needs an sshd on port 22 of HOST even on the same machine (``flux
    proxy`` fails with "Connection refused" without one).  The local form
    needs nothing.
    """
    if not uri.startswith("ssh://") or not here:
        return uri
    rest = uri[len("ssh://") :]
    host, slash, path = rest.partition("/")
    user_host = host.rsplit("@", 1)[-1].split(":", 1)[0]
    short_here = here.split(".", 1)[0]
    if slash and user_host in (here, short_here, "localhost", "127.0.0.1"):
        return "local:///" + path.split("?", 1)[0]
    return uri
