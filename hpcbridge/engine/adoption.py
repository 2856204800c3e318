"""A submission whose answer was lost: find it by its key, or send it once more.

Every submission carries a key of its own that the scheduler keeps with the
job (Slurm: the job's comment; Flux: an attribute of its jobspec).  When the
answer is lost - ``sbatch`` timed out while the controller was busy, the SSH
connection dropped after the request went out - the job may or may not
exist.  ``adopt_or_resubmit`` asks the scheduler about the key until it
knows:

- a job carrying the key exists: it is adopted, as if the submit had answered;
- the scheduler answers, and keeps answering for ``settle`` seconds, that no
  job carries it: the request never became a job, and it is sent once more
  (a request still queued in a paused controller is accepted in the order it
  arrived, so a second look a while after the first answer settles that);
- neither within ``budget``: ``SubmissionUncertainError``, with the key to
  look for.
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
from .retrying import Deadline

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
    """The id of the one job the uncertain submission made (see the module docstring).

    ``find()`` returns the id of the job carrying ``key``, ``None`` when the
    scheduler answered that there is none, or raises ``CannotAsk``.
    ``look_for`` says, in the error, what a person should look for (default:
    a job with the comment ``hpcbridge:<key>``, Slurm's).
    """
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
    """The job carrying ``key`` (adopted), or ``None`` once the scheduler has answered
    for ``settle`` seconds that none does; ``SubmissionUncertainError`` when neither
    is known within ``budget`` (``look_for``: as for ``adopt_or_resubmit``)."""
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
