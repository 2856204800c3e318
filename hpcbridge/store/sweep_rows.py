"""The sweeps' tables in the job store, their rows as dataclasses: pure, no connection.

``sweep_store.SweepBook`` reads and writes them; the module docstring there says
what a sweep and its tasks' places are.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from ..processes import alive_here

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

#: columns of ``sweeps`` added after the first release (see store.jobs.add_missing_columns)
SWEEP_LATER_COLUMNS = (("reach", "TEXT"),)

#: a task's places (see the module docstring)
WAITING, SENDING, SENT, CANCELLED = "waiting", "sending", "sent", "cancelled"
#: a sweep's: still being fed, every task sent, given up
FEEDING, FED, GIVEN_UP = "feeding", "fed", "cancelled"
#: seconds without a heartbeat after which a feeder on another host counts as gone
SILENT_AFTER = 120.0


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
    index, step, script, arguments, environment, after, state, token, made, job_id, note = row
    return SweepTask(
        index,
        step,
        script,
        tuple(json.loads(arguments)),
        json.loads(environment),
        tuple(json.loads(after)),
        state,
        token,
        made,
        job_id,
        note,
    )


#: a record of ``hpc_jobs`` that is no sweep's job (the listing's jobs outside sweeps)
OUTSIDE_SWEEPS = (
    "NOT EXISTS (SELECT 1 FROM sweep_tasks t JOIN sweeps s ON s.name = t.sweep "
    "WHERE t.job_id = hpc_jobs.job_id AND s.scheduler = hpc_jobs.scheduler "
    "AND s.host = hpc_jobs.host)"
)


def now_text() -> str:
    return datetime.now(timezone.utc).isoformat()
