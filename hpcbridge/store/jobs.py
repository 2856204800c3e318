"""The store's SQLite file (``Database``: shared by many processes and threads, every write
one immediate transaction retried while another writer holds it) and the job records in
it (``JobStore``; their table: ``records``), on a local disk (``location``)."""

from __future__ import annotations

import os
import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
)

from ..errors import ConfigurationError
from ..model import JobState, JobStatus
from . import location as store_location
from .journal import journal_for
from .records import (
    IDS_PER_QUERY,
    IMPORT,
    INSERT,
    MARK_CANCEL,
    RECORD_CHARGE,
    SELECT,
    SELECT_STATUS,
    SELECT_WITH_ROW_ID,
    UPDATE_STATUS,
    JobRecord,
    decode_row,
    encode_record,
    status_from_row,
    status_values,
)
from .records import LATER_COLUMNS as RECORDS_LATER_COLUMNS
from .records import SCHEMA as RECORDS_SCHEMA

__all__ = ["JobRecord", "JobStore"]

T = TypeVar("T")

#: seconds a statement is tried again while SQLite answers "locked" or "busy"
BUSY_BUDGET = 10.0


class Busy(Exception):
    """SQLite said "database is locked" (or busy) at once, past its busy timeout."""


class Database:
    """One SQLite file (``path``) whose tables ``SCHEMA`` makes and ``LATER_COLUMNS``
    (table, column, SQL type) brings up to date; opened (and created) on first use, not
    by the constructor: most holders never touch it."""

    SCHEMA = ""
    LATER_COLUMNS: Sequence[Tuple[str, str, str]] = ()

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._schema_ready = False

    def _connect(self) -> sqlite3.Connection:
        connection: Optional[sqlite3.Connection] = getattr(self._local, "connection", None)
        if connection is not None:
            return connection
        self.path.parent.mkdir(parents=True, exist_ok=True)
        opened = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
        retry_locked(lambda: opened.execute("PRAGMA journal_mode=WAL"))
        opened.execute("PRAGMA busy_timeout=30000")
        # Under WAL, NORMAL loses no committed row when a process crashes (only
        # on power loss or an OS crash), which is what the records promise.
        opened.execute("PRAGMA synchronous=NORMAL")
        if not self._schema_ready:
            retry_locked(lambda: opened.executescript(self.SCHEMA))
            retry_locked(lambda: add_missing_columns(opened, self.LATER_COLUMNS))
            self._schema_ready = True
        self._local.connection = opened
        return opened

    def check_writable(self) -> None:
        """Open (and create) the database now; ``ConfigurationError`` saying what to do
        when it cannot be - asked before a submission, so that no job goes in unrecorded."""
        try:
            connection = self._connect()
            connection.execute("BEGIN IMMEDIATE")  # a write lock taken: the file is writable
            connection.execute("ROLLBACK")
        except (sqlite3.Error, OSError) as exc:
            self.close()
            raise ConfigurationError(
                f"the job store {self.path} cannot be written ({exc}): nothing was submitted; "
                "set HPCBRIDGE_STATE_DIR to a folder of yours that is writable"
            ) from exc

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    def write_many(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement over many rows in one immediate transaction, retried when locked."""
        if not rows:
            return
        self.transaction(lambda connection: connection.executemany(statement, rows))

    def transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(connection)`` in one immediate transaction, retried when locked."""
        connection = self._connect()

        def attempt() -> T:
            connection.execute("BEGIN IMMEDIATE")
            try:
                result = work(connection)
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            return result

        return retry_locked(attempt)

    def run_script(self, script: str) -> None:
        """Statements making the tables of other parts (``CREATE ... IF NOT EXISTS``)."""
        connection = self._connect()
        retry_locked(lambda: connection.executescript(script))

    def query(self, statement: str, params: Sequence[Any] = ()) -> List[Sequence[Any]]:
        return list(self._connect().execute(statement, params))


def add_missing_columns(
    connection: sqlite3.Connection, later: Sequence[Tuple[str, str, str]]
) -> None:
    """Bring tables made by an older hpcbridge up to the current columns: ``later`` holds
    (table, column, SQL type), each added where its table lacks it."""
    present: dict[str, set[str]] = {}
    for table, name, sql_type in later:
        if table not in present:
            rows = connection.execute(f"PRAGMA table_info({table})")
            present[table] = {row[1] for row in rows}
        if name not in present[table]:
            # Table, names and types come from constant lists, never from input.
            connection.execute(f"ALTER TABLE {table} ADD COLUMN {name} {sql_type}")


def retry_locked(action: Callable[[], T]) -> T:
    """``action()``, tried again while SQLite says "locked" or "busy" at once - as it does
    (bypassing the busy handler) when a deferred transaction would deadlock or the WAL is
    being set up; another error is raised as it is, and so is the last "locked"."""

    def attempt() -> T:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise Busy(str(exc)) from exc
            raise

    try:
        return attempt()
    except Busy as exc:
        first: List[Busy] = [exc]
    # locked: the retry loop (loaded only now), whose first attempt is this one's answer
    from ..retrying import retry

    def again() -> T:
        if first:
            raise first.pop()
        return attempt()

    try:
        return retry(
            again, budget=BUSY_BUDGET, retry_on=(Busy,), pause=0.01, backoff=1.5, max_pause=0.2
        )
    except Busy as exc:
        raise exc.__cause__ or exc from None


class JobStore(Database):
    """Job records in SQLite (WAL, busy timeout): many writers, no row lost - on a
    local disk (``store_location``: a shared place gets a local stand-in, and each
    record is written there as a file of its own, ``store_journal``).

    The database file is opened (and created) on first use, not by the
    constructor: every adapter holds a store, most never touch it.
    """

    SCHEMA = RECORDS_SCHEMA
    LATER_COLUMNS = RECORDS_LATER_COLUMNS

    def __init__(self, path: os.PathLike[str] | str) -> None:
        #: where the database really is, and why (a local disk for a shared place)
        self.location = store_location.choose(Path(path))
        super().__init__(self.location.path)
        self.journal = journal_for(self.location.shared, self.path)

    # -- writes ---------------------------------------------------------

    def add(self, record: JobRecord) -> None:
        """Insert a new submission (or replace a stale row with the same key)."""
        self.add_many([record])

    def add_many(self, records: Iterable[JobRecord]) -> None:
        rows = []
        written = list(records)
        for record in written:
            record.updated_at = _now()
            rows.append(encode_record(record))
        self.write_many(INSERT, rows)
        if self.journal is not None:
            self.journal.write(written)

    def _share(self, scheduler: str, host: str, job_ids: Sequence[str]) -> None:
        """The records of these jobs as they are now, into the shared folder (if any)."""
        if self.journal is not None and job_ids:
            self.journal.write(self.get_many(scheduler, host, job_ids).values())

    def _import_shared(self) -> None:
        """The records other hosts wrote since the last look (a relocated store only)."""
        if self.journal is None:
            return
        records = self.journal.others()
        if records:
            rows = [encode_record(r) for r in records]
            self.write_many(IMPORT, rows)

    def update_status(self, scheduler: str, host: str, status: JobStatus) -> None:
        self.update_statuses(scheduler, host, [status])

    def update_statuses(self, scheduler: str, host: str, statuses: Iterable[JobStatus]) -> None:
        """Record observed states; UNKNOWN observations are not written over known ones."""
        now = _now().isoformat()
        rows = [
            (*status_values(status)[:6], now, scheduler, host, status.job_id)
            for status in statuses
            if status.state is not JobState.UNKNOWN
        ]
        self.write_many(UPDATE_STATUS, rows)
        self._share(scheduler, host, [str(row[-1]) for row in rows])

    def record_charges(
        self,
        scheduler: str,
        host: str,
        charges: Mapping[str, Tuple[float, Optional[float], Optional[float]]],
    ) -> None:
        """Keep what the scheduler charged these ended jobs: ``{job_id: (cpu_seconds,
        gpu_seconds, billing_seconds)}`` - read once, so later ``cost`` runs ask no one."""
        now = _now().isoformat()
        rows = [(*charge, now, scheduler, host, job_id) for job_id, charge in charges.items()]
        self.write_many(RECORD_CHARGE, rows)
        self._share(scheduler, host, list(charges))

    def mark_cancel_requested(self, scheduler: str, host: str, job_ids: Iterable[str]) -> None:
        now = _now().isoformat()
        ids = list(job_ids)
        self.write_many(MARK_CANCEL, [(now, scheduler, host, job_id) for job_id in ids])
        self._share(scheduler, host, ids)

    # -- reads ----------------------------------------------------------

    def get(
        self, job_id: str, scheduler: Optional[str] = None, host: Optional[str] = None
    ) -> Optional[JobRecord]:
        """The newest record for ``job_id`` (optionally on one scheduler/host)."""
        self._import_shared()
        clauses, params = ["job_id = ?"], [job_id]
        if scheduler is not None:
            clauses.append("scheduler = ?")
            params.append(scheduler)
        if host is not None:
            clauses.append("host = ?")
            params.append(host)
        # Only constant clauses are joined; every value is a parameter.
        query = f"{SELECT} WHERE {' AND '.join(clauses)} ORDER BY id DESC LIMIT 1"  # noqa: S608
        row = self._connect().execute(query, params).fetchone()
        return decode_row(row) if row else None

    def get_many(self, scheduler: str, host: str, job_ids: Sequence[str]) -> Dict[str, JobRecord]:
        """The records of these ids on one scheduler/host: one query per 900 ids."""
        rows = self.select_ids(SELECT, "scheduler=? AND host=? AND ", [scheduler, host], job_ids)
        return {record.job_id: record for record in map(decode_row, rows)}

    def statuses(self, scheduler: str, host: str, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """The last recorded status of these ids: ``get_many`` without the rest of
        each record, for the status refresh of many jobs."""
        rows = self.select_ids(
            SELECT_STATUS, "scheduler=? AND host=? AND ", [scheduler, host], job_ids
        )
        return {row[0]: status_from_row(row) for row in rows}

    def status_rows(
        self, scheduler: str, host: str, job_ids: Sequence[str]
    ) -> Dict[str, Sequence[Any]]:
        """``statuses`` as the rows read (``status_from_row`` makes each one's status):
        for a caller that needs few of them built."""
        rows = self.select_ids(
            SELECT_STATUS, "scheduler=? AND host=? AND ", [scheduler, host], job_ids
        )
        return {row[0]: row for row in rows}

    def find(self, job_ids: Sequence[str]) -> List[JobRecord]:
        """Every record of these ids on any scheduler or host, newest first."""
        self._import_shared()
        rows = self.select_ids(SELECT_WITH_ROW_ID, "", [], job_ids)
        return [decode_row(row[1:]) for row in sorted(rows, key=lambda row: -int(row[0]))]

    def select_ids(
        self, select: str, condition: str, params: Sequence[Any], job_ids: Sequence[str]
    ) -> List[Sequence[Any]]:
        """Rows of ``select`` whose job_id is one of ``job_ids`` (and ``condition``)."""
        connection = self._connect()
        unique = list(dict.fromkeys(job_ids))
        rows: List[Sequence[Any]] = []
        for start in range(0, len(unique), IDS_PER_QUERY):
            chunk = unique[start : start + IDS_PER_QUERY]
            marks = ", ".join("?" for _ in chunk)
            # Only constant text and "?" marks are joined; every value is a parameter.
            query = f"{select} WHERE {condition}job_id IN ({marks})"  # noqa: S608
            rows.extend(connection.execute(query, [*params, *chunk]))
        return rows

    def list(
        self, state: Optional[str] = None, limit: Optional[int] = None, where: str = ""
    ) -> List[JobRecord]:
        """The records, oldest first (``state``: in it; ``limit``: the newest N; ``where``:
        a constant SQL condition of another part, e.g. the jobs of no sweep)."""
        self._import_shared()
        condition, params = _condition(state, where)
        query = SELECT + condition
        if limit:  # the newest ``limit`` rows, still listed oldest first
            query += f" ORDER BY id DESC LIMIT {int(limit)}"
            return [decode_row(row) for row in self._connect().execute(query, params)][::-1]
        query += " ORDER BY id"
        return [decode_row(row) for row in self._connect().execute(query, params)]

    def count(self, state: Optional[str] = None, where: str = "") -> int:
        """How many jobs are recorded (``state``, ``where``: as for ``list``)."""
        self._import_shared()
        condition, params = _condition(state, where)
        query = f"SELECT COUNT(*) FROM hpc_jobs{condition}"  # noqa: S608 - values are bound
        return int(self._connect().execute(query, params).fetchone()[0])

    def __iter__(self) -> Iterator[JobRecord]:
        return iter(self.list())


def _condition(state: Optional[str], where: str) -> Tuple[str, List[Any]]:
    """The ``WHERE`` of ``list`` and ``count`` (empty without a condition), its values."""
    clauses, params = [where] if where else [], []
    if state:
        clauses.append("state = ?")
        params.append(state.upper())
    return (f" WHERE {' AND '.join(clauses)}" if clauses else ""), params


def _now() -> datetime:
    return datetime.now(timezone.utc)


def now_text() -> str:
    return _now().isoformat()
