"""A Flux submission, both drivers alike: planned (resources translated, refused before
anything is staged), sent (again while the instance starts), refused in Flux's own words.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Callable, List, Optional, Tuple

from ...engine.driver import (
    PartialSubmissionError,
    Planned,
    SubmitBatch,
    Submitted,
)
from ...errors import JobSubmissionError
from ...retrying import retry
from .answers import (
    NEVER_REACHED,
    Outcome,
    limit_refused,
    log_path,
    not_ready,
    scheduler_message,
    submission_error,
)
from .command_runner import LOOK_BACK, FluxCommands, KeyFinder, look_up_all
from .ids import canonical_job_id
from .instance import InstanceFacts
from .planning import Questions, active_cap, plan_batch
from .request import MAX_BATCH, flux_plan, kind_of

log = logging.getLogger("hpcbridge")


#: how long the instance's expiration is trusted before asking again
EXPIRATION_TTL = 60.0


class TimeLeft:
    """Seconds until the instance ends, from its expiration (asked at most once a minute)."""

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


def send(
    attempt: Callable[[], List[Outcome]],
    *,
    output: str,
    kind: str,
    what: str,
    ready_timeout: float,
) -> List[Submitted]:
    """``attempt()`` until the instance is ready; the jobs that went in, in order (some in:
    ``PartialSubmissionError``; none: the first refusal in Flux's own words)."""
    noted: List[bool] = []

    def noting() -> List[Outcome]:
        outcomes = attempt()
        if not noted and not_ready(outcomes) and any(m in outcomes[0][1] for m in NEVER_REACHED):
            noted.append(True)
            log.info(
                "%s did not reach the Flux instance (%s); sending it again",
                what,
                scheduler_message(outcomes[0][1]),
            )
        return outcomes

    outcomes = noting()
    if not_ready(outcomes):
        outcomes = retry(noting, budget=ready_timeout, again=not_ready, pause=0.25, what=what)
    submitted: List[Submitted] = []
    failures: List[str] = []
    for index, (ok, value) in enumerate(outcomes):
        if ok:
            submitted.append(Submitted(value, log_path(output, value), index, kind))
        else:
            failures.append(value)
    if failures and submitted:
        limited = any(limit_refused(failure) for failure in failures)
        raise PartialSubmissionError(submitted, failures, len(outcomes), limited)
    if failures:
        raise submission_error(failures[0], what=what)
    if not submitted:
        raise JobSubmissionError(f"{what} submitted nothing and said nothing")
    return submitted


#: one attempt at sending a plan's jobs (``submission.send``)
Attempt = Callable[[], List[Outcome]]


class FluxDriverBase:
    """What both Flux drivers do alike: plan, send, and ask by command (banks, keys)."""

    def __init__(
        self,
        commands: FluxCommands,
        facts: InstanceFacts,
        expiration: Callable[[], Optional[float]],
        ready_timeout: float,
        outer_time_margin: float,
    ) -> None:
        self.commands = commands
        self.facts = facts
        self.ready_timeout = ready_timeout
        self.outer_time_margin = outer_time_margin
        self.time_left = TimeLeft(expiration)
        self.questions = Questions(
            self.time_left, self.commands.native_attributes, self.commands.associations
        )
        self._ready = False

    def plan(self, batch: SubmitBatch) -> Planned:
        return plan_batch(batch, self.facts, self.questions, self.outer_time_margin)

    def _send(
        self, planned: Planned, wait_ready: Callable[[float], None], attempt: Attempt, what: str
    ) -> List[Submitted]:
        if not self._ready:
            wait_ready(self.ready_timeout)
            self._ready = True
        output, kind = flux_plan(planned).request.output, kind_of(planned.batch).value
        return send(attempt, output=output, kind=kind, what=what, ready_timeout=self.ready_timeout)

    def _where(self) -> str:
        return f"the Flux instance {self.facts.label}"

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
        ``LOOK_BACK``)."""
        plan = flux_plan(planned)
        began = since if since is not None else time.time() - LOOK_BACK
        finder = KeyFinder(self.commands, self.facts.policy, began)
        found = look_up_all(finder, plan.keys, self._where())
        ids = {key: canonical_job_id(job_id) for key, job_id in found.items()}
        output, kind = plan.request.output, kind_of(planned.batch).value
        jobs = [
            Submitted(ids[key], log_path(output, ids[key]), index, kind)
            for index, key in enumerate(plan.keys)
            if key in ids
        ]
        return jobs or None
