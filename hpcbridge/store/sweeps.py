"""The sweeps in the job store: every task of a sweep, submitted or not yet.

A sweep is many jobs fed to the scheduler a few at a time (``max_queued``),
under a name, so that another process can go on feeding it when the first one
dies.  Two tables beside ``hpc_jobs``:

* ``sweeps``: one row per sweep - where its jobs go (scheduler, host, folder),
  its steps (the resources, options and outside parents each step's tasks
  share, as JSON), its cap, and which process feeds it (``feeder``, with a
  heartbeat: a dead or silent feeder's sweep can be taken over);
* ``sweep_tasks``: one row per task - its script, arguments, environment, the
  tasks of the same sweep it runs after, and where it is: ``waiting`` (not
  sent), ``sending`` (handed to the scheduler under ``token``: if the feeder
  died now, the job may or may not exist and is looked up by its key),
  ``sent`` (``job_id`` known, its record in ``hpc_jobs``), ``cancelled`` (never to be
  sent: refused, or the sweep was cancelled - ``note`` says which, and by whom).
"""

from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

from . import leases
from .jobs import COLUMNS, JobRecord, JobStore, add_missing_columns, decode_row
from .sweep_rows import (
    CANCELLED,
    FED,
    FEEDING,
    GIVEN_UP,
    OUTSIDE_SWEEPS,
    SCHEMA,
    SENDING,
    SENT,
    SILENT_AFTER,
    SWEEP_LATER_COLUMNS,
    TASK_COLUMNS,
    WAITING,
    NotAllWaiting,
    Step,
    SweepRecord,
    SweepTask,
    me,
    now_text,
    steps_from_json,
    steps_to_json,
    task_from_row,
)

__all__ = [
    "CANCELLED",
    "FED",
    "FEEDING",
    "GIVEN_UP",
    "OUTSIDE_SWEEPS",
    "SENDING",
    "SENT",
    "SILENT_AFTER",
    "WAITING",
    "Step",
    "SweepBook",
    "SweepRecord",
    "SweepTask",
    "now_text",
]


class SweepBook:
    """The sweeps of one job store (the same database file, tables of their own)."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self._ready = False

    def _setup(self) -> JobStore:
        if not self._ready:
            self.store.run_script(SCHEMA)
            self.store.transaction(
                lambda connection: add_missing_columns(connection, "sweeps", SWEEP_LATER_COLUMNS)
            )
            self._ready = True
        return self.store

    # -- writes ---------------------------------------------------------

    def create(self, sweep: SweepRecord, tasks: Sequence[SweepTask]) -> None:
        """Record a new sweep and all its tasks in one transaction (taken by this process).

        A name already used raises ``ValueError``: sweeps are found by name."""
        store = self._setup()

        def write(connection: Any) -> None:
            if connection.execute("SELECT 1 FROM sweeps WHERE name = ?", (sweep.name,)).fetchone():
                raise ValueError(sweep.name)
            connection.execute(
                "INSERT INTO sweeps (name, scheduler, transport, host, flux_uri, folder, "
                "max_queued, steps, total, created, state, feeder, beat, reach) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sweep.name,
                    sweep.scheduler,
                    sweep.transport,
                    sweep.host,
                    sweep.flux_uri,
                    sweep.folder,
                    sweep.max_queued,
                    steps_to_json(sweep.steps),
                    sweep.total,
                    sweep.created,
                    FEEDING,
                    me(),
                    time.time(),
                    sweep.reach,
                ),
            )
            connection.executemany(
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

        store.transaction(write)

    def take(self, name: str) -> Optional[str]:
        """Become the sweep's feeder; ``None`` when taken, else who feeds it now."""
        return leases.take(self._setup(), "sweeps", name)

    def beat(self, name: str) -> None:
        leases.beat(self._setup(), "sweeps", name)

    def release(self, name: str, state: Optional[str] = None) -> None:
        """Stop feeding (and say the sweep is ``fed``); a cancelled sweep stays so."""
        if state:
            self._setup().write_many(
                "UPDATE sweeps SET feeder = '', state = CASE WHEN state = ? THEN state ELSE ? "
                "END WHERE name = ? AND feeder IN ('', ?)",
                [(GIVEN_UP, state, name, me())],
            )
        else:
            leases.let_go(self._setup(), "sweeps", name)

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
        rows = self._setup().query(
            "SELECT name, scheduler, transport, host, flux_uri, folder, max_queued, steps, "
            "total, created, state, feeder, beat, reach FROM sweeps WHERE name = ?",
            (name,),
        )
        if not rows:
            return None
        values = list(rows[0])
        values[7] = steps_from_json(values[7])
        return SweepRecord(*values)

    def names(self) -> List[str]:
        rows = self._setup().query("SELECT name FROM sweeps ORDER BY created")
        return [str(row[0]) for row in rows]

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
