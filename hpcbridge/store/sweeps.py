"""Sweeps in the job store (another process goes on feeding one whose feeder died):
``sweeps`` (where, steps, cap, lease) and ``sweep_tasks`` - ``waiting``, ``sending`` (under
``token``: looked up by its key), ``sent`` (``job_id``) or ``cancelled`` (never: ``note``)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .jobs import now_text as now_text
from .leases import Book, me
from .records import COLUMNS, JobRecord, decode_row

#: a task's places (see the module docstring)
WAITING, SENDING, SENT, CANCELLED = "waiting", "sending", "sent", "cancelled"
#: a sweep's: still being fed, every task sent, given up
FEEDING, FED, GIVEN_UP = "feeding", "fed", "cancelled"


@dataclass(frozen=True)
class Step:
    """What the tasks of one ``add`` share: the resources as validated then (the
    settings' defaults in them; older sweeps: as the caller gave them), the
    scheduler's options as given (checked again on use), the outside parents."""

    resources: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    #: outside parents: ids of jobs not in the sweep
    depends_on: Tuple[str, ...] = ()


@dataclass
class SweepTask:
    index: int
    step: int
    script: str
    arguments: Tuple[str, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    #: indexes of the tasks of this sweep it runs after (each must have completed)
    after: Tuple[int, ...] = ()
    state: str = WAITING
    token: Optional[str] = None
    made: Optional[str] = None
    job_id: Optional[str] = None
    #: why a task was never sent (its parent failed, the scheduler refused it)
    note: Optional[str] = None


@dataclass
class SweepRecord:
    name: str
    scheduler: str
    transport: str
    host: str
    flux_uri: Optional[str]
    folder: str
    max_queued: Optional[int]
    steps: List[Step]
    total: int
    created: str
    state: str = FEEDING
    feeder: str = ""
    beat: float = 0.0
    #: JSON of the settings that reach its host again (as ``JobRecord.reach``)
    reach: Optional[str] = None


class NotAllWaiting(Exception):
    """Rolls ``mark_sending`` back."""


def steps_to_json(steps: Sequence[Step]) -> str:
    return json.dumps(
        [
            {"resources": dict(s.resources), "options": dict(s.options), "depends_on": s.depends_on}
            for s in steps
        ]
    )


def steps_from_json(text: str) -> List[Step]:
    return [
        Step(item["resources"], item["options"], tuple(item["depends_on"]))
        for item in json.loads(text)
    ]


TASK_COLUMNS = "idx, step, script, arguments, environment, after, state, token, made, job_id, note"


def task_from_row(row: Sequence[Any]) -> SweepTask:
    index, step, script, arguments, environment, after, *rest = row
    arguments, after = tuple(json.loads(arguments)), tuple(json.loads(after))
    return SweepTask(index, step, script, arguments, json.loads(environment), after, *rest)


#: a record of ``hpc_jobs`` that is no sweep's job (the listing's jobs outside sweeps)
OUTSIDE_SWEEPS = (
    "NOT EXISTS (SELECT 1 FROM sweep_tasks t JOIN sweeps s ON s.name = t.sweep "
    "WHERE t.job_id = hpc_jobs.job_id AND s.scheduler = hpc_jobs.scheduler "
    "AND s.host = hpc_jobs.host)"
)


class SweepBook(Book):
    """The sweeps of one job store (the same database file, tables of their own)."""

    TABLE = "sweeps"
    SCHEMA = """
    CREATE TABLE IF NOT EXISTS sweeps (
        name        TEXT PRIMARY KEY,
        scheduler   TEXT NOT NULL,
        transport   TEXT NOT NULL,
        host        TEXT NOT NULL,
        flux_uri    TEXT,
        folder      TEXT NOT NULL,
        max_queued  INTEGER,
        steps       TEXT NOT NULL,
        total       INTEGER NOT NULL,
        created     TEXT NOT NULL,
        state       TEXT NOT NULL DEFAULT 'feeding',
        feeder      TEXT NOT NULL DEFAULT '',
        beat        REAL NOT NULL DEFAULT 0,
        reach       TEXT
    );
    CREATE TABLE IF NOT EXISTS sweep_tasks (
        sweep       TEXT NOT NULL,
        idx         INTEGER NOT NULL,
        step        INTEGER NOT NULL,
        script      TEXT NOT NULL,
        arguments   TEXT NOT NULL,
        environment TEXT NOT NULL,
        after       TEXT NOT NULL,
        state       TEXT NOT NULL DEFAULT 'waiting',
        token       TEXT,
        made        TEXT,
        job_id      TEXT,
        note        TEXT,
        PRIMARY KEY (sweep, idx)
    );
    CREATE INDEX IF NOT EXISTS sweep_tasks_state ON sweep_tasks (sweep, state);
    CREATE INDEX IF NOT EXISTS sweep_tasks_job ON sweep_tasks (job_id);
    """
    LATER_COLUMNS = (("reach", "TEXT"),)

    # -- writes ---------------------------------------------------------

    def create(self, sweep: SweepRecord, tasks: Sequence[SweepTask]) -> None:
        """Record a new sweep and all its tasks in one transaction (taken by this process);
        a name already used raises ``ValueError``."""
        steps = steps_to_json(sweep.steps)
        row = dict(vars(sweep), steps=steps, state=FEEDING, feeder=me(), beat=time.time())
        self._create(
            row,
            "INSERT INTO sweep_tasks (sweep, idx, step, script, arguments, environment, "
            "after) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    sweep.name,
                    task.index,
                    task.step,
                    task.script,
                    json.dumps(list(task.arguments)),
                    json.dumps(dict(task.environment)),
                    json.dumps(list(task.after)),
                )
                for task in tasks
            ],
        )

    def release(self, name: str, state: Optional[str] = None) -> None:
        """Stop feeding (and say the sweep is ``fed``); a cancelled sweep stays so."""
        if state:
            self._setup().write_many(
                "UPDATE sweeps SET feeder = '', state = CASE WHEN state = ? THEN state ELSE ? "
                "END WHERE name = ? AND feeder IN ('', ?)",
                [(GIVEN_UP, state, name, me())],
            )
        else:
            self.let_go(name)

    def mark_sending(self, name: str, indexes: Sequence[int], token: str, made: str) -> bool:
        """Hand these waiting tasks to the scheduler under ``token``: all of them, or -
        when one is no longer waiting (the sweep was cancelled meanwhile) - none."""
        store = self._setup()

        def write(connection: Any) -> bool:
            changed = 0
            for index in indexes:
                cursor = connection.execute(
                    "UPDATE sweep_tasks SET state = ?, token = ?, made = ? "
                    "WHERE sweep = ? AND idx = ? AND state = ?",
                    (SENDING, token, made, name, index, WAITING),
                )
                changed += cursor.rowcount
            if changed != len(indexes):
                raise NotAllWaiting
            return True

        try:
            return store.transaction(write)
        except NotAllWaiting:
            return False

    def mark_sent(self, name: str, job_ids: Mapping[int, str]) -> None:
        self._setup().write_many(
            "UPDATE sweep_tasks SET state = ?, job_id = ? WHERE sweep = ? AND idx = ?",
            [(SENT, job_id, name, index) for index, job_id in job_ids.items()],
        )

    def mark_waiting(self, name: str, indexes: Sequence[int]) -> None:
        """Back to unsent: the scheduler surely has no job for them."""
        self._setup().write_many(
            "UPDATE sweep_tasks SET state = ?, token = NULL, made = NULL "
            "WHERE sweep = ? AND idx = ?",
            [(WAITING, name, index) for index in indexes],
        )

    def mark_never(self, name: str, notes: Mapping[int, str]) -> None:
        """These tasks will never be sent, and why."""
        self._setup().write_many(
            "UPDATE sweep_tasks SET state = ?, note = ? WHERE sweep = ? AND idx = ?",
            [(CANCELLED, note, name, index) for index, note in notes.items()],
        )

    def give_up(self, name: str, why: str) -> int:
        """The sweep is cancelled, whoever feeds it (its feeder sees it and stops):
        every task not sent yet will never be, noted ``why``; how many."""
        store = self._setup()

        def write(connection: Any) -> int:
            connection.execute("UPDATE sweeps SET state = ? WHERE name = ?", (GIVEN_UP, name))
            cursor = connection.execute(
                "UPDATE sweep_tasks SET state = ?, note = ? WHERE sweep = ? AND state = ?",
                (CANCELLED, why, name, WAITING),
            )
            return int(cursor.rowcount)

        return store.transaction(write)

    # -- reads ----------------------------------------------------------

    def get(self, name: str) -> Optional[SweepRecord]:
        row = self._get(name, SweepRecord)
        return SweepRecord(**dict(row, steps=steps_from_json(row["steps"]))) if row else None

    def tasks(self, name: str, state: Optional[str] = None) -> List[SweepTask]:
        query = f"SELECT {TASK_COLUMNS} FROM sweep_tasks WHERE sweep = ?"  # noqa: S608
        params: List[Any] = [name]
        if state:
            query += " AND state = ?"
            params.append(state)
        return [task_from_row(row) for row in self._setup().query(query + " ORDER BY idx", params)]

    def job_ids(self, name: str) -> List[str]:
        """The ids of the sweep's jobs sent so far, in task order."""
        rows = self._setup().query(
            "SELECT job_id FROM sweep_tasks WHERE sweep = ? AND state = ? ORDER BY idx",
            (name, SENT),
        )
        return [str(row[0]) for row in rows]

    def records(self, name: str, unfinished_only: bool = False) -> List[JobRecord]:
        """The job records of a sweep's sent tasks, in task order."""
        sweep = self.get(name)
        if sweep is None:
            return []
        where = " AND j.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT')"
        columns = ", ".join(f"j.{column}" for column in COLUMNS)
        # Only constant text is joined; every value is a parameter.
        query = (
            f"SELECT {columns} FROM sweep_tasks t JOIN hpc_jobs j ON j.job_id = t.job_id "  # noqa: S608
            "AND j.scheduler = ? AND j.host = ? WHERE t.sweep = ?"
            + (where if unfinished_only else "")
            + " ORDER BY t.idx"
        )
        rows = self._setup().query(query, (sweep.scheduler, sweep.host, name))
        return [decode_row(row) for row in rows]

    def counts(self, sweep: SweepRecord) -> Dict[str, int]:
        """How many tasks are where: ``waiting``/``sending``/``cancelled`` for the unsent,
        the last recorded state (``PENDING``, ``RUNNING``, ``COMPLETED``...) for the
        sent - one grouped query, no row loaded."""
        rows = self._setup().query(
            "SELECT t.state, j.state, COUNT(*) FROM sweep_tasks t LEFT JOIN hpc_jobs j "
            "ON j.job_id = t.job_id AND j.scheduler = ? AND j.host = ? "
            "WHERE t.sweep = ? GROUP BY t.state, j.state",
            (sweep.scheduler, sweep.host, sweep.name),
        )
        counts: Dict[str, int] = {}
        for place, job_state, count in rows:
            key = str(job_state or "PENDING") if place == SENT else str(place)
            counts[key] = counts.get(key, 0) + int(count)
        return counts
