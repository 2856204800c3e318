"""Asking the scheduler at a polite rate - one round for every process of this user here.

Every process asking about one scheduler instance (``target``) writes the ids it wants
into the store's poll tables (``store.polls.PollBoard``); the one holding the poll (a
lease renewed each round) asks about all of them and publishes the answers; the others
read them.
Rounds are ``interval`` apart, more after a slow answer (``SLOW_FACTOR``, ``SLOW_CAP``).
A driver woken by events gets a ``Poller`` without a board: it only keeps the rate.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from ..retrying import Deadline
from ..store.leases import me
from ..store.polls import Answer, PollBoard
from .observation import Observation, Reach, Source

log = logging.getLogger("hpcbridge")

Query = Callable[[List[str]], Dict[str, Observation]]

#: a scheduler that took ``d`` seconds to answer is asked again after ``SLOW_FACTOR * d`` at least
SLOW_FACTOR = 10.0
#: ... when ``d`` is at least this long (a quick answer says nothing of the load)
SLOW_AFTER = 0.5
#: ... but never more than this (an answer that waited out a controller restart)
SLOW_CAP = 60.0
#: how long a lease outlives its last round, in intervals (then another process takes over)
LEASE_INTERVALS = 2.0
#: a wanted id is forgotten this many intervals after its process last asked for it
WANT_INTERVALS = 3.0
#: seconds ``next_answers`` waits past the poller's next round before asking itself
NEXT_ROUND_SLACK = 1.5

_warned_floor = False


def warn_under_floor(asked: float, floor: float) -> None:
    """Once per process: a caller asked to poll more often than the floor allows."""
    global _warned_floor
    if not _warned_floor:
        _warned_floor = True
        log.warning(
            "a poll interval of %g s is under this site's floor of %g s "
            "(min_poll_interval: HPCBRIDGE_MIN_POLL_INTERVAL, or the site's settings file): "
            "the scheduler is asked every %g s; ends are still noticed within a second "
            "from the jobs' exit-code files",
            asked,
            floor,
            floor,
        )


class Poller:
    """One scheduler round per interval at most; with a board, shared.  ``floor``: the
    least interval, whatever a caller names."""

    def __init__(
        self,
        query: Query,
        interval: float,
        *,
        board: Optional[PollBoard] = None,
        target: str = "",
        floor: float = 0.0,
    ) -> None:
        self.query = query
        self.interval = interval
        self.floor = floor
        self.board = board
        self.target = target
        #: who holds a poll: this host, this process, and a part of this Poller's own
        self.owner = f"{me()}:{uuid.uuid4().hex[:8]}"
        #: held while asking the scheduler or the board, never while sleeping
        self._lock = threading.Lock()
        #: when this process last asked the scheduler itself (monotonic), and how long it took
        self._last_round = -float("inf")
        self._duration = 0.0
        #: the answers this process got, and when they were given (wall clock)
        self._latest: Dict[str, Observation] = {}
        self._latest_at: Dict[str, float] = {}
        #: a wait asks through this poller (until ``release``): it keeps the poll it takes
        self._waiting = False

    def chosen(self, interval: Optional[float] = None) -> float:
        """The interval of one call: the caller's (else the poller's), never under the floor."""
        asked = self.interval if interval is None else interval
        if asked < self.floor:
            warn_under_floor(asked, self.floor)
            return self.floor
        return asked

    def gap(self, interval: Optional[float] = None) -> float:
        """The least time between two rounds: the interval, or more for a slow scheduler."""
        slow = self._duration if self._duration >= SLOW_AFTER else 0.0
        return max(self.chosen(interval), min(SLOW_FACTOR * slow, SLOW_CAP))

    def due(self, interval: Optional[float] = None) -> bool:
        return time.monotonic() - self._last_round >= self.gap(interval)

    def ask(
        self, job_ids: List[str], one_off: bool = False, interval: Optional[float] = None
    ) -> Dict[str, Observation]:
        """Answers for those of ``job_ids`` fresh now (no older than the gap); an id
        without one is left out.  Asks the scheduler when a round is due and ours, at
        ``interval`` (this call only).  ``one_off``: a question of its own, not a wait's -
        asked at once unless that would break the floor (somebody polls, or asked less
        than the floor ago); never waits (the ids go into the poll's next round).
        """
        chosen = self.chosen(interval)
        since = time.time() - self.gap(chosen)
        with self._lock:
            if self.board is None:
                if self.due(chosen):
                    self._round(job_ids, chosen)
                return self._fresh(job_ids, since)
            return self._ask_shared(job_ids, since, chosen, one_off)

    def next_answers(
        self, job_ids: List[str], interval: Optional[float] = None
    ) -> Dict[str, Observation]:
        """``ask(one_off=True)``, and for the ids still unanswered, the next round the
        floor allows: waited for (another process's, else our own).  For ids nothing is
        known of, which have no state to answer with."""
        chosen = self.chosen(interval)
        since = time.time() - self.gap(chosen)
        found = self.ask(job_ids, one_off=True, interval=interval)
        if self.board is not None and len(found) < len(set(job_ids)):
            found = self._wait_for_answers(job_ids, found, since, chosen)
        return found

    def _ask_shared(
        self, job_ids: List[str], since: float, chosen: float, one_off: bool = False
    ) -> Dict[str, Observation]:
        """One look at the shared poll: a round of our own when it is ours and due (a
        ``one_off`` question: unless somebody polls or asked less than the floor ago)."""
        assert self.board is not None
        now = time.time()
        until = now + WANT_INTERVALS * self.gap(chosen)
        others, least = self.board.wanted(self.target, now)
        # As often as the most eager waiter wants, never more, nor under our floor.
        interval = max(min(chosen, least), self.floor)
        lease = now + LEASE_INTERVALS * self.gap(interval) + self._duration
        due = one_off or self.due(interval)
        pace = self.floor if one_off else self.gap(interval)
        self._waiting = self._waiting or not one_off
        if due and self.board.take(self.target, self.owner, now, lease, pace):
            if self._waiting:
                # Ours for the rounds of whoever holds the poll after us; a one-off
                # question that takes the round wants nothing more (it releases now).
                self.board.want(self.target, job_ids, self.owner, until, chosen)
            answers = self._round(list(dict.fromkeys([*job_ids, *others])), chosen)
            lease = time.time() + LEASE_INTERVALS * self.gap(interval) + self._duration
            # A one-off question polls no more: nobody waits for a round of ours.
            hold = self._waiting
            self.board.publish(
                self.target, self.owner, _answers(answers), time.time(), lease, hold, SLOW_CAP
            )
        else:
            # The holder's next round asks for ours too.
            self.board.want(self.target, job_ids, self.owner, until, chosen)
            newest = min((self._latest_at.get(i, -math.inf) for i in job_ids), default=since)
            published = self.board.answers(self.target, job_ids, max(since, newest))
            for job_id, (answer, at) in published.items():
                if at > self._latest_at.get(job_id, -math.inf):
                    self._latest[job_id], self._latest_at[job_id] = _observation(answer), at
        return self._fresh(job_ids, since)

    def _wait_for_answers(
        self, job_ids: List[str], found: Dict[str, Observation], since: float, chosen: float
    ) -> Dict[str, Observation]:
        """Wait (without the lock) for the next round of another process, then ask."""
        assert self.board is not None
        holder = self.board.holder(self.target, time.time())
        last = holder[1] if holder else time.time()
        deadline = Deadline(max(last + self.gap(chosen) - time.time(), 0.0) + NEXT_ROUND_SLACK)
        while len(found) < len(set(job_ids)) and not deadline.expired:
            deadline.sleep(0.2)
            with self._lock:
                found = self._ask_shared(job_ids, since, chosen, one_off=True)
        missing = [job_id for job_id in dict.fromkeys(job_ids) if job_id not in found]
        with self._lock:
            if missing:  # nobody answered in time: ask ourselves, once
                self._round(missing, chosen)
            return self._fresh(job_ids, since)

    def _fresh(self, job_ids: Sequence[str], since: float) -> Dict[str, Observation]:
        return {
            job_id: self._latest[job_id]
            for job_id in job_ids
            if self._latest_at.get(job_id, -math.inf) >= since
        }

    def _round(self, job_ids: List[str], chosen: Optional[float] = None) -> Dict[str, Observation]:
        started = time.monotonic()
        answers = self.query(job_ids)
        if not all(seen.out_of_reach for seen in answers.values()):
            # The scheduler's answer time; a failure's time says nothing of its load.
            self._duration = time.monotonic() - started
        self._last_round = time.monotonic()
        at = time.time()
        when = datetime.fromtimestamp(at, tz=timezone.utc)  # each status's as_of
        stamped = {job_id: seen.stamped(at, when) for job_id, seen in answers.items()}
        self._latest.update(stamped)
        self._latest_at.update(dict.fromkeys(stamped, at))
        if self._duration * SLOW_FACTOR > self.chosen(chosen):
            log.info(
                "the scheduler took %.1f s to answer: asked again in %.0f s at the soonest",
                self._duration,
                self.gap(chosen),
            )
        return stamped

    def forget(self, job_ids: Sequence[str]) -> None:
        """The answers about these jobs predate a cancel: ask the scheduler afresh."""
        with self._lock:
            for job_id in job_ids:
                self._latest.pop(job_id, None)
                self._latest_at.pop(job_id, None)
            self._last_round = -float("inf")
            if self.board is not None:
                self.board.forget(self.target, job_ids)

    def release(self) -> None:
        """Hand the poll on (the next process to ask takes it) and forget our wants."""
        if self.board is not None:
            with self._lock:
                self._waiting = False
                self.board.release(self.target, self.owner)


def _answers(observed: Mapping[str, Observation]) -> Dict[str, Answer]:
    """A round's observations as the store keeps them."""
    return {job_id: (o.status, o.answered_at, o.reach.value) for job_id, o in observed.items()}


def _observation(answer: Answer) -> Observation:
    """A published answer as this process's own."""
    status, answered_at, reach = answer
    return Observation(status, Source.SCHEDULER, answered_at, Reach(reach))
