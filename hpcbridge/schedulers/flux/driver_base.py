"""What both Flux drivers do alike, over the engine's runner: plan, send (again while the
instance starts), adopt the jobs of a lost answer by their keys, and read the time the
instance has left.
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, List, Optional, Protocol

from ...engine.driver import Call, Planned, SubmitBatch, Submitted
from ...errors import SubmissionUncertainError
from . import answers
from .answers import (
    NEVER_REACHED,
    Outcome,
    scheduler_message,
)
from .command_runner import LOOK_BACK, FluxCommands
from .ids import canonical_job_id
from .instance import InstanceFacts
from .jobspec import LOST
from .planning import (
    Questions,
    active_cap,
    flux_plan,
    kind_of,
    launcher_for,
    log_path,
    not_ready,
    plan_batch,
    reached,
    submitted,
)
from .request import MAX_BATCH, FluxPlan

log = logging.getLogger("hpcbridge")


#: one sending of a plan's jobs: each one's outcome, in order
Send = Callable[[FluxPlan], List[Outcome]]


class TimeLeftClock(Protocol):
    """Seconds the instance has left (``None``: no limit known), and this process's clock
    (``native_driver.TimeLeft``)."""

    def __call__(self) -> Optional[float]: ...

    def now(self) -> float: ...


class FluxDriverBase:
    """What both Flux drivers do alike: plan, send, and ask by command (banks, keys)."""

    def __init__(
        self,
        commands: FluxCommands,
        facts: InstanceFacts,
        time_left: TimeLeftClock,
        ready_timeout: float,
        outer_time_margin: float,
    ) -> None:
        self.commands = commands
        self.facts = facts
        self.ready_timeout = ready_timeout
        self.outer_time_margin = outer_time_margin
        self.time_left = time_left
        self.questions = Questions(
            self.time_left, self.commands.native_attributes, self.commands.associations
        )
        self._ready = False

    def plan(self, batch: SubmitBatch) -> Planned:
        return plan_batch(batch, self.facts, self.questions, self.outer_time_margin)

    def _send(
        self, planned: Planned, wait_ready: Callable[[float], None], send: Send, what: str
    ) -> List[Submitted]:
        """Every job of ``planned`` by ``send``; while the instance starts, again through the
        engine's runner (``reached``); lost answers adopted by key (``_sent``)."""
        if not self._ready:
            wait_ready(self.ready_timeout)
            self._ready = True
        plan, noted = flux_plan(planned), [False]

        def attempt() -> List[Outcome]:
            outcomes = self._sent(plan, send, what)
            never = not_ready(outcomes) and any(m in outcomes[0][1] for m in NEVER_REACHED)
            if never and not noted[0]:
                noted[0] = True
                said = scheduler_message(outcomes[0][1])
                log.info("%s did not reach the Flux instance (%s); sending it again", what, said)
            return outcomes

        outcomes = attempt()
        if not_ready(outcomes):  # the instance is starting or unreachable: nothing went in
            again = Call(what, attempt)
            outcomes = self.commands.runner.send(
                again, lambda sent: reached(sent, what), budget=self.ready_timeout
            )
        kind = kind_of(planned.batch.options).value
        return submitted(outcomes, plan.request.output, kind, what)

    def _sent(self, plan: FluxPlan, send: Send, what: str) -> List[Outcome]:
        """``send(plan)``'s outcomes; the jobs whose answers were lost (all: the call's; some:
        ``LOST`` outcomes) found by their keys, or sent once more when surely absent."""
        started = self.time_left.now()
        try:
            outcomes = send(plan)
        except SubmissionUncertainError as lost:
            if not plan.keys:
                raise
            log.warning("%s: the answer was lost (%s); looking for its jobs by key", what, lost)
            return self._adopt(plan, list(range(len(plan.keys))), started, send)
        lost_ones = [i for i, (ok, text) in enumerate(outcomes) if not ok and text.startswith(LOST)]
        if lost_ones and plan.keys:
            self._lost_connection()
            log.warning("%s: the answers of %d job(s) were lost; looking", what, len(lost_ones))
            outcomes = list(outcomes)
            for index, outcome in zip(lost_ones, self._adopt(plan, lost_ones, started, send)):
                outcomes[index] = outcome
        return outcomes

    def _adopt(
        self, plan: FluxPlan, indices: List[int], started: float, send: Send
    ) -> List[Outcome]:
        keys = [plan.keys[index] for index in indices]
        resent: Dict[str, Outcome] = {}

        def resend(missing: List[str]) -> None:
            picked = [indices[keys.index(key)] for key in missing]
            resent.update(zip(missing, send(plan.only(picked))))

        found = self.commands.adopt(self.facts.policy, keys, started, resend)
        return answers.adopted(keys, found, resent)

    def _lost_connection(self) -> None:
        """After lost answers (the native driver drops its handle)."""

    def _where(self) -> str:
        return f"the Flux instance {self.facts.label}"

    def max_batch(self) -> int:
        return MAX_BATCH

    def launcher(self, options: object) -> str:
        return launcher_for(self.commands.flux, self.facts.policy, options)

    def queue_limit(self, account: Optional[str] = None, *, ask: bool = True) -> Optional[int]:
        """flux-accounting's ``max_active_jobs`` of the bank, read by command; ``None``
        without accounting (flux-core caps no user's jobs).  Read even with ``ask=False``:
        Flux refuses the jobs past the cap one by one, a round and a refusal each."""
        return active_cap(self.commands.associations(), account)

    def find_submitted(
        self, planned: Planned, since: Optional[float] = None
    ) -> Optional[List[Submitted]]:
        """By the keys in the jobs' jobspecs, this user's jobs since ``since`` (else
        ``LOOK_BACK``); nothing is sent again (the sender died)."""
        plan = flux_plan(planned)
        began = since if since is not None else self.time_left.now() - LOOK_BACK
        found = self.commands.adopt(self.facts.policy, list(plan.keys), began)
        ids = {key: canonical_job_id(job_id) for key, job_id in found.items()}
        output, kind = plan.request.output, kind_of(planned.batch.options).value
        jobs = [
            Submitted(ids[key], log_path(output, ids[key]), index, kind)
            for index, key in enumerate(plan.keys)
            if key in ids
        ]
        return jobs or None
