"""Named packs in the job store (``wait NAME`` goes on after their client died): ``packs``,
``pack_allocations`` and ``pack_tasks`` - ``waiting``, ``sending`` (under ``token``: looked
up by its key), ``sent``, ``ended`` (``final``); ``again`` once sent again after a loss;
``job_id`` the task's last job (of a waiting task: one lost with its allocation)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..model import INSTANCE_GONE, JobStatus
from .jobs import now_text
from .leases import Book, feeder_alive, me
from .records import status_from_json, status_json

#: a task's places (see the module docstring)
WAITING, SENDING, SENT, ENDED = "waiting", "sending", "sent", "ended"

#: the SQL condition on ``hpc_jobs`` of a job no named pack holds (``jobs`` shows a
#: pack as one line of counts)
OUTSIDE_PACKS = (
    "NOT EXISTS (SELECT 1 FROM pack_tasks p WHERE p.job_id = hpc_jobs.job_id "
    "AND hpc_jobs.scheduler = 'flux')"
)


@dataclass(frozen=True)
class PackRecord:
    name: str
    spec: str
    scheduler: str
    transport: str
    host: str
    flux_uri: Optional[str]
    reach: Optional[str]
    resources: Mapping[str, Any]
    flux_command: str
    margin: float
    total: int
    created: str
    feeder: str = ""
    beat: float = 0.0


@dataclass(frozen=True)
class PackAllocation:
    job_id: str
    asked: float
    renewed: bool
    released: bool


@dataclass(frozen=True)
class PackTask:
    index: int
    script: str
    arguments: Tuple[str, ...]
    environment: Mapping[str, str]
    state: str = WAITING
    allocation: Optional[str] = None
    token: Optional[str] = None
    made: Optional[str] = None
    job_id: Optional[str] = None
    final: Optional[JobStatus] = None
    again: bool = False


#: a named pack's sent tasks and their allocations, for ``holders`` (then the ids' marks)
_HOLDERS = (
    "SELECT t.job_id, t.pack, t.allocation, a.released FROM pack_tasks t "
    "JOIN pack_allocations a ON a.pack = t.pack AND a.job_id = t.allocation "
    "WHERE t.state = 'sent' AND t.job_id IN "
)

_TASK_COLUMNS = (
    "idx, script, arguments, environment, state, allocation, token, made, job_id, final, again"
)


class PackBook(Book):
    """The packs of one job store (the same database file, tables of their own)."""

    TABLE = "packs"
    SCHEMA = """
    CREATE TABLE IF NOT EXISTS packs (
        name          TEXT PRIMARY KEY,
        spec          TEXT NOT NULL,
        scheduler     TEXT NOT NULL,
        transport     TEXT NOT NULL,
        host          TEXT NOT NULL,
        flux_uri      TEXT,
        reach         TEXT,
        resources     TEXT NOT NULL,
        flux_command  TEXT NOT NULL,
        margin        REAL NOT NULL,
        total         INTEGER NOT NULL,
        created       TEXT NOT NULL,
        feeder        TEXT NOT NULL DEFAULT '',
        beat          REAL NOT NULL DEFAULT 0,
        cancelled     TEXT
    );
    CREATE TABLE IF NOT EXISTS pack_allocations (
        pack      TEXT NOT NULL,
        job_id    TEXT NOT NULL,
        asked     REAL NOT NULL,
        renewed   INTEGER NOT NULL DEFAULT 0,
        released  INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (pack, job_id)
    );
    CREATE TABLE IF NOT EXISTS pack_tasks (
        pack        TEXT NOT NULL,
        idx         INTEGER NOT NULL,
        script      TEXT NOT NULL,
        arguments   TEXT NOT NULL,
        environment TEXT NOT NULL,
        state       TEXT NOT NULL DEFAULT 'waiting',
        allocation  TEXT,
        token       TEXT,
        made        TEXT,
        job_id      TEXT,
        final       TEXT,
        again       INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (pack, idx)
    );
    """

    # -- writes ---------------------------------------------------------

    def create(self, pack: PackRecord, tasks: Sequence[PackTask]) -> None:
        """Record a new pack and its tasks in one transaction, fed by this process; a
        name already used raises ``ValueError``."""
        row = dict(vars(pack), resources=json.dumps(dict(pack.resources)), feeder=me())
        row.update(created=pack.created or now_text(), beat=time.time())
        self._create(
            row,
            "INSERT INTO pack_tasks (pack, idx, script, arguments, environment) "
            "VALUES (?, ?, ?, ?, ?)",
            [
                (
                    pack.name,
                    task.index,
                    task.script,
                    json.dumps(list(task.arguments)),
                    json.dumps(dict(task.environment)),
                )
                for task in tasks
            ],
        )

    def asked(self, name: str, job_id: str, when: float) -> None:
        self._setup().write_many(
            "INSERT INTO pack_allocations (pack, job_id, asked) VALUES (?, ?, ?)",
            [(name, job_id, when)],
        )

    def renewed(self, name: str, job_id: str) -> None:
        self._setup().write_many(
            "UPDATE pack_allocations SET renewed = 1 WHERE pack = ? AND job_id = ?",
            [(name, job_id)],
        )

    def released(self, name: str, job_ids: Sequence[str]) -> None:
        self._setup().write_many(
            "UPDATE pack_allocations SET released = 1 WHERE pack = ? AND job_id = ?",
            [(name, job_id) for job_id in job_ids],
        )

    def sending(
        self, name: str, indexes: Sequence[int], allocation: str, token: str, made: str
    ) -> None:
        self._setup().write_many(
            "UPDATE pack_tasks SET state = ?, allocation = ?, token = ?, made = ? "
            "WHERE pack = ? AND idx = ?",
            [(SENDING, allocation, token, made, name, index) for index in indexes],
        )

    def sent(self, name: str, job_ids: Mapping[int, str]) -> None:
        self._setup().write_many(
            "UPDATE pack_tasks SET state = ?, job_id = ? WHERE pack = ? AND idx = ?",
            [(SENT, job_id, name, index) for index, job_id in job_ids.items()],
        )

    def waiting(self, name: str, indexes: Sequence[int], again: bool = False) -> None:
        """Back to unsent (surely not in any instance, or lost with its allocation); the
        id of a job lost so is kept (its record stays the pack's, not one of its own)."""
        self._setup().write_many(
            "UPDATE pack_tasks SET state = ?, allocation = NULL, token = NULL, made = NULL, "
            "again = MAX(again, ?) WHERE pack = ? AND idx = ?",
            [(WAITING, int(again), name, index) for index in indexes],
        )

    def ended(self, name: str, finals: Mapping[int, JobStatus]) -> None:
        self._setup().write_many(
            "UPDATE pack_tasks SET state = ?, final = ? WHERE pack = ? AND idx = ?",
            [(ENDED, status_json(status), name, index) for index, status in finals.items()],
        )

    def cancel(self, name: str) -> None:
        """The pack is cancelled, whoever feeds it (its feeder sees it and stops)."""
        self._setup().write_many(
            "UPDATE packs SET cancelled = ? WHERE name = ? AND cancelled IS NULL",
            [(me(), name)],
        )

    # -- reads ----------------------------------------------------------

    def cancelled_by(self, name: str) -> Optional[str]:
        rows = self._setup().query("SELECT cancelled FROM packs WHERE name = ?", (name,))
        return str(rows[0][0]) if rows and rows[0][0] else None

    def get(self, name: str) -> Optional[PackRecord]:
        row = self._get(name, PackRecord)
        return PackRecord(**dict(row, resources=json.loads(row["resources"]))) if row else None

    def counts(self, name: str) -> Dict[str, int]:
        """How many tasks are where: ``waiting`` (``sending`` counted there), each sent
        one by its job's last recorded state (``RUNNING``...; ``lost`` when its instance
        went before it was seen to end: a resumed pack sends it again), and each ended
        one by its final state (``COMPLETED``...)."""
        counts: Dict[str, int] = {}
        rows = self._setup().query(
            "SELECT t.state, t.final, j.state, j.native_state FROM pack_tasks t "
            "JOIN packs p ON p.name = t.pack LEFT JOIN hpc_jobs j ON j.job_id = t.job_id "
            "AND j.scheduler = 'flux' AND j.host = p.host WHERE t.pack = ?",
            (name,),
        )
        for state, final, job_state, native in rows:
            key = json.loads(final)["state"] if state == ENDED and final else str(state)
            if state == SENT and job_state:
                key = "lost" if native == INSTANCE_GONE and job_state == "CANCELLED" else job_state
            key = WAITING if key == SENDING else key
            counts[key] = counts.get(key, 0) + 1
        return counts

    def state(self, name: str) -> str:
        """``feeding`` (its client lives), ``cancelled``, ``done`` (every task ended), else
        ``interrupted`` (``wait NAME`` goes on with it)."""
        rows = self._setup().query(
            "SELECT feeder, beat, cancelled, (SELECT COUNT(*) FROM pack_tasks t WHERE "
            "t.pack = packs.name AND t.state != 'ended') FROM packs WHERE name = ?",
            (name,),
        )
        if not rows:
            raise KeyError(name)
        feeder, beat, cancelled, unended = rows[0]
        if cancelled:
            return "cancelled"
        if not unended:
            return "done"
        return "feeding" if feeder_alive(str(feeder), float(beat), time.time()) else "interrupted"

    def allocations(self, name: str) -> List[PackAllocation]:
        rows = self._setup().query(
            "SELECT job_id, asked, renewed, released FROM pack_allocations WHERE pack = ? "
            "ORDER BY asked",
            (name,),
        )
        return [PackAllocation(str(j), float(a), bool(r), bool(x)) for j, a, r, x in rows]

    def holders(self, job_ids: Sequence[str]) -> List[Tuple[str, str, str, bool]]:
        """Of these Flux job ids, those a named pack has sent and not seen end: (job id,
        pack, allocation, whether that allocation was released)."""
        found: List[Tuple[str, str, str, bool]] = []
        unique = list(dict.fromkeys(job_ids))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ", ".join("?" * len(chunk))  # placeholders only: every value a parameter
            rows = self._setup().query(_HOLDERS + f"({marks})", tuple(chunk))
            found.extend((str(j), str(p), str(a), bool(r)) for j, p, a, r in rows)
        return found

    def task_allocations(self) -> Dict[Tuple[str, str, str], Tuple[str, str, str]]:
        """Each recorded pack task's job -> the allocation it ran in, both as the job store
        keys them (scheduler, host, job id): ``cost`` counts the allocation, the task under it."""
        rows = self._setup().query(
            "SELECT p.scheduler, p.host, t.job_id, t.allocation FROM pack_tasks t "
            "JOIN packs p ON p.name = t.pack "
            "WHERE t.job_id IS NOT NULL AND t.allocation IS NOT NULL"
        )
        return {
            ("flux", str(host), str(job_id)): (str(scheduler), str(host), str(allocation))
            for scheduler, host, job_id, allocation in rows
        }

    def tasks(self, name: str) -> List[PackTask]:
        rows = self._setup().query(
            f"SELECT {_TASK_COLUMNS} FROM pack_tasks WHERE pack = ? ORDER BY idx",  # noqa: S608
            (name,),
        )
        return [_task(row) for row in rows]


def _task(row: Sequence[Any]) -> PackTask:
    index, script, arguments, environment, state, allocation, token, made, job_id, final, again = (
        row
    )
    return PackTask(
        int(index),
        str(script),
        tuple(json.loads(arguments)),
        dict(json.loads(environment)),
        str(state),
        allocation,
        token,
        made,
        job_id,
        status_from_json(final) if final else None,
        bool(again),
    )
