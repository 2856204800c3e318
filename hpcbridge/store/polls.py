"""The shared poll's tables in the job store, for each scheduler instance asked
(``target``): who polls it (``poll_lease``, a ``Lease``), which ids each process waits on
(``poll_wants``), each round's answers (``poll_rounds``: one row, one JSON object) and
the ids answered final (``poll_finals``: one row each, so that choosing what to ask reads
no round)."""

from __future__ import annotations

import json
import math
import operator
from json.encoder import encode_basestring_ascii as _quoted
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..model import JobStatus
from .jobs import JobStore
from .leases import Lease
from .records import PLAIN, status_from_values, status_values

#: one answer of a round: the status, when the scheduler gave it (epoch seconds), and
#: whether it could be asked (the engine's ``Reach``, by its value)
Answer = Tuple[JobStatus, Optional[float], str]

#: a published round is kept at least this long (more for a waiter of a longer interval)
ROUNDS_KEPT_FOR = 120.0

# poll_lease, poll_wants and poll_rounds are as the previous release made them (its
# processes still share the poll); poll_rounds.finals is written for those alone.
SCHEMA = """
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
CREATE TABLE IF NOT EXISTS poll_finals (
    target TEXT NOT NULL, job_id TEXT NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (target, job_id)
);
"""

#: the poll's lease: its holder polls until ``until``, unless its process is gone
LEASE = Lease("poll_lease", "target", "owner", "until")


def encode_round(answers: Mapping[str, Answer]) -> str:
    """A round's answers as one JSON object, ``{job_id: [the status's values
    (``records.STATUS_FIELDS``), answered_at, reach]}``."""
    # A round's jobs mostly share all but their ids (and extra, a task's raw id): each
    # distinct rest is encoded once, each job's own parts joined to it.  Their times are
    # the same objects (a parsed row's, the round's): keyed by identity, each object
    # alive until the end (equal times apart encode apart, zone and all).
    encoded: Dict[Tuple[Any, ...], Tuple[str, str]] = {}
    parts = []
    for job_id, (status, at, reach) in answers.items():
        key = (*_SHARED(status), *map(id, _TIMES(status)), at, reach)
        around = encoded.get(key)
        if around is None:
            values = status_values(status)
            head = json.dumps(values[:6])[:-1]  # '[state, ..., reason' (extra follows)
            tail = json.dumps([*values[7:], at, reach])[1:]  # 'as_of, at, reach]'
            around = encoded[key] = (f"{head}, ", f", {tail}")
        extra = status.extra
        plain = _plain_json(extra) if extra else "{}"
        parts.append(f"{_quoted(job_id)}: {around[0]}{plain}{around[1]}")
    return "{" + ", ".join(parts) + "}"


#: the values of a status a round's jobs share, and its times
_SHARED = operator.attrgetter("state", "exit_code", "native_state", "reason")
_TIMES = operator.attrgetter("start_time", "end_time", "as_of")


def _plain_json(extra: Mapping[str, Any]) -> str:
    """``status_values``'s ``extra`` as JSON: its strings quoted directly (a task's raw id)."""
    parts = []
    for key, value in extra.items():
        if type(key) is not str or type(value) is not str:
            return json.dumps({k: v for k, v in extra.items() if isinstance(v, PLAIN)})
        parts.append(f"{_quoted(key)}: {_quoted(value)}")
    return "{" + ", ".join(parts) + "}"


def decode_round(text: str, job_ids: Optional[Iterable[str]] = None) -> Dict[str, Answer]:
    """The answers of ``encode_round`` (``job_ids``: only theirs, the others not built)."""
    entries: Dict[str, List[Any]] = json.loads(text)
    wanted = entries if job_ids is None else [i for i in dict.fromkeys(job_ids) if i in entries]
    return {
        job_id: (status_from_values(job_id, entries[job_id][:-2]), *entries[job_id][-2:])
        for job_id in wanted
    }


class PollBoard:
    """The poll tables in one job store: who polls, what is wanted, what was answered."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self._ready = False

    def _setup(self) -> JobStore:
        if not self._ready:
            self.store.run_script(SCHEMA)
            self._ready = True
        return self.store

    def want(
        self, target: str, job_ids: Sequence[str], owner: str, until: float, interval: float
    ) -> None:
        """``owner`` waits on these ids, asking at ``interval``, until ``until``."""
        rows = [(target, job_id, owner, until, interval) for job_id in job_ids]
        self._setup().write_many("INSERT OR REPLACE INTO poll_wants VALUES (?, ?, ?, ?, ?)", rows)

    def take(
        self, target: str, owner: str, now: float, until: float, pace: Optional[float]
    ) -> bool:
        """Hold the poll of ``target`` until ``until``, unless another live process holds
        it, or (with ``pace``) somebody asked the scheduler less than ``pace`` ago."""

        def claim(connection: Any) -> bool:
            connection.execute(
                "INSERT OR IGNORE INTO poll_lease (target, owner, until) VALUES (?, '', 0)",
                (target,),
            )
            if LEASE.other(connection, target, owner, now) is not None:
                return False
            (last,) = connection.execute(
                "SELECT last_round FROM poll_lease WHERE target = ?", (target,)
            ).fetchone()
            if pace is not None and last is not None and now - float(last) < pace:
                return False
            LEASE.claim(connection, target, owner, until)
            return True

        return bool(self._setup().transaction(claim))

    def holder(self, target: str, now: float) -> Optional[Tuple[str, float]]:
        """The live process holding the poll, and when it last asked; ``None``: nobody."""
        rows = self._setup().query(
            "SELECT owner, until, last_round FROM poll_lease WHERE target = ?", (target,)
        )
        if not rows or not LEASE.held(str(rows[0][0]), float(rows[0][1]), now):
            return None
        return str(rows[0][0]), float(rows[0][2] or 0.0)

    def wanted(self, target: str, now: float) -> Tuple[List[str], float]:
        """Every id still waited on and not answered final, and the shortest interval
        asked (``inf``: nobody waits)."""
        rows = self._setup().query(
            "SELECT job_id, interval, EXISTS (SELECT 1 FROM poll_finals f "
            "WHERE f.target = w.target AND f.job_id = w.job_id) "
            "FROM poll_wants w WHERE target = ? AND until >= ?",
            (target, now),
        )
        if not rows:
            return [], math.inf
        least = min(float(row[1]) for row in rows)
        return list(dict.fromkeys(row[0] for row in rows if not row[2])), least

    def publish(
        self,
        target: str,
        owner: str,
        answers: Mapping[str, Answer],
        at: float,
        until: float,
        hold: bool = True,
        slack: float = 0.0,
    ) -> None:
        """The answers of one round (one row), its final ones, and the lease renewed
        with it (not ``hold``: given up, as ``release`` does); rounds no waiter can still
        take (``slack``: how long after its interval a waiter still takes one) dropped."""
        answered = encode_round(answers)
        finals = [job_id for job_id, (status, _, _) in answers.items() if status.is_terminal]

        def write(connection: Any) -> None:
            connection.execute(
                "INSERT INTO poll_rounds VALUES (?, ?, ?, ?)",
                (target, at, answered, json.dumps(finals)),
            )
            connection.executemany(
                "INSERT OR REPLACE INTO poll_finals VALUES (?, ?, ?)",
                [(target, job_id, at) for job_id in finals],
            )
            LEASE.renew(connection, target, owner, until)
            connection.execute(
                "UPDATE poll_lease SET last_round = ? WHERE target = ? AND owner = ?",
                (at, target, owner),
            )
            if not hold:
                _give_up(connection, target, owner)
            (longest,) = connection.execute(
                "SELECT MAX(interval) FROM poll_wants WHERE target = ? AND until >= ?",
                (target, at),
            ).fetchone()
            oldest = at - max(ROUNDS_KEPT_FOR, float(longest or 0.0) + slack)
            for table in ("poll_rounds", "poll_finals"):
                connection.execute(
                    f"DELETE FROM {table} WHERE target = ? AND at < ?",  # noqa: S608
                    (target, oldest),
                )

        self._setup().transaction(write)

    def answers(
        self, target: str, job_ids: Sequence[str], since: float
    ) -> Dict[str, Tuple[Answer, float]]:
        """The newest published answer for each of these ids given after ``since``
        (at ``since`` too), with its time: the newest rounds read first, only as far
        back as an id is still unanswered."""
        rows = self._setup().query(
            "SELECT at, answers FROM poll_rounds WHERE target = ? AND at >= ? ORDER BY at DESC",
            (target, since),
        )
        found: Dict[str, Tuple[Answer, float]] = {}
        missing = list(dict.fromkeys(job_ids))
        for at, answered in rows:
            if not missing:
                break
            for job_id, answer in decode_round(answered, missing).items():
                found[job_id] = (answer, float(at))
            missing = [job_id for job_id in missing if job_id not in found]
        return found

    def forget(self, target: str, job_ids: Sequence[str]) -> None:
        """Drop these jobs' answers (they predate a cancel); the next round comes at once."""
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
            connection.executemany(
                "DELETE FROM poll_finals WHERE target = ? AND job_id = ?",
                [(target, job_id) for job_id in dropped],
            )
            connection.execute(
                "UPDATE poll_lease SET last_round = NULL WHERE target = ?", (target,)
            )

        self._setup().transaction(drop)

    def release(self, target: str, owner: str) -> None:
        """Give the poll up and forget what this owner wanted."""
        self._setup().transaction(lambda connection: _give_up(connection, target, owner))


def _give_up(connection: Any, target: str, owner: str) -> None:
    """``owner`` holds the poll no more, and wants nothing."""
    # The row stays: its last round keeps the pace for the next poller.
    LEASE.let_go(connection, target, owner, stamp=0.0)
    connection.execute("DELETE FROM poll_wants WHERE target = ? AND owner = ?", (target, owner))
