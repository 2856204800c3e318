"""Who feeds a named sweep or pack: a lease in its row (``feeder`` = ``host:pid``, with a
heartbeat ``beat``), taken over from a feeder that died or fell silent; ``Book``, the rows
of one kind in the job store, holds the lease's statements once for both."""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from dataclasses import fields
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..processes import alive_here
from .jobs import JobStore, add_missing_columns

#: seconds without a heartbeat after which a feeder on another host counts as gone
SILENT_AFTER = 120.0


def me() -> str:
    """This process, as a feeder: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def feeder_alive(feeder: str, beat: float, now: float) -> bool:
    """Whether the process named ``feeder`` may still be feeding: on this host its pid
    says so; on another, a heartbeat within ``SILENT_AFTER``."""
    if not feeder:
        return False
    host, _, pid = feeder.rpartition(":")
    here = alive_here(host, pid)
    return here if here is not None else now - beat < SILENT_AFTER


class Book:
    """The named rows of ``TABLE`` (its tables made by ``SCHEMA``) in one job store, each
    fed by one process at a time.  ``TABLE`` is a constant, never a value from outside."""

    TABLE = ""
    SCHEMA = ""
    #: columns of ``TABLE`` added after the first release (see ``add_missing_columns``)
    LATER_COLUMNS: Sequence[Tuple[str, str]] = ()

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self._ready = False

    def _setup(self) -> JobStore:
        if not self._ready:
            self.store.run_script(self.SCHEMA)
            if self.LATER_COLUMNS:
                self.store.transaction(
                    lambda db: add_missing_columns(db, self.TABLE, self.LATER_COLUMNS)
                )
            self._ready = True
        return self.store

    def _create(
        self, row: Mapping[str, Any], insert_tasks: str, tasks: Sequence[Sequence[Any]]
    ) -> None:
        """Insert ``row`` (column -> value, ``name`` among them) and its tasks (the
        statement ``insert_tasks`` over ``tasks``) in one transaction; a name already used
        raises ``ValueError``: rows are found by name."""
        name = row["name"]
        columns, marks = ", ".join(row), ", ".join("?" * len(row))

        def write(connection: Any) -> None:
            try:
                connection.execute(
                    f"INSERT INTO {self.TABLE} ({columns}) VALUES ({marks})",  # noqa: S608
                    list(row.values()),
                )
            except sqlite3.IntegrityError as exc:  # its name is the primary key
                raise ValueError(name) from exc
            connection.executemany(insert_tasks, tasks)

        self._setup().transaction(write)

    def _get(self, name: str, record: Any) -> Optional[Dict[str, Any]]:
        """The row named ``name``: the columns named as the fields of ``record`` (a
        dataclass), by name; ``None`` when there is none."""
        columns = [field.name for field in fields(record)]
        rows = self._setup().query(
            f"SELECT {', '.join(columns)} FROM {self.TABLE} WHERE name = ?",  # noqa: S608
            (name,),
        )
        return dict(zip(columns, rows[0])) if rows else None

    def names(self) -> List[str]:
        rows = self._setup().query(f"SELECT name FROM {self.TABLE} ORDER BY created")  # noqa: S608
        return [str(row[0]) for row in rows]

    def take(self, name: str) -> Optional[str]:
        """Become the feeder of ``name``; ``None`` when taken, else who feeds it now.
        ``KeyError`` when no row is named so."""
        mine, now = me(), time.time()

        def attempt(connection: Any) -> Optional[str]:
            row = connection.execute(
                f"SELECT feeder, beat FROM {self.TABLE} WHERE name = ?",  # noqa: S608
                (name,),
            ).fetchone()
            if row is None:
                raise KeyError(name)
            feeder, beat = row
            if feeder not in ("", mine) and feeder_alive(feeder, beat, now):
                return str(feeder)
            connection.execute(
                f"UPDATE {self.TABLE} SET feeder = ?, beat = ? WHERE name = ?",  # noqa: S608
                (mine, now, name),
            )
            return None

        return self._setup().transaction(attempt)

    def beat(self, name: str) -> None:
        """This feeder still feeds ``name``."""
        self._setup().write_many(
            f"UPDATE {self.TABLE} SET beat = ? WHERE name = ? AND feeder = ?",  # noqa: S608
            [(time.time(), name, me())],
        )

    def let_go(self, name: str) -> None:
        """This feeder stops feeding ``name`` (another may take it at once)."""
        self._setup().write_many(
            f"UPDATE {self.TABLE} SET feeder = '' WHERE name = ? AND feeder = ?",  # noqa: S608
            [(name, me())],
        )
