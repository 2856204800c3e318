"""The Flux CLI driver: ``flux`` commands run by the engine's runner through the executor
(local or SSH).

Many jobs go in through one ``flux python`` running ``jobspec.py`` broker-side (``flux batch``
has no ``--cc``); the ``flux`` that runs must be the broker's own release.
"""

from __future__ import annotations

import functools
import logging
import shlex
from typing import Callable, Dict, List, Optional, Sequence, TypeVar

from ...engine.driver import (
    Capabilities,
    Command,
    Planned,
    Reply,
    SubmitBatch,
    Submitted,
    Waiter,
)
from ...model import JobStatus
from . import answers, bulk_helper, commands
from . import jobspec as jobspec_module
from .answers import Outcome
from .command_runner import FluxCommands
from .driver_base import FluxDriverBase
from .instance import InstanceFacts
from .jobspec import jobspec_params
from .native_driver import TimeLeft
from .planning import flux_plan, launcher_for, plan_batch, send_plan
from .request import DROPPED_KEYS, FluxPlan

log = logging.getLogger("hpcbridge")

T = TypeVar("T")

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
        time_left = TimeLeft(commands.expiration)
        super().__init__(commands, facts, time_left, ready_timeout, outer_time_margin)
        self.policy = facts.policy
        self.flux = commands.flux

    def describe(self, planned: Planned) -> str:
        request = flux_plan(planned).request
        prefix = f"FLUX_URI={shlex.quote(self.facts.uri)} " if self.facts.uri else ""
        return prefix + shlex.join(commands.submit_argv(self.flux, self.policy, request))

    def plan(self, batch: SubmitBatch) -> Planned:
        return plan_batch(batch, self.facts, self.questions, self.outer_time_margin)

    def launcher(self, options: object) -> str:
        return launcher_for(self.flux, self.policy, options)

    def submit_many(self, planned: Planned) -> List[Submitted]:
        if not self._ready:
            self.commands.wait_ready(self.ready_timeout)
            self._ready = True
        count = len(flux_plan(planned).environments)
        if count == 1 or not self.policy.python_command:
            # 0.26's `flux python` runs whatever python is first on PATH: one by one.
            what = "flux submit" if count == 1 else "flux submit (one by one)"
            return send_plan(planned, self._one_by_one, what, self.sender)
        return send_plan(planned, self._bulk, "flux python (bulk submit)", self.sender)

    def _one_by_one(self, plan: FluxPlan) -> List[Outcome]:
        outcomes = []
        for index in range(len(plan.environments)):
            request = plan.job(index)
            argv = commands.submit_argv(self.flux, self.policy, request)
            parse = functools.partial(answers.submit_outcome, argv)
            outcomes.append(self._submission(Command(argv, cwd=request.cwd), parse))
        return outcomes

    def _submission(self, request: Command, parse: Callable[[Reply], T]) -> T:
        """Sent once by the runner (``Runner.send``); a lost answer (dropped connection,
        timeout): ``SubmissionUncertainError``, adopted by key (``Runner.send_keyed``)."""
        return self.commands.runner.send(request, lambda reply: parse(self.commands.found(reply)))

    def _bulk(self, plan: FluxPlan) -> List[Outcome]:
        """One ``flux python`` process submits every job (pipelined inside)."""
        count = len(plan.environments)
        argv = [self.flux, "python", "-c", _helper_source()]
        payload = commands.bulk_input(
            jobspec_params(plan.request), plan.environments, plan.keys, plan.names
        )
        timeout = max(self.commands.command_timeout, 0.1 * count)
        request = Command(argv, cwd=plan.request.cwd, stdin=payload, timeout=timeout)
        return self._submission(request, lambda reply: answers.bulk_outcomes(reply, count))

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        def argv(chunk: Sequence[str]) -> List[str]:
            return commands.jobs_argv(self.flux, self.policy, chunk)

        return self.commands.runner.ask_each(argv, job_ids, self._answers, size=_QUERY_CHUNK)

    def _answers(self, result: Reply, chunk: Sequence[str]) -> Dict[str, JobStatus]:
        self.commands.found(result)
        jobs_json, label = self.policy.jobs_json, self.facts.label
        found = answers.listing_answers(list(chunk), result, jobs_json, label)
        return self._query_eventlogs(chunk) if found is None else found

    def _query_eventlogs(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        return {
            job_id: answers.eventlog_answer(
                job_id, self.commands.run(commands.eventlog_argv(self.flux, job_id))
            )
            for job_id in job_ids
        }

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
