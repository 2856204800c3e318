"""The send step both Flux drivers share: again while the instance starts, then the outcome.

A driver hands ``send`` one attempt - submit every job of a plan, pipelined,
and report ``(True, id)`` or ``(False, Flux's words)`` per job - and gets the
submitted jobs back, or the error the caller should see.  A freshly started
(nested) instance answers before its job-ingest module is loaded; a
submission it refuses that way was not accepted, so it is sent again, within
the ready budget - as is one that could not connect to the instance at all
(nothing was sent).  Anything else is final.
"""

from __future__ import annotations

import logging
from typing import Callable, List, Sequence, Tuple

from ...errors import JobSubmissionError
from ...retrying import retry
from ..driver import PartialSubmissionError, Submitted
from .command_line import limit_refused, scheduler_message, submission_error
from .ids import canonical_job_id

#: one job's outcome: (True, its id) or (False, why not)
Outcome = Tuple[bool, str]

log = logging.getLogger("hpcbridge")

# What a starting instance says before its job-ingest service exists.
NOT_READY = ("No service matching job-ingest.submit", "Function not implemented")
# What every release's commands and bindings say when the broker's socket is
# missing or nobody listens on it: the connection never opened, nothing was sent.
NEVER_REACHED = ("Unable to connect to Flux",)


def not_ready(outcomes: Sequence[Outcome]) -> bool:
    """Nothing went in, and only because the instance is still starting or could
    not be reached."""
    markers = NOT_READY + NEVER_REACHED
    return bool(outcomes) and all(
        not ok and any(marker in value for marker in markers) for ok, value in outcomes
    )


def send(
    attempt: Callable[[], List[Outcome]],
    *,
    output: str,
    kind: str,
    what: str,
    ready_timeout: float,
) -> List[Submitted]:
    """``attempt()`` until the instance is ready; the jobs that went in, in order.

    Some in: ``PartialSubmissionError`` (they are recorded, never sent twice);
    none: the first refusal as a ``JobSubmissionError`` in Flux's own words.
    """
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

    outcomes = retry(noting, budget=ready_timeout, again=not_ready, pause=0.25, what=what)
    submitted: List[Submitted] = []
    failures: List[str] = []
    for index, (ok, value) in enumerate(outcomes):
        if ok:
            job_id = canonical_job_id(value)
            submitted.append(Submitted(job_id, log_path(output, job_id), index, kind))
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


def log_path(output: str, job_id: str) -> str:
    """Where a submitted job's output lands: Flux's ``{{id}}`` replaced by its id."""
    return output.replace("{{id}}", job_id)
