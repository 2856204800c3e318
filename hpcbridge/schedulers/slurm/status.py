"""squeue and sacct: one command line each for many ids, and their parsers. Pure, no I/O.

Tested against outputs recorded from a real Slurm 22.05 (``tests/data/slurm/``).
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ...model import JobStatus
from .ids import expand_job_id, job_list, normalize_job_id, split_job_id
from .states import map_state, parse_exit_code, parse_time, parse_wait_status, settled

#: ``squeue --Format`` fields.  Each is ``Name:0|``: width 0 = never truncated,
#: ``|`` the suffix that separates them.  ``--Format`` rather than ``--format``
#: because only it has ``exit_code``.  Despite its man page ("the base job
#: ID"), JobArrayID prints ``123_4`` for a task and ``123_[5-9%2]`` for the
#: pending rest of an array - the id users hold.
SQUEUE_FIELDS: Tuple[Tuple[str, str], ...] = (
    ("JobArrayID", "id"),
    ("JobID", "raw_id"),
    ("State", "state"),
    ("Reason", "reason"),
    ("StartTime", "start"),
    ("EndTime", "end"),
    ("exit_code", "wait_status"),
)
SQUEUE_COLUMNS: Tuple[str, ...] = tuple(column for _, column in SQUEUE_FIELDS)

SACCT_FIELDS: Tuple[Tuple[str, str], ...] = (
    ("JobID", "id"),
    ("JobIDRaw", "raw_id"),
    ("State", "state"),
    ("ExitCode", "exit_code"),
    ("Start", "start"),
    ("End", "end"),
    ("Reason", "reason"),
)
SACCT_COLUMNS: Tuple[str, ...] = tuple(column for _, column in SACCT_FIELDS)


def squeue_argv(job_ids: Sequence[str]) -> List[str]:
    """One squeue for many ids, finished ones included (``--states=all``).

    Without ``--states=all`` a finished job (kept for MinJobAge) prints no
    row.  ``squeue -j <one purged id>`` exits 1 with "Invalid job id
    specified" (read as "not in the queue", see ``commands.is_invalid_job_id``).
    ``--array`` prints one row per pending array task.
    """
    fields = ",".join(f"{name}:0|" for name, _ in SQUEUE_FIELDS)
    return [
        "squeue",
        "--noheader",
        "--array",
        "--states=all",
        f"--jobs={','.join(job_list(job_ids))}",
        f"--Format={fields}",
    ]


#: the first release whose squeue has ``--only-job-state`` (the REQUEST_JOB_STATE RPC):
#: "squeue - Add `--only-job-state`" is in Slurm's changelog of 23.11.5
ONLY_JOB_STATE_SINCE = (23, 11, 5)


def squeue_state_argv(job_ids: Sequence[str]) -> List[str]:
    """squeue through the light RPC (Slurm 23.11.5+): only each job's id and state.

    "reducing work required by slurmctld to respond" (squeue(1)); it takes
    only ``--jobs``, ``--states``, ``--array`` and the print options.
    """
    return [
        "squeue",
        "--only-job-state",
        "--noheader",
        "--array",
        "--states=all",
        f"--jobs={','.join(job_list(job_ids))}",
        "--format=%i|%T",
    ]


def parse_squeue_states(text: str) -> Dict[str, str]:
    """``squeue_state_argv`` output: job id -> Slurm's state word."""
    found: Dict[str, str] = {}
    for line in text.splitlines():
        job_id, bar, state = line.strip().partition("|")
        if bar and job_id:
            found[normalize_job_id(job_id)] = state.strip()
    return found


#: the job comment every submission carries: what an uncertain submission is found by
KEY_PREFIX = "hpcbridge:"


def key_argv() -> List[str]:
    """This user's jobs with their comments, to find a submission by its key."""
    return ["squeue", "--me", "--noheader", "--states=all", "--format=%F|%k"]


def sacct_key_argv(since: str) -> List[str]:
    """The same from history (Slurm keeps the comment with AccountingStoreFlags=job_comment)."""
    return ["sacct", "-X", "-P", "--noheader", f"--starttime={since}", "--format=JobID,Comment"]


def parse_key_rows(text: str, key: str) -> Optional[str]:
    """The job (the array's own id, for an array) whose comment carries ``key``."""
    wanted = KEY_PREFIX + key
    for line in text.splitlines():
        job_id, bar, comment = line.strip().partition("|")
        if bar and comment.strip() == wanted:
            return job_id.split("_", 1)[0]
    return None


def parse_squeue(
    text: str, columns: Sequence[str] = SQUEUE_COLUMNS, zone: Optional[tzinfo] = None
) -> Dict[str, JobStatus]:
    """Statuses by job id from ``squeue_argv`` output (or any ``|`` format).

    ``columns`` names each field: ``id`` (the ``%i``/JobArrayID form),
    ``raw_id``, ``state``, ``reason``, ``start``, ``end``, ``wait_status``
    (squeue's exit_code) or ``exit_code`` (``N:S``); others are ignored.
    """
    return _statuses(text, columns, zone)


def sacct_argv(job_ids: Sequence[str]) -> List[str]:
    """One sacct for the ids squeue no longer knows.

    ``-P`` because the default fixed columns truncate (``CANCELLED+``); ``-X``
    for the allocation only (no ``.batch``/``.extern`` step rows).  With
    ``-j`` the default start time is the epoch, so old jobs are found.  An id
    sacct never saw gives no row and exit 0.
    """
    return [
        "sacct",
        "-X",
        "-P",
        "--noheader",
        f"--jobs={','.join(job_list(job_ids))}",
        f"--format={','.join(name for name, _ in SACCT_FIELDS)}",
    ]


def array_ids(job_ids: Sequence[str]) -> List[str]:
    """The arrays' own ids of the tasks among ``job_ids`` (``123_4`` -> ``123``): what sacct
    is asked when it has no row for a task (one cancelled before it started)."""
    return list(
        dict.fromkeys(base for base, task in map(split_job_id, job_ids) if task is not None)
    )


def parse_sacct(
    text: str,
    columns: Sequence[str] = SACCT_COLUMNS,
    zone: Optional[tzinfo] = None,
    wanted: Sequence[str] = (),
) -> Dict[str, JobStatus]:
    """Statuses by job id from ``sacct -P`` output (later rows win: requeues).

    Tasks of an array cancelled before they started have no row of their own:
    sacct keeps one row for them, ``123_[0-1]`` (``123_[2-3%2]``), or - cancelled
    before the controller split the array - the array's bare id ``123`` (JobIDRaw
    ``123``).  A bare row answers for each of the ``wanted`` tasks of that array
    that no row names; a row naming a task (``123_4``) wins over a range covering
    it (a range row may still list tasks that ran: ``123_[0-2]`` beside ``123_0``).
    """
    found = _statuses(text, columns, zone)
    rows = _rows(text, columns)
    for row in rows:  # a task's own row over a range that covers it
        job_id = normalize_job_id(row.get("id", ""))
        if "[" not in job_id:
            for own in expand_job_id(job_id):
                found[own] = _status_from_row(own, row, zone)
    bare = {
        job_id: row
        for row in rows
        for job_id in [normalize_job_id(row.get("id", ""))]
        if "_" not in job_id and row.get("raw_id", job_id) == job_id
    }
    for job_id in wanted:
        base, task = split_job_id(job_id)
        if task is not None and job_id not in found and base in bare:
            found[job_id] = _status_from_row(job_id, bare[base], zone)
    return found


# -- the rows of both --------------------------------------------------------------


def _clean_reason(text: str) -> str:
    text = text.strip()
    return "" if text in ("None", "(null)", "N/A") else text


def _rows(text: str, columns: Sequence[str], separator: str = "|") -> List[Dict[str, str]]:
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = line.split(separator)
        if len(cells) == len(columns) + 1 and cells[-1].strip() == "":
            cells = cells[:-1]  # the suffix of the last --Format field
        if len(cells) < len(columns):
            continue
        if len(cells) > len(columns):  # a separator inside the last column (a job name)
            cells = cells[: len(columns) - 1] + [separator.join(cells[len(columns) - 1 :])]
        row = dict(zip(columns, map(str.strip, cells)))
        if row.get("id", "").upper() in ("JOBID", "JOBARRAYID"):
            continue  # a header line
        rows.append(row)
    return rows


def _status_from_row(job_id: str, row: Mapping[str, str], zone: Optional[tzinfo]) -> JobStatus:
    native = row.get("state", "")
    state = map_state(native)
    exit_code: Optional[int] = None
    if state.is_terminal:
        if "exit_code" in row:
            exit_code = parse_exit_code(row["exit_code"])
        elif "wait_status" in row:
            exit_code = parse_wait_status(row["wait_status"])
    # For a pending job squeue's StartTime is a forecast and for a running one
    # EndTime is start + limit: only actual times are kept.
    start = parse_time(row.get("start", ""), zone) if state.rank >= 1 else None
    end = parse_time(row.get("end", ""), zone) if state.is_terminal else None
    extra = {"raw_id": row["raw_id"]} if row.get("raw_id") else {}
    status = JobStatus(
        job_id=job_id,
        state=state,
        exit_code=exit_code,
        start_time=start,
        end_time=end,
        native_state=native,
        reason=_clean_reason(row.get("reason", "")),
        extra=extra,
    )
    return settled(status)


def _statuses(text: str, columns: Sequence[str], zone: Optional[tzinfo]) -> Dict[str, JobStatus]:
    found: Dict[str, JobStatus] = {}
    for row in _rows(text, columns):
        for job_id in expand_job_id(row.get("id", "")):
            found[job_id] = _status_from_row(job_id, row, zone)
        raw = row.get("raw_id", "")
        base, task = split_job_id(normalize_job_id(row.get("id", "")))
        if raw and task is not None and raw != base and raw not in found:
            # A running array task also has its own plain job id (what
            # SLURM_JOB_ID says inside it): answer to that one too.
            found[raw] = _status_from_row(raw, row, zone)
    return found
