"""The job records: an embedded SQLite database, safe under several processes - the
table (``JobRecord``, its SQL, how values are stored), then ``JobStore``."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from dataclasses import dataclass, fields
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

# -- the table --------------------------------------------------------------

SCHEMA = """
CREATE TABLE IF NOT EXISTS hpc_jobs (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id          TEXT NOT NULL,
    scheduler       TEXT NOT NULL,
    transport       TEXT NOT NULL DEFAULT 'local',
    host            TEXT NOT NULL DEFAULT '',
    flux_uri        TEXT,
    job_name        TEXT,
    state           TEXT NOT NULL DEFAULT 'PENDING',
    native_state    TEXT,
    reason          TEXT,
    exit_code       INTEGER,
    submit_time     TEXT,
    start_time      TEXT,
    end_time        TEXT,
    nodes           INTEGER,
    ntasks          INTEGER,
    cpus_per_task   INTEGER,
    gpus            INTEGER,
    time_limit      REAL,
    partition       TEXT,
    qos             TEXT,
    account         TEXT,
    remote_dir      TEXT,
    script          TEXT,
    log_path        TEXT,
    exit_file       TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    updated_at      TEXT,
    kind            TEXT,
    reach           TEXT,
    charged_cpu_seconds     REAL,
    charged_gpu_seconds     REAL,
    charged_billing_seconds REAL,
    UNIQUE (scheduler, host, job_id)
);
CREATE INDEX IF NOT EXISTS hpc_jobs_job_id ON hpc_jobs (job_id);
CREATE INDEX IF NOT EXISTS hpc_jobs_state ON hpc_jobs (state);
"""


@dataclass
class JobRecord:
    """One row of ``hpc_jobs``."""

    job_id: str
    scheduler: str
    transport: str = "local"
    host: str = ""
    flux_uri: Optional[str] = None
    job_name: Optional[str] = None
    state: str = JobState.PENDING.value
    native_state: Optional[str] = None
    reason: Optional[str] = None
    exit_code: Optional[int] = None
    submit_time: Optional[datetime] = None
    start_time: Optional[datetime] = None
    end_time: Optional[datetime] = None
    nodes: Optional[int] = None
    ntasks: Optional[int] = None
    cpus_per_task: Optional[int] = None
    gpus: Optional[int] = None
    time_limit: Optional[float] = None
    partition: Optional[str] = None
    qos: Optional[str] = None
    account: Optional[str] = None
    remote_dir: Optional[str] = None
    script: Optional[str] = None
    log_path: Optional[str] = None
    exit_file: Optional[str] = None
    cancel_requested: bool = False
    updated_at: Optional[datetime] = None
    #: Flux: "batch" (a nested instance) or "plain" (the script as the job's tasks);
    #: ``None`` where the scheduler has no such choice
    kind: Optional[str] = None
    #: JSON of the settings that reach the job's host again from a new shell
    #: (``Executor.reach``: the SSH host as given, key and known-hosts paths);
    #: ``None`` for the local transport and records made before it was kept
    reach: Optional[str] = None
    #: what the scheduler charged an ended job, read once (``hpcbridge cost``): CPU-seconds
    #: (Slurm's CPUTimeRAW; Flux: the cores of its R x its run time), GPU-seconds and
    #: Slurm's billing units x seconds; ``None`` while not read (or not charged: mock)
    charged_cpu_seconds: Optional[float] = None
    charged_gpu_seconds: Optional[float] = None
    charged_billing_seconds: Optional[float] = None

    @property
    def job_state(self) -> JobState:
        return JobState(self.state)

    def status(self) -> JobStatus:
        return JobStatus(
            job_id=self.job_id,
            state=self.job_state,
            exit_code=self.exit_code,
            start_time=self.start_time,
            end_time=self.end_time,
            native_state=self.native_state or "",
            reason=self.reason or "",
            as_of=self.updated_at,  # a state is written when it is seen (the submission's: then)
        )

    @property
    def cpus(self) -> int:
        """CPUs held by the job, for cost: tasks × cpus per task (at least one)."""
        return max(self.ntasks or self.nodes or 1, 1) * max(self.cpus_per_task or 1, 1)

    def elapsed_hours(self, now: Optional[datetime] = None) -> float:
        if self.start_time is None:
            return 0.0
        end = self.end_time or now or datetime.now(timezone.utc)
        return max((end - self.start_time).total_seconds(), 0.0) / 3600.0


COLUMNS = [f.name for f in fields(JobRecord)]
_TIME_COLUMNS = {"submit_time", "start_time", "end_time", "updated_at"}
_TIME_INDEXES = tuple(index for index, name in enumerate(COLUMNS) if name in _TIME_COLUMNS)
_CANCEL_INDEX = COLUMNS.index("cancel_requested")
# Built from the constant column list; every value goes as a parameter.
SELECT = f"SELECT {', '.join(COLUMNS)} FROM hpc_jobs"  # noqa: S608
SELECT_WITH_ROW_ID = f"SELECT id, {', '.join(COLUMNS)} FROM hpc_jobs"  # noqa: S608
INSERT = (
    f"INSERT OR REPLACE INTO hpc_jobs ({', '.join(COLUMNS)}) "  # noqa: S608
    f"VALUES ({', '.join('?' for _ in COLUMNS)})"
)
# A record another host wrote: taken when newer, never over a final state.
IMPORT = (
    f"INSERT INTO hpc_jobs ({', '.join(COLUMNS)}) "  # noqa: S608
    f"VALUES ({', '.join('?' for _ in COLUMNS)}) "
    "ON CONFLICT (scheduler, host, job_id) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in COLUMNS)
    + " WHERE excluded.updated_at > hpc_jobs.updated_at AND hpc_jobs.state NOT IN "
    "('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT')"
)
UPDATE_STATUS = (
    "UPDATE hpc_jobs SET state=?, native_state=?, reason=?, exit_code=?, "
    "start_time=COALESCE(?, start_time), end_time=COALESCE(?, end_time), "
    "updated_at=? WHERE scheduler=? AND host=? AND job_id=?"
)
#: a status's columns (``SELECT_STATUS``), as ``JobStatus.to_json`` names them
STATUS_KEYS = ("job_id", "state", "exit_code", "start_time", "end_time", "native_state", "reason")
SELECT_STATUS = (
    "SELECT job_id, state, exit_code, start_time, end_time, native_state, reason, updated_at "
    "FROM hpc_jobs"
)
RECORD_CHARGE = (
    "UPDATE hpc_jobs SET charged_cpu_seconds=?, charged_gpu_seconds=?, "
    "charged_billing_seconds=?, updated_at=? WHERE scheduler=? AND host=? AND job_id=?"
)
MARK_CANCEL = (
    "UPDATE hpc_jobs SET cancel_requested=1, updated_at=? WHERE scheduler=? AND host=? AND job_id=?"
)
#: ids per ``IN (...)`` query: under 999, the variable limit of SQLite before 3.32
IDS_PER_QUERY = 900


def encode_value(name: str, value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if name == "cancel_requested":
        return int(bool(value))
    if isinstance(value, JobState):
        return value.value
    return value


_STATE_INDEX = COLUMNS.index("state")


def encode_record(record: JobRecord) -> List[Any]:
    """A record as a row of ``INSERT`` (columns in field order), as ``encode_value``
    gives each value - by index, one pass: a bulk submission writes thousands."""
    values = [record.__dict__[name] for name in COLUMNS]
    for index in _TIME_INDEXES:
        if values[index] is not None:
            values[index] = values[index].isoformat()
    values[_CANCEL_INDEX] = int(bool(values[_CANCEL_INDEX]))
    if isinstance(values[_STATE_INDEX], JobState):
        values[_STATE_INDEX] = values[_STATE_INDEX].value
    return values


def decode_row(row: Sequence[Any]) -> JobRecord:
    """A record from a row of ``SELECT`` (columns in field order)."""
    values = list(row)
    for index in _TIME_INDEXES:
        if values[index]:
            values[index] = datetime.fromisoformat(values[index])
    values[_CANCEL_INDEX] = bool(values[_CANCEL_INDEX])
    return JobRecord(*values)


def status_from_row(row: Sequence[Any]) -> JobStatus:
    """A status from a row of ``SELECT_STATUS`` (its ``STATUS_KEYS``, then the time the
    record was written: the state's ``as_of``)."""
    job_id, state, exit_code, start, end, native_state, reason = row[:7]
    written = row[7] if len(row) > 7 else None
    return JobStatus(
        job_id=job_id,
        state=JobState(state),
        exit_code=exit_code,
        start_time=datetime.fromisoformat(start) if start else None,
        end_time=datetime.fromisoformat(end) if end else None,
        native_state=native_state or "",
        reason=reason or "",
        as_of=datetime.fromisoformat(written) if written else None,
    )


#: columns added after the first release: (name, SQL type); databases made before get them
LATER_COLUMNS = (
    ("kind", "TEXT"),
    ("reach", "TEXT"),
    ("charged_cpu_seconds", "REAL"),
    ("charged_gpu_seconds", "REAL"),
    ("charged_billing_seconds", "REAL"),
)


def add_missing_columns(
    connection: sqlite3.Connection,
    table: str = "hpc_jobs",
    later: Sequence[Tuple[str, str]] = LATER_COLUMNS,
) -> None:
    """Bring a table made by an older hpcbridge up to the current columns."""
    present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
    for name, sql_type in later:
        if name not in present:
            # Table, names and types come from constant lists, never from input.
            connection.execute(f"ALTER TABLE {table} ADD COLUMN {name} {sql_type}")


# -- the store --------------------------------------------------------------

T = TypeVar("T")

__all__ = ["JobRecord", "JobStore"]


class JobStore:
    """Job records in SQLite (WAL, busy timeout): many writers, no row lost - on a
    local disk (``store_location``: a shared place gets a local stand-in, and each
    record is written there as a file of its own, ``store_journal``).

    The database file is opened (and created) on first use, not by the
    constructor: every adapter holds a store, most never touch it.
    """

    def __init__(self, path: os.PathLike[str] | str) -> None:
        #: where the database really is, and why (a local disk for a shared place)
        self.location = store_location.choose(Path(path))
        self.path = self.location.path
        self.journal = journal_for(self.location.shared, self.path)
        self._local = threading.local()
        self._schema_ready = False

    def _connect(self) -> sqlite3.Connection:
        connection: Optional[sqlite3.Connection] = getattr(self._local, "connection", None)
        if connection is not None:
            return connection
        self.path.parent.mkdir(parents=True, exist_ok=True)
        opened = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
        _retry_locked(lambda: opened.execute("PRAGMA journal_mode=WAL"))
        opened.execute("PRAGMA busy_timeout=30000")
        # Under WAL, NORMAL loses no committed row when a process crashes (only
        # on power loss or an OS crash), which is what the records promise.
        opened.execute("PRAGMA synchronous=NORMAL")
        if not self._schema_ready:
            _retry_locked(lambda: opened.executescript(SCHEMA))
            _retry_locked(lambda: add_missing_columns(opened))
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
        records = self.journal.others(JobRecord)
        if records:
            rows = [encode_record(r) for r in records]
            self.write_many(IMPORT, rows)

    def update_status(self, scheduler: str, host: str, status: JobStatus) -> None:
        self.update_statuses(scheduler, host, [status])

    def update_statuses(self, scheduler: str, host: str, statuses: Iterable[JobStatus]) -> None:
        """Record observed states; UNKNOWN observations are not written over known ones."""
        now = _now().isoformat()
        rows = [
            (
                status.state.value,
                status.native_state,
                status.reason,
                status.exit_code,
                encode_value("start_time", status.start_time),
                encode_value("end_time", status.end_time),
                now,
                scheduler,
                host,
                status.job_id,
            )
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

        return _retry_locked(attempt)

    def run_script(self, script: str) -> None:
        """Statements making the tables of other parts (``CREATE ... IF NOT EXISTS``)."""
        connection = self._connect()
        _retry_locked(lambda: connection.executescript(script))

    def query(self, statement: str, params: Sequence[Any] = ()) -> List[Sequence[Any]]:
        return list(self._connect().execute(statement, params))

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


def _retry_locked(action: Callable[[], T], attempts: int = 50) -> T:
    """Run ``action``, retrying "database is locked" that busy_timeout did not absorb.

    SQLite returns SQLITE_BUSY at once (bypassing the busy handler) when a
    deferred transaction would deadlock or the WAL is being set up.
    """
    for attempt in range(attempts - 1):
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            time.sleep(min(0.01 * (attempt + 1), 0.2))
    return action()
