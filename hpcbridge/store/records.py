"""How the store writes a job (plain data, no I/O): the records' table - its SQL
(``SCHEMA``, the statements of ``JobStore``), one row as a ``JobRecord``, a record to and
from a row -, then a job's status, once for every table: times as ISO 8601 text, a
``JobStatus`` as its values in one order (``STATUS_FIELDS``) - a record's columns, an
entry of a poll round, a pack task's final status as a JSON object - read back the same."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, fields
from datetime import datetime, timedelta, timezone
from typing import Any, List, Optional, Sequence

from ..model import JobState, JobStatus

# -- the records' table -------------------------------------------------------

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
_STATE_INDEX = COLUMNS.index("state")
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
#: a status written, its values in ``STATUS_FIELDS`` order (``status_values``)
UPDATE_STATUS = (
    "UPDATE hpc_jobs SET state=?, exit_code=?, start_time=COALESCE(?, start_time), "
    "end_time=COALESCE(?, end_time), native_state=?, reason=?, "
    "updated_at=? WHERE scheduler=? AND host=? AND job_id=?"
)
#: a record's status: its job id, ``STATUS_FIELDS`` but ``extra`` (``status_from_row``)
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


def encode_record(record: JobRecord) -> List[Any]:
    """A record as a row of ``INSERT`` (columns in field order; times as ISO 8601 text,
    as ``iso`` writes them) - by index, one pass: a bulk submission writes thousands."""
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


#: columns added after the first release: (table, name, SQL type); older databases get them
LATER_COLUMNS = (
    ("hpc_jobs", "kind", "TEXT"),
    ("hpc_jobs", "reach", "TEXT"),
    ("hpc_jobs", "charged_cpu_seconds", "REAL"),
    ("hpc_jobs", "charged_gpu_seconds", "REAL"),
    ("hpc_jobs", "charged_billing_seconds", "REAL"),
)


# -- a job's status ------------------------------------------------------------

#: a status's values as the store keeps them, after its job id
STATUS_FIELDS = (
    "state",
    "exit_code",
    "start_time",
    "end_time",
    "native_state",
    "reason",
    "extra",
    "as_of",
)
#: the values of ``extra`` kept (the others are no JSON, or mean nothing elsewhere)
PLAIN = (str, int, float, bool)


def iso(moment: Optional[datetime]) -> Optional[str]:
    """A time as the store writes it (``None`` stays ``None``)."""
    return _iso(moment, moment.utcoffset()) if moment is not None else None


def moment(text: Optional[str]) -> Optional[datetime]:
    """A time the store wrote (empty or ``None``: ``None``)."""
    return _moment(text) if text else None


# A round's jobs share a few times (its own, the moment a batch was cancelled): each is
# converted once.  The offset is part of the key: equal times in two zones print apart.
@functools.lru_cache(maxsize=1024)
def _iso(moment: datetime, _offset: Optional[timedelta]) -> str:
    return moment.isoformat()


@functools.lru_cache(maxsize=1024)
def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


def status_values(status: JobStatus) -> List[Any]:
    """``status``'s values in ``STATUS_FIELDS`` order, each as the store writes it."""
    extra = status.extra
    plain = {key: value for key, value in extra.items() if isinstance(value, PLAIN)}
    return [
        status.state.value,
        status.exit_code,
        iso(status.start_time),
        iso(status.end_time),
        status.native_state,
        status.reason,
        plain,
        iso(status.as_of),
    ]


def status_from_values(job_id: str, values: Sequence[Any]) -> JobStatus:
    """The status of ``status_values`` (values left out at the end: their defaults)."""
    padded = [*values, *(None,) * (len(STATUS_FIELDS) - len(values))]
    state, exit_code, start, end, native_state, reason, extra, as_of = padded
    return JobStatus(
        job_id=job_id,
        state=JobState(state),
        exit_code=exit_code,
        start_time=moment(start),
        end_time=moment(end),
        native_state=native_state or "",
        reason=reason or "",
        extra=extra or {},
        as_of=moment(as_of),
    )


def status_from_row(row: Sequence[Any]) -> JobStatus:
    """A status from a record's columns: job id, then ``STATUS_FIELDS`` but ``extra``
    (a record keeps none), the time the record was written last (its ``as_of``)."""
    return status_from_values(row[0], (*row[1:7], None, *row[7:8]))


def status_json(status: JobStatus) -> str:
    """``status`` as one JSON object: its job id and ``STATUS_FIELDS`` by name (the names
    of ``JobStatus.to_json``)."""
    return json.dumps({"job_id": status.job_id, **dict(zip(STATUS_FIELDS, status_values(status)))})


def status_from_json(text: str) -> JobStatus:
    """The status of ``status_json`` (an object without ``extra`` or ``as_of`` too)."""
    data = json.loads(text)
    return status_from_values(data["job_id"], [data.get(name) for name in STATUS_FIELDS])
