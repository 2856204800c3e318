"""How a caller waits: a ``WaitPlan``, made once where the call enters (``wait``,
``wait_all``, a sweep's ``wait``, ``hpcbridge wait``), checked there, and passed down
whole to the one wait loop (``waiting.wait_for_all``)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Dict, Optional

from ..errors import ConfigurationError
from ..model import JobStatus

#: told a job's status each time its state changes, in the order the changes are seen
StatusCallback = Callable[[JobStatus], None]
#: told every job's latest status after each tick
ProgressCallback = Callable[[Dict[str, JobStatus]], None]


@dataclass(frozen=True)
class WaitPlan:
    """The caller's side of a wait; numbers that mean no wait are refused when it is made
    (``ConfigurationError``), before anything is asked."""

    #: the least seconds between two scheduler rounds (``None``: the adapter's); the
    #: site's floor still applies
    poll_interval: Optional[float] = None
    #: seconds until ``JobTimeoutError`` (``None``: for as long as it takes)
    timeout: Optional[float] = None
    #: seconds between two looks at the exit-code files (and at the poller's answers)
    notice_interval: float = 1.0
    on_change: Optional[StatusCallback] = None
    on_poll: Optional[ProgressCallback] = None
    #: return the final statuses of the first ``enough`` to end (``None``: wait for all)
    enough: Optional[int] = None
    #: whether an exit-code file may tell an end first (not for a sweep's feeder)
    files: bool = True
    #: set from another thread: the pause ends (within ``waiting.WAKE_SLICE``) and
    #: ``on_poll`` is told at once, no round asked for it (a follower's new subscription);
    #: ``on_poll`` clears it
    wake: Optional[threading.Event] = None

    def __post_init__(self) -> None:
        if self.timeout is not None and not self.timeout >= 0:
            raise ConfigurationError(
                f"timeout={self.timeout!r}: expected seconds, 0 or more "
                "(None waits for as long as it takes)"
            )
        for name in ("poll_interval", "notice_interval"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigurationError(f"{name}={value!r}: expected a number of seconds above 0")

    @property
    def tick(self) -> float:
        """Seconds between two looks: the notice interval, or a shorter poll interval."""
        if self.poll_interval is None:
            return self.notice_interval
        return min(self.notice_interval, self.poll_interval)
