"""Who feeds a named sweep or pack: a lease in its row (``feeder`` = ``host:pid``, with a
heartbeat ``beat``), taken over from a feeder that died or fell silent.  One set of
statements for every table that holds one (``sweeps``, ``packs``: a constant name, never
a value from outside)."""

from __future__ import annotations

import time
from typing import Any, Optional

from .jobs import JobStore
from .sweep_rows import feeder_alive, me

#: the tables with a feeder's lease
LEASED = ("sweeps", "packs")


def take(store: JobStore, table: str, name: str) -> Optional[str]:
    """Become the feeder of ``name``; ``None`` when taken, else who feeds it now.
    ``KeyError`` when no row is named so."""
    assert table in LEASED
    mine, now = me(), time.time()

    def attempt(connection: Any) -> Optional[str]:
        row = connection.execute(
            f"SELECT feeder, beat FROM {table} WHERE name = ?",  # noqa: S608
            (name,),
        ).fetchone()
        if row is None:
            raise KeyError(name)
        feeder, beat = row
        if feeder not in ("", mine) and feeder_alive(feeder, beat, now):
            return str(feeder)
        connection.execute(
            f"UPDATE {table} SET feeder = ?, beat = ? WHERE name = ?",  # noqa: S608
            (mine, now, name),
        )
        return None

    return store.transaction(attempt)


def beat(store: JobStore, table: str, name: str) -> None:
    """This feeder still feeds ``name``."""
    assert table in LEASED
    store.write_many(
        f"UPDATE {table} SET beat = ? WHERE name = ? AND feeder = ?",  # noqa: S608
        [(time.time(), name, me())],
    )


def let_go(store: JobStore, table: str, name: str) -> None:
    """This feeder stops feeding ``name`` (another may take it at once)."""
    assert table in LEASED
    store.write_many(
        f"UPDATE {table} SET feeder = '' WHERE name = ? AND feeder = ?",  # noqa: S608
        [(name, me())],
    )
