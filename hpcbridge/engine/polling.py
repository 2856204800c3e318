"""Asking the scheduler at a polite rate - one round for every process of this user here.

Every process asking about one scheduler instance (``target``) writes the ids it wants
into the store's poll tables (``PollBoard``); the one holding the poll (a lease renewed
each round) asks about all of them and publishes the answers; the others read them.
Rounds are ``interval`` apart, more after a slow answer (``SLOW_FACTOR``, ``SLOW_CAP``).
A driver woken by events gets a ``Poller`` without a board: it only keeps the rate.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import threading
import time
import uuid
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..model import JobState, JobStatus
from ..processes import alive_here
from ..retrying import Deadline
from ..store.jobs import JobStore
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
#: a published round is kept at least this long (more for a waiter of a longer interval)
ROUNDS_KEPT_FOR = 120.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS poll_lease (
    target TEXT PRIMARY KEY, owner TEXT NOT NULL, until REAL NOT NULL,
    last_round REAL, duration REAL
);
CREATE TABLE IF NOT EXISTS poll_wants (
    target TEXT NOT NULL, job_id TEXT NOT NULL, owner TEXT NOT NULL, until REAL NOT NULL,
    interval REAL NOT NULL, PRIMARY KEY (target, job_id, owner)
);
CREATE TABLE IF NOT EXISTS poll_rounds (
    target TEXT NOT NULL, at REAL NOT NULL, answers TEXT NOT NULL, finals TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS poll_rounds_at ON poll_rounds (target, at);
"""


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


def alive(owner: str) -> bool:
    """Whether the process named by ``owner`` still runs (always assumed on another host:
    its lease runs out instead)."""
    host, _, rest = owner.partition(":")
    return alive_here(host, rest.partition(":")[0]) is not False


def encode_round(answers: Dict[str, Observation]) -> str:
    """A round's answers as one JSON object, ``{job_id: [state, exit_code, start, end,
    native_state, reason, extra (its JSON-able part), as_of, answered_at, reach]}``."""
    return json.dumps({job_id: _entry(seen) for job_id, seen in answers.items()})


def _entry(seen: Observation) -> List[Any]:
    status = seen.status
    extra = {key: v for key, v in status.extra.items() if isinstance(v, _PLAIN)}
    return [
        status.state.value,
        status.exit_code,
        _iso(status.start_time),
        _iso(status.end_time),
        status.native_state,
        status.reason,
        extra,
        _iso(status.as_of),
        seen.answered_at,
        seen.reach.value,
    ]


#: the values of ``extra`` an answer keeps
_PLAIN = (str, int, float, bool)


def decode_round(text: str, job_ids: Optional[Iterable[str]] = None) -> Dict[str, Observation]:
    """The answers of ``encode_round`` (``job_ids``: only theirs, the others not built)."""
    entries: Dict[str, List[Any]] = json.loads(text)
    wanted = entries if job_ids is None else [i for i in dict.fromkeys(job_ids) if i in entries]
    return {job_id: _observation(job_id, entries[job_id]) for job_id in wanted}


def _observation(job_id: str, entry: List[Any]) -> Observation:
    state, exit_code, start, end, native_state, reason, extra, as_of, at, reach = entry
    status = JobStatus(
        job_id=job_id,
        state=JobState(state),
        exit_code=exit_code,
        start_time=_moment(start),
        end_time=_moment(end),
        native_state=native_state,
        reason=reason,
        extra=extra,
        as_of=_moment(as_of),
    )
    return Observation(status, Source.SCHEDULER, at, Reach(reach))


def _iso(moment: Optional[datetime]) -> Optional[str]:
    return moment.isoformat() if moment is not None else None


def _moment(text: Optional[str]) -> Optional[datetime]:
    return datetime.fromisoformat(text) if text else None


class PollBoard:
    """The poll tables in the job store: who polls, what is wanted, what was answered."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self._ready = False

    def _ensure(self) -> None:
        if not self._ready:
            self.store.run_script(_SCHEMA)
            self._ready = True

    def want(
        self, target: str, job_ids: Sequence[str], owner: str, until: float, interval: float
    ) -> None:
        """``owner`` waits on these ids, asking at ``interval``, until ``until``."""
        self._ensure()
        rows = [(target, job_id, owner, until, interval) for job_id in job_ids]
        self.store.write_many("INSERT OR REPLACE INTO poll_wants VALUES (?, ?, ?, ?, ?)", rows)

    def take(
        self, target: str, owner: str, now: float, until: float, pace: Optional[float]
    ) -> bool:
        """Hold the poll of ``target`` until ``until``, unless another live process holds
        it, or (with ``pace``) somebody asked the scheduler less than ``pace`` ago."""
        self._ensure()

        def claim(connection: Any) -> bool:
            row = connection.execute(
                "SELECT owner, until, last_round FROM poll_lease WHERE target = ?", (target,)
            ).fetchone()
            if row is not None and row[0] not in ("", owner) and row[1] > now and alive(row[0]):
                return False
            recent = row is not None and row[2] is not None and now - float(row[2]) < (pace or 0)
            if pace is not None and recent:
                return False
            connection.execute(
                "INSERT INTO poll_lease (target, owner, until) VALUES (?, ?, ?) "
                "ON CONFLICT (target) DO UPDATE SET owner = excluded.owner, until = excluded.until",
                (target, owner, until),
            )
            return True

        return bool(self.store.transaction(claim))

    def holder(self, target: str, now: float) -> Optional[Tuple[str, float]]:
        """The live process holding the poll, and when it last asked; ``None``: nobody."""
        self._ensure()
        rows = self.store.query(
            "SELECT owner, until, last_round FROM poll_lease WHERE target = ?", (target,)
        )
        if not rows or not rows[0][0] or rows[0][1] <= now or not alive(rows[0][0]):
            return None
        return str(rows[0][0]), float(rows[0][2] or 0.0)

    def wanted(self, target: str, now: float) -> Tuple[List[str], float]:
        """Every id still waited on and not answered final, and the shortest interval
        asked (``inf``: nobody waits)."""
        self._ensure()
        rows = self.store.query(
            "SELECT job_id, interval FROM poll_wants WHERE target = ? AND until >= ?",
            (target, now),
        )
        if not rows:
            return [], math.inf
        ended = self._finals(target)
        least = min(float(row[1]) for row in rows)
        return list(dict.fromkeys(row[0] for row in rows if row[0] not in ended)), least

    def _finals(self, target: str) -> set[str]:
        """The ids answered final in the rounds kept."""
        ended: set[str] = set()
        for (finals,) in self.store.query(
            "SELECT finals FROM poll_rounds WHERE target = ?", (target,)
        ):
            ended.update(json.loads(finals))
        return ended

    def publish(
        self,
        target: str,
        owner: str,
        answers: Dict[str, Observation],
        at: float,
        until: float,
        hold: bool = True,
    ) -> None:
        """The answers of one round (one row), and the lease renewed with it (not
        ``hold``: given up, as ``release`` does); rounds no waiter can still take are
        dropped."""
        self._ensure()
        answered = encode_round(answers)
        finals = json.dumps([job_id for job_id, seen in answers.items() if seen.status.is_terminal])

        def write(connection: Any) -> None:
            connection.execute(
                "INSERT INTO poll_rounds VALUES (?, ?, ?, ?)", (target, at, answered, finals)
            )
            connection.execute(
                "UPDATE poll_lease SET until = ?, last_round = ? WHERE target = ? AND owner = ?",
                (until, at, target, owner),
            )
            if not hold:
                _give_up(connection, target, owner)
            longest = connection.execute(
                "SELECT MAX(interval) FROM poll_wants WHERE target = ? AND until >= ?",
                (target, at),
            ).fetchone()[0]
            # A waiter takes answers no older than its gap: its interval, or SLOW_CAP more.
            kept = max(ROUNDS_KEPT_FOR, float(longest or 0.0) + SLOW_CAP)
            connection.execute(
                "DELETE FROM poll_rounds WHERE target = ? AND at < ?", (target, at - kept)
            )

        self.store.transaction(write)

    def answers(
        self, target: str, job_ids: Sequence[str], since: float
    ) -> Dict[str, Tuple[Observation, float]]:
        """The newest published answer for each of these ids given after ``since``
        (at ``since`` too), with its time: the newest rounds read first, only as far
        back as an id is still unanswered."""
        self._ensure()
        rows = self.store.query(
            "SELECT at, answers FROM poll_rounds WHERE target = ? AND at >= ? ORDER BY at DESC",
            (target, since),
        )
        found: Dict[str, Tuple[Observation, float]] = {}
        missing = list(dict.fromkeys(job_ids))
        for at, answered in rows:
            if not missing:
                break
            for job_id, seen in decode_round(answered, missing).items():
                found[job_id] = (seen, float(at))
            missing = [job_id for job_id in missing if job_id not in found]
        return found

    def forget(self, target: str, job_ids: Sequence[str]) -> None:
        """Drop these jobs' answers (they predate a cancel); the next round comes at once."""
        self._ensure()
        dropped = set(job_ids)

        def drop(connection: Any) -> None:
            rows = connection.execute(
                "SELECT rowid, answers, finals FROM poll_rounds WHERE target = ?", (target,)
            ).fetchall()
            for rowid, answered, finals in rows:
                entries = json.loads(answered)
                if dropped.isdisjoint(entries):
                    continue
                kept = {job_id: e for job_id, e in entries.items() if job_id not in dropped}
                ended = [job_id for job_id in json.loads(finals) if job_id not in dropped]
                connection.execute(
                    "UPDATE poll_rounds SET answers = ?, finals = ? WHERE rowid = ?",
                    (json.dumps(kept), json.dumps(ended), rowid),
                )
            connection.execute(
                "UPDATE poll_lease SET last_round = NULL WHERE target = ?", (target,)
            )

        self.store.transaction(drop)

    def release(self, target: str, owner: str) -> None:
        """Give the poll up and forget what this owner wanted."""
        self._ensure()

        self.store.transaction(lambda connection: _give_up(connection, target, owner))


def _give_up(connection: Any, target: str, owner: str) -> None:
    """``owner`` holds the poll no more, and wants nothing."""
    # The row stays: its last round keeps the pace for the next poller.
    connection.execute(
        "UPDATE poll_lease SET owner = '', until = 0 WHERE target = ? AND owner = ?",
        (target, owner),
    )
    connection.execute("DELETE FROM poll_wants WHERE target = ? AND owner = ?", (target, owner))


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
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
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
            self.board.publish(self.target, self.owner, answers, time.time(), lease, hold)
        else:
            # The holder's next round asks for ours too.
            self.board.want(self.target, job_ids, self.owner, until, chosen)
            newest = min((self._latest_at.get(i, -math.inf) for i in job_ids), default=since)
            published = self.board.answers(self.target, job_ids, max(since, newest))
            for job_id, (seen, at) in published.items():
                if at > self._latest_at.get(job_id, -math.inf):
                    self._latest[job_id], self._latest_at[job_id] = seen, at
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
        stamped = {}
        for job_id, seen in answers.items():
            stamped[job_id] = seen.stamped(at)
            self._latest[job_id] = stamped[job_id]
            self._latest_at[job_id] = at
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
