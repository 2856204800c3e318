"""A submission whose answer was lost, adopted by its key (a Slurm comment, a Flux jobspec
attribute): the one routine for single submissions, bulks, sweeps and packs.

The jobs carrying the keys are looked for until all are found, or until no new one turned
up for ``settle`` seconds (the scheduler then surely has no job for the rest: they are sent
once more where the caller can); neither within ``budget``: ``SubmissionUncertainError``.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Collection, Dict, List, Mapping, Optional, Sequence

from ..errors import (
    JobTimeoutError,
    SchedulerUnavailableError,
    SubmissionUncertainError,
    TransportError,
)
from ..retrying import Deadline
from .driver import Again, CannotAsk, NotAskedNow

__all__ = ["CannotAsk", "adopt"]

log = logging.getLogger("hpcbridge")

#: seconds between two looks for the keys
LOOK_EVERY = 2.0

#: what a look that could not ask raises: the scheduler was not asked, nothing is known
_NOT_ASKED = (
    CannotAsk,
    Again,
    NotAskedNow,
    JobTimeoutError,
    TransportError,
    SchedulerUnavailableError,
)


def adopt(
    keys: Sequence[str],
    find: Callable[[Collection[str]], Mapping[str, str]],
    *,
    budget: float,
    settle: float,
    where: str,
    resend: Optional[Callable[[List[str]], None]] = None,
    look_for: str = "",
) -> Dict[str, str]:
    """key -> the id of the job carrying it, for the keys found.  ``find(keys)``: key ->
    id of those of ``keys`` some job carries (``CannotAsk`` when the scheduler cannot tell
    now); ``resend(missing)``: sends the keys surely absent once more.  Past ``budget``
    with none found: ``SubmissionUncertainError`` (some found: those, the rest unsent;
    ``look_for``: what a person should look for, default the comment ``hpcbridge:<key>``)."""
    label = keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"
    deadline = Deadline(budget)
    found: Dict[str, str] = {}
    quiet_since: Optional[float] = None  # since when the scheduler answered, none new
    while len(found) < len(keys):
        try:
            new = {k: v for k, v in find([k for k in keys if k not in found]).items() if k in keys}
        except _NOT_ASKED as exc:
            log.info("submission %s: cannot ask %s about it yet (%s)", label, where, exc)
            quiet_since = None
        else:
            fresh = {key: job for key, job in new.items() if key not in found}
            found.update(fresh)
            if fresh:
                log.warning(
                    "submission %s: its answer was lost; adopted job%s %s",
                    label,
                    "s" if len(fresh) > 1 else "",
                    ", ".join(fresh.values()),
                )
                quiet_since = None  # more keep arriving: the settling starts again
            elif quiet_since is None:
                quiet_since = time.monotonic()
            incomplete = len(found) < len(keys)
            if incomplete and quiet_since is not None and time.monotonic() - quiet_since >= settle:
                return _settled(keys, found, resend, label, where)
        if len(found) < len(keys) and deadline.expired:
            if found:
                return found
            raise _uncertain(label, where, budget, look_for)
        if len(found) < len(keys):
            deadline.sleep(LOOK_EVERY)
    return found


def _uncertain(label: str, where: str, budget: float, look_for: str) -> SubmissionUncertainError:
    return SubmissionUncertainError(
        f"the answer to submission {label} was lost and {where} could not tell within "
        f"{budget:g} s whether the job exists; look for "
        f"{look_for or f'a job with the comment hpcbridge:{label}'} before submitting again"
    )


def _settled(
    keys: Sequence[str],
    found: Dict[str, str],
    resend: Optional[Callable[[List[str]], None]],
    label: str,
    where: str,
) -> Dict[str, str]:
    missing = [key for key in keys if key not in found]
    if resend is not None:
        if len(keys) == 1:
            log.warning(
                "submission %s: %s surely has no such job; submitting it once more", label, where
            )
        else:
            log.warning(
                "submission %s: %s surely has no job for %d of its keys; submitting them once more",
                label,
                where,
                len(missing),
            )
        resend(missing)
    return found
