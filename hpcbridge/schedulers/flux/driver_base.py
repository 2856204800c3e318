"""What both Flux drivers share off the submission path: the questions planning may ask,
how lost answers are found by key (``Keyed``, for the engine's runner, which sends), the
bank's cap, and the jobs a sender that died left.  Each driver plans and sends itself
(``planning.plan_batch``, ``planning.send_plan``): a submission passes no module here.
"""

from __future__ import annotations

import functools
from typing import List, Optional, Protocol

from ...engine.driver import Keyed, Planned, Submitted
from . import answers
from .command_runner import FluxCommands
from .ids import canonical_job_id
from .instance import InstanceFacts
from .instance_answers import active_cap
from .planning import Questions, Sender, flux_plan, kind_of, log_path
from .request import MAX_BATCH, FluxPlan


class TimeLeftClock(Protocol):
    """Seconds the instance has left (``None``: no limit known; ``native_driver.TimeLeft``)."""

    def __call__(self) -> Optional[float]: ...


class FluxDriverBase:
    """What both Flux drivers share: their facts, questions and sender (``planning.Sender``:
    the runner's ``send_keyed`` bound to this instance's key lookup)."""

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
        keyed = Keyed(
            functools.partial(commands.adopt, facts.policy),
            answers.lost_answer,
            answers.unknown_after_loss,
            FluxPlan.only,
        )
        #: sends a plan's jobs: again while the instance starts, lost answers adopted
        self.sender: Sender = functools.partial(
            commands.runner.send_keyed, keyed=keyed, budget=ready_timeout
        )
        #: whether the instance was waited for (before the first submission)
        self._ready = False

    def max_batch(self) -> int:
        return MAX_BATCH

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
        found = self.commands.adopt(self.facts.policy, list(plan.keys), since)
        ids = {key: canonical_job_id(job_id) for key, job_id in found.items()}
        output, kind = plan.request.output, kind_of(planned.batch.options).value
        jobs = [
            Submitted(ids[key], log_path(output, ids[key]), index, kind)
            for index, key in enumerate(plan.keys)
            if key in ids
        ]
        return jobs or None
