"""The Flux CLI driver: ``flux`` commands through the executor (local or SSH).

Many jobs go in through one ``flux python`` running ``jobspec.py`` broker-side (``flux batch``
has no ``--cc``); the ``flux`` that runs must be the broker's own release.
"""

from __future__ import annotations

import logging
import shlex
from typing import Dict, List, Optional, Sequence

from ...engine.driver import Capabilities, Planned, Submitted, Waiter
from ...errors import (
    JobTimeoutError,
    SubmissionUncertainError,
)
from ...model import JobState, JobStatus
from ...transports.base import CommandResult
from . import answers, bulk_helper, commands, ids, status
from . import jobspec as jobspec_module
from .answers import Outcome
from .command_runner import FluxCommands
from .driver_base import FluxDriverBase
from .instance import InstanceFacts
from .jobspec import jobspec_params
from .planning import flux_plan
from .request import DROPPED_KEYS, FluxPlan
from .status import parse_eventlog

log = logging.getLogger("hpcbridge")

CAPABILITIES = Capabilities(events=False, arrays=False, dropped_keys=DROPPED_KEYS)

#: ids per ``flux jobs`` call (keeps the command line short)
_QUERY_CHUNK = 400


def _helper_source() -> str:
    """``jobspec.py`` then ``bulk_helper.py``: one standalone script for ``flux python -c``."""
    texts = []
    for module in (jobspec_module, bulk_helper):
        with open(str(module.__file__), encoding="utf-8") as handle:
            texts.append(handle.read())
    return "\n".join(texts)


class CLIDriver(FluxDriverBase):
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
        super().__init__(commands, facts, commands.expiration, ready_timeout, outer_time_margin)
        self.policy = facts.policy
        self.flux = commands.flux

    def describe(self, planned: Planned) -> str:
        request = flux_plan(planned).request
        prefix = f"FLUX_URI={shlex.quote(self.facts.uri)} " if self.facts.uri else ""
        return prefix + shlex.join(commands.submit_argv(self.flux, self.policy, request))

    def submit_many(self, planned: Planned) -> List[Submitted]:
        plan = flux_plan(planned)
        if len(plan.environments) == 1 or not self.policy.python_command:
            # 0.26's `flux python` runs whatever python is first on PATH: one by one.
            what = "flux submit" if len(plan.environments) == 1 else "flux submit (one by one)"
            return self._send(planned, self.commands.wait_ready, self._one_by_one, what)
        return self._send(
            planned, self.commands.wait_ready, self._bulk, "flux python (bulk submit)"
        )

    def _one_by_one(self, plan: FluxPlan) -> List[Outcome]:
        outcomes = []
        for index in range(len(plan.environments)):
            request = plan.job(index)
            argv = commands.submit_argv(self.flux, self.policy, request)
            outcomes.append(answers.submit_outcome(argv, self._submission(argv, request.cwd)))
        return outcomes

    def _submission(
        self,
        argv: List[str],
        cwd: str,
        input: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> CommandResult:
        """Run once; a lost answer (dropped connection, timeout): ``SubmissionUncertainError``."""
        try:
            return self.commands.run(argv, idempotent=False, cwd=cwd, input=input, timeout=timeout)
        except JobTimeoutError as exc:
            raise SubmissionUncertainError(f"{exc}: its answer was lost", argv=argv) from exc

    def _bulk(self, plan: FluxPlan) -> List[Outcome]:
        """One ``flux python`` process submits every job (pipelined inside)."""
        count = len(plan.environments)
        argv = [self.flux, "python", "-c", _helper_source()]
        payload = commands.bulk_input(
            jobspec_params(plan.request), plan.environments, plan.keys, plan.names
        )
        timeout = max(self.commands.command_timeout, 0.1 * count)
        result = self._submission(argv, plan.request.cwd, input=payload, timeout=timeout)
        return answers.bulk_outcomes(result, count)

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        answers: Dict[str, JobStatus] = {}
        for start in range(0, len(job_ids), _QUERY_CHUNK):
            answers.update(self._query_chunk(list(job_ids[start : start + _QUERY_CHUNK])))
        return answers

    def _query_chunk(self, job_ids: List[str]) -> Dict[str, JobStatus]:
        result = self.commands.run(commands.jobs_argv(self.flux, self.policy, job_ids))
        if result.ok or status.only_unknown_ids(result.stderr):
            return self._from_listing(job_ids, result)
        message = result.message()
        if "invalid payload" in message or "Protocol error" in message:
            # `flux jobs` of another release than the broker: the C eventlog reader works.
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
            argv = [self.flux, "job", "info", ids.decimal_job_id(job_id), "eventlog"]
            result = self.commands.run(argv)
            if result.ok:
                facts = parse_eventlog(job_id, result.stdout)
                answers[job_id] = status.status_from_facts(facts)
            else:
                answers[job_id] = JobStatus(job_id, JobState.UNKNOWN, reason=result.message())
        return answers

    def cancel(self, job_ids: Sequence[str]) -> None:
        errors = []
        for group in commands.cancel_groups(self.policy, job_ids):
            result = self.commands.run(commands.cancel_argv(self.flux, self.policy, group))
            if not result.ok:
                errors.append(result.message())
        answers.raise_cancel_errors(errors)

    def find_output(self, job_id: str) -> Optional[str]:
        return self.commands.output_of(job_id)

    def waiter(self, job_ids: Sequence[str]) -> Optional[Waiter]:
        return None

    def close(self) -> None:
        """Nothing held open."""
