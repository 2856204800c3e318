"""A submission whose answer was lost: find it by its key (a Slurm comment, a Flux
jobspec attribute), or - once the scheduler says for ``settle`` seconds that no job
carries it - send it once more; neither within ``budget``: ``SubmissionUncertainError``.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional

from ..errors import (
    JobTimeoutError,
    SchedulerUnavailableError,
    SubmissionUncertainError,
    TransportError,
)
from ..retrying import Deadline

log = logging.getLogger("hpcbridge")

#: seconds between two looks for the key
LOOK_EVERY = 2.0


class CannotAsk(Exception):
    """The scheduler could not be asked about the key right now (busy, restarting)."""


def adopt_or_resubmit(
    find: Callable[[], Optional[str]],
    resubmit: Callable[[], str],
    *,
    key: str,
    budget: float,
    settle: float,
    where: str,
    look_for: str = "",
) -> str:
    """The id of the one job the uncertain submission made.  ``find()``: the id of the
    job carrying ``key``, ``None`` for none, or ``CannotAsk``; ``look_for``: what a person
    should look for (default: the comment ``hpcbridge:<key>``)."""
    found = look_up(find, key=key, budget=budget, settle=settle, where=where, look_for=look_for)
    if found is not None:
        return found
    log.warning("submission %s: %s surely has no such job; submitting it once more", key, where)
    return resubmit()


def look_up(
    find: Callable[[], Optional[str]],
    *,
    key: str,
    budget: float,
    settle: float,
    where: str,
    look_for: str = "",
) -> Optional[str]:
    """The job carrying ``key``, or ``None`` once the scheduler said none does for
    ``settle`` seconds; ``SubmissionUncertainError`` when neither within ``budget``."""
    deadline = Deadline(budget)
    absent_since: Optional[float] = None
    while True:
        try:
            found = find()
        except (CannotAsk, JobTimeoutError, TransportError, SchedulerUnavailableError) as exc:
            log.info("submission %s: cannot ask %s about it yet (%s)", key, where, exc)
            found, absent_since = None, None
        else:
            if found is not None:
                log.warning("submission %s: its answer was lost; adopted job %s", key, found)
                return found
            absent_since = absent_since if absent_since is not None else time.monotonic()
            if time.monotonic() - absent_since >= settle:
                return None
        if deadline.expired:
            raise SubmissionUncertainError(
                f"the answer to submission {key} was lost and {where} could not tell within "
                f"{budget:g} s whether the job exists; look for "
                f"{look_for or f'a job with the comment hpcbridge:{key}'} before submitting again"
            )
        deadline.sleep(LOOK_EVERY)
