"""Leases kept in a table's rows: who holds a named thing (``host:pid``, and a part of
its own after that), until when, and whether that holder still lives - the one rule
for the feeder of a sweep or pack (``Book``) and the holder of a shared poll
(``polls``)."""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from dataclasses import dataclass, fields
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .jobs import JobStore, add_missing_columns
from .processes import alive_here

#: seconds without a heartbeat after which a feeder on another host counts as gone
SILENT_AFTER = 120.0


def me() -> str:
    """This process, as a holder: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def holds(holder: str, until: float, now: float, pid_decides: bool = False) -> bool:
    """Whether ``holder`` (``host:pid``, maybe ``:part`` after) still holds a lease that
    runs until ``until``: not when its process of this host is gone; else while the
    lease runs - or, ``pid_decides``, as long as its process of this host lives."""
    if not holder:
        return False
    host, _, rest = holder.partition(":")
    here = alive_here(host, rest.partition(":")[0])
    if here is False:
        return False
    return (here and pid_decides) or now < until


def feeder_alive(feeder: str, beat: float, now: float) -> bool:
    """Whether the process named ``feeder`` may still be feeding: on this host its pid
    says so; on another, a heartbeat within ``SILENT_AFTER``."""
    return holds(feeder, beat + SILENT_AFTER, now, pid_decides=True)


@dataclass(frozen=True)
class Lease:
    """The lease of each row of ``table`` (a constant, never a value from outside): who
    holds it in ``holder`` (``''``: nobody), when it was stamped in ``stamp``; it runs
    ``lasts`` seconds past its stamp, and as long as its holder lives when
    ``pid_decides``."""

    table: str
    key: str
    holder: str
    stamp: str
    lasts: float = 0.0
    pid_decides: bool = False

    def read(self, connection: Any, key: str) -> Optional[Tuple[str, float]]:
        """The row's holder and stamp (``None``: no row)."""
        row = connection.execute(
            f"SELECT {self.holder}, {self.stamp} FROM {self.table} "  # noqa: S608
            f"WHERE {self.key} = ?",
            (key,),
        ).fetchone()
        return None if row is None else (str(row[0] or ""), float(row[1] or 0.0))

    def held(self, holder: str, stamp: float, now: float) -> bool:
        return holds(holder, stamp + self.lasts, now, self.pid_decides)

    def other(self, connection: Any, key: str, mine: str, now: float) -> Optional[str]:
        """Who else holds the lease of ``key`` now (``None``: nobody); ``KeyError``
        when no row is keyed so."""
        row = self.read(connection, key)
        if row is None:
            raise KeyError(key)
        holder, stamp = row
        return holder if holder not in ("", mine) and self.held(holder, stamp, now) else None

    def claim(self, connection: Any, key: str, mine: str, stamp: float) -> None:
        """``mine`` holds the lease of ``key`` now, stamped ``stamp``."""
        connection.execute(
            f"UPDATE {self.table} SET {self.holder} = ?, {self.stamp} = ? "  # noqa: S608
            f"WHERE {self.key} = ?",
            (mine, stamp, key),
        )

    def renew(self, connection: Any, key: str, mine: str, stamp: float) -> None:
        """Stamped again, if ``mine`` still holds it."""
        connection.execute(
            f"UPDATE {self.table} SET {self.stamp} = ? "  # noqa: S608
            f"WHERE {self.key} = ? AND {self.holder} = ?",
            (stamp, key, mine),
        )

    def let_go(self, connection: Any, key: str, mine: str, stamp: Optional[float] = None) -> None:
        """``mine`` holds it no more (another may take it at once); ``stamp``: the stamp
        left (``None``: as it was)."""
        connection.execute(
            f"UPDATE {self.table} SET {self.holder} = '', "  # noqa: S608
            f"{self.stamp} = COALESCE(?, {self.stamp}) WHERE {self.key} = ? AND {self.holder} = ?",
            (stamp, key, mine),
        )


class Book:
    """The named rows of ``TABLE`` (its tables made by ``SCHEMA``) in one job store, each
    fed by one process at a time.  ``TABLE`` is a constant, never a value from outside."""

    TABLE = ""
    SCHEMA = ""
    #: columns of ``TABLE`` added after the first release: (name, SQL type)
    LATER_COLUMNS: Sequence[Tuple[str, str]] = ()

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self._ready = False
        #: the feeder's lease: on this host while its process lives, else while it beats
        self.lease = Lease(self.TABLE, "name", "feeder", "beat", SILENT_AFTER, pid_decides=True)

    def _setup(self) -> JobStore:
        if not self._ready:
            self.store.run_script(self.SCHEMA)
            later = [(self.TABLE, name, sql_type) for name, sql_type in self.LATER_COLUMNS]
            if later:
                self.store.transaction(lambda db: add_missing_columns(db, later))
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
            feeder = self.lease.other(connection, name, mine, now)
            if feeder is None:
                self.lease.claim(connection, name, mine, now)
            return feeder

        return self._setup().transaction(attempt)

    def beat(self, name: str) -> None:
        """This feeder still feeds ``name``."""
        self._setup().transaction(lambda db: self.lease.renew(db, name, me(), time.time()))

    def let_go(self, name: str) -> None:
        """This feeder stops feeding ``name`` (another may take it at once)."""
        self._setup().transaction(lambda db: self.lease.let_go(db, name, me()))
