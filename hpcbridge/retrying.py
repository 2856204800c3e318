"""Time budgets (``Deadline``) and the one bounded retry loop (``retry``)."""

from __future__ import annotations

import logging
import math
import time
from typing import Callable, Optional, Tuple, Type, TypeVar

log = logging.getLogger("hpcbridge")

T = TypeVar("T")


class Deadline:
    """A time budget, in monotonic seconds."""

    def __init__(self, seconds: Optional[float]) -> None:
        self.seconds = seconds
        self.ends = math.inf if seconds is None else time.monotonic() + max(seconds, 0.0)

    def remaining(self) -> float:
        """Seconds left (``inf`` without a limit, never below 0)."""
        return max(self.ends - time.monotonic(), 0.0)

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.ends

    def cap(self, seconds: float) -> float:
        """``seconds``, shortened so that a pause of it ends by the deadline."""
        return max(min(seconds, self.remaining()), 0.0)

    def sleep(self, seconds: float) -> None:
        """Pause ``seconds``, or until the deadline if that comes first."""
        time.sleep(self.cap(seconds))


def retry(
    attempt: Callable[[], T],
    *,
    budget: Optional[float],
    again: Callable[[T], bool] = lambda _result: False,
    retry_on: Tuple[Type[BaseException], ...] = (),
    pause: float = 0.25,
    backoff: float = 1.0,
    max_pause: Optional[float] = None,
    what: str = "",
) -> T:
    """``attempt()`` until ``again`` returns False for its result or the budget is spent
    (then the last result is returned, or the last ``retry_on`` exception raised);
    ``what``: each retry logged at DEBUG."""
    deadline = Deadline(budget)
    wait = pause
    while True:
        try:
            result = attempt()
        except retry_on as exc:
            if deadline.expired:
                raise
            if what:
                log.debug("%s: %s; trying again in %.2g s", what, exc, deadline.cap(wait))
        else:
            if not again(result) or deadline.expired:
                return result
            if what:
                log.debug("%s: not yet; trying again in %.2g s", what, deadline.cap(wait))
        deadline.sleep(wait)
        wait = wait * backoff if max_pause is None else min(wait * backoff, max_pause)
