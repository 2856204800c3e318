"""The job store's table: ``JobRecord``, its columns, its SQL, and how values are stored.

Pure: no connection is opened here (``store.JobStore`` does that).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Any, List, Optional, Sequence, Tuple

from .model import JobState, JobStatus

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
SELECT_STATUS = (
    "SELECT job_id, state, exit_code, start_time, end_time, native_state, reason FROM hpc_jobs"
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
    """A status from a row of ``SELECT_STATUS``."""
    job_id, state, exit_code, start, end, native_state, reason = row
    return JobStatus(
        job_id=job_id,
        state=JobState(state),
        exit_code=exit_code,
        start_time=datetime.fromisoformat(start) if start else None,
        end_time=datetime.fromisoformat(end) if end else None,
        native_state=native_state or "",
        reason=reason or "",
    )


#: columns added after the first release: (name, SQL type); databases made before get them
LATER_COLUMNS = (("kind", "TEXT"), ("reach", "TEXT"))


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
