"""squeue and sacct output: Slurm's states, exit codes and times, the columns a status is
read from, and the parsers (ids are ``ids``'s; the command lines, ``queries``').  Pure, no
I/O; tested against outputs of a real Slurm 22.05 (tests/data/slurm/)."""

from __future__ import annotations

import functools
import re
from datetime import datetime, tzinfo
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ...model import CANCELLED_WHILE_PENDING, JobState, JobStatus
from .ids import expand_job_id, normalize_job_id, split_job_id

#: every Slurm job state: its long form (squeue %T, sacct State), compact code (squeue %t,
#: which some sites set in SQUEUE_FORMAT) and our state
_STATES = (
    ("PENDING", "PD", JobState.PENDING),
    ("CONFIGURING", "CF", JobState.PENDING),
    ("REQUEUED", "RQ", JobState.PENDING),
    ("REQUEUE_FED", "RF", JobState.PENDING),
    ("REQUEUE_HOLD", "RH", JobState.PENDING),
    ("RESV_DEL_HOLD", "RD", JobState.PENDING),
    ("RUNNING", "R", JobState.RUNNING),
    ("COMPLETING", "CG", JobState.RUNNING),
    ("STAGE_OUT", "SO", JobState.RUNNING),
    ("SIGNALING", "SI", JobState.RUNNING),
    ("SUSPENDED", "S", JobState.RUNNING),
    ("STOPPED", "ST", JobState.RUNNING),
    ("RESIZING", "RS", JobState.RUNNING),
    ("COMPLETED", "CD", JobState.COMPLETED),
    ("FAILED", "F", JobState.FAILED),
    ("NODE_FAIL", "NF", JobState.FAILED),
    ("BOOT_FAIL", "BF", JobState.FAILED),
    ("OUT_OF_MEMORY", "OOM", JobState.FAILED),
    ("SPECIAL_EXIT", "SE", JobState.FAILED),
    ("LAUNCH_FAILED", "LF", JobState.FAILED),
    # A requeued preempted job shows REQUEUED: a final PREEMPTED was killed for good.
    ("PREEMPTED", "PR", JobState.FAILED),
    ("CANCELLED", "CA", JobState.CANCELLED),
    ("REVOKED", "RV", JobState.CANCELLED),  # federation: the sibling that did not run it
    ("TIMEOUT", "TO", JobState.TIMEOUT),
    ("DEADLINE", "DL", JobState.TIMEOUT),
)
STATE_MAP: Dict[str, JobState] = {name: state for name, _, state in _STATES}
COMPACT_STATES: Dict[str, str] = {code: name for name, code, _ in _STATES}


@functools.lru_cache(maxsize=256)  # a few dozen words, met on every row
def map_state(native: str) -> JobState:
    """Our state for Slurm's words; UNKNOWN (never a guess) for anything new."""
    # sacct prints "CANCELLED by 0", truncated "CANCELLED+": only the first word counts.
    words = native.strip().split()
    if not words:
        return JobState.UNKNOWN
    word = words[0].rstrip("+").upper()
    word = COMPACT_STATES.get(word, word)
    if word in STATE_MAP:
        return STATE_MAP[word]
    if word.startswith("REQUEUE"):  # REQUEUED, REQUEUE_FED, REQUEUE_HOLD and any later one
        return JobState.PENDING
    return JobState.UNKNOWN


def parse_exit_code(text: str) -> Optional[int]:
    """``N:S`` (sacct ExitCode, scontrol ExitCode) -> N, or 128+S when signalled."""
    match = re.fullmatch(r"(\d+)(?::(\d+))?", text.strip())
    if not match:
        return None
    signal = int(match.group(2) or 0)
    return 128 + signal if signal else int(match.group(1))


def parse_wait_status(text: str) -> Optional[int]:
    """squeue's ``exit_code``: the raw wait(2) status (768 for ``exit 3``, 9 for SIGKILL)."""
    text = text.strip()
    if ":" in text:
        return parse_exit_code(text)
    if not (text.isascii() and text.isdigit()):  # "²" is a digit to isdigit, not to int
        return None
    signal = int(text) & 0x7F
    return 128 + signal if signal else (int(text) >> 8) & 0xFF


_NO_TIME = {"", "unknown", "none", "n/a", "(null)", "0"}


def parse_time(text: str, zone: Optional[tzinfo] = None) -> Optional[datetime]:
    """A Slurm timestamp as an aware datetime (a zoneless one read in ``zone``, by default
    this machine's); ``None`` for Unknown/None/N/A."""
    text = text.strip()
    if text.lower() in _NO_TIME:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=zone) if zone is not None else moment.astimezone()


#: the reason of a job cancelled once started, whose script's end Slurm does not record
CANCELLED = "cancelled"

#: Slurm's reason for a job whose parent did not complete (``--kill-on-invalid-dep``)
NEVER_SATISFIED = "DependencyNeverSatisfied"


def _settled(
    state: JobState, exit_code: Optional[int], start: Optional[datetime], reason: str
) -> Tuple[Optional[int], Optional[datetime], str]:
    """A status's exit code, start and reason in the words every scheduler uses, where
    Slurm's own would mislead."""
    if state is JobState.RUNNING:
        return exit_code, start, ""  # Slurm keeps a running job's final reason (COMPLETING)
    if state is not JobState.CANCELLED or exit_code not in (0, None):
        return exit_code, start, reason
    if start is not None and not reason:
        # Slurm: a cancelled job's allocation ends 0:0 whatever its script did
        return None, start, CANCELLED
    # Cancelled while pending: Slurm says 0:0, keeps the pending reason, squeue a start.
    if not reason.startswith(NEVER_SATISFIED):  # that one already says why, everywhere
        reason = CANCELLED_WHILE_PENDING + (f" ({reason})" if reason else "")
    return None, None, reason


# -- the columns ------------------------------------------------------------------

#: ``squeue --Format`` fields (width 0: never truncated); only --Format has exit_code.
#: JobArrayID prints 123_4 for a task and 123_[5-9%2] for an array's pending rest.
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


def shown_ids(raw: str, array: str, task: object, tasks: Sequence[str], history: bool) -> List[str]:
    """The JobID column(s) sacct shows for a record (pyslurm's, slurmrestd's): a task's id,
    a range (``13_[5,6]``) of the ``tasks`` it covers unnamed, a running task's own job id,
    and (``history``) the array's id (slurmdbd: one record for tasks cancelled unstarted)."""
    if not array:
        return [raw] if raw else []
    if task is not None:
        return [f"{array}_{task}"]
    shown = [f"{array}_[{','.join(tasks)}]"] if tasks else []
    return shown + [raw] if raw and (raw != array or history) else shown


def cell(text: object) -> str:  # a field as one ``sacct -P`` cell: one line, no "|"
    return " ".join(str(text or "").replace("|", "/").split())


def sacct_lines(records: Iterable[Tuple[Mapping[str, str], Sequence[str]]]) -> str:
    """Records as ``sacct -X -P`` prints them: each one's fields once per id it shows."""
    rows = ({**fields, "id": shown} for fields, ids in records for shown in ids)
    return "\n".join("|".join(row.get(column, "") for column in SACCT_COLUMNS) for row in rows)


def parse_sacct(
    text: str,
    columns: Sequence[str] = SACCT_COLUMNS,
    zone: Optional[tzinfo] = None,
    wanted: Optional[Sequence[str]] = None,
) -> Dict[str, JobStatus]:
    """Statuses by job id from ``sacct -P`` output (later rows win: requeues); with
    ``wanted``, of those ids only, a bare array row answering for each wanted task of it
    that no row names."""
    # Tasks cancelled before they started share one row: 123_[0-1], or the bare 123 when
    # cancelled before the split; a task's own row wins over a range that lists it.
    rows = _rows(text, columns)
    by_id = _rows_by_id(rows)
    bare: Dict[str, Mapping[str, str]] = {}
    for row in rows:
        job_id = normalize_job_id(row.get("id", ""))
        if "[" in job_id:
            continue
        if job_id:
            by_id[job_id] = row
        if "_" not in job_id and row.get("raw_id", job_id) == job_id:
            bare[job_id] = row
    if wanted is None:
        return _statuses(by_id, by_id, zone)
    for job_id in wanted:
        base, task = split_job_id(job_id)
        if task is not None and job_id not in by_id and base in bare:
            by_id[job_id] = bare[base]
    return _statuses(by_id, wanted, zone)


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


def job_status(
    job_id: str,
    native: str,
    exit_code: Optional[int],
    start: Optional[datetime],
    end: Optional[datetime],
    reason: str,
    raw_id: str,
    state: Optional[JobState] = None,
) -> JobStatus:
    """A status from Slurm's fields, as either driver reads them (``state``: ``native``
    mapped, when the caller already did)."""
    state = map_state(native) if state is None else state
    terminal = state.is_terminal
    exit_code, start, reason = _settled(
        state,
        exit_code if terminal else None,
        # squeue's StartTime of a pending job is a forecast, a running one's EndTime start+limit
        start if state.rank >= 1 else None,
        _clean_reason(reason),
    )
    return JobStatus(
        job_id=job_id,
        state=state,
        exit_code=exit_code,
        start_time=start,
        end_time=end if terminal else None,
        native_state=native,
        reason=reason,
        extra={"raw_id": raw_id} if raw_id else {},
    )


def _status_from_row(job_id: str, row: Mapping[str, str], zone: Optional[tzinfo]) -> JobStatus:
    native = row.get("state", "")
    state = map_state(native)
    rank = state.rank
    exit_code = start = end = None  # read only where job_status keeps them
    if rank >= 1:
        start = parse_time(row.get("start", ""), zone)
    if rank >= 2:
        end = parse_time(row.get("end", ""), zone)
        if "exit_code" in row:
            exit_code = parse_exit_code(row["exit_code"])
        else:
            exit_code = parse_wait_status(row.get("wait_status", ""))
    reason, raw_id = row.get("reason", ""), row.get("raw_id", "")
    return job_status(job_id, native, exit_code, start, end, reason, raw_id, state)


def _rows_by_id(rows: Sequence[Mapping[str, str]]) -> Dict[str, Mapping[str, str]]:
    """The row answering for each id (later rows win): a range row (``13_[5-6%2]``) for
    each of its tasks, a running task's row for its own job id too."""
    found: Dict[str, Mapping[str, str]] = {}
    for row in rows:
        shown = normalize_job_id(row.get("id", ""))
        for job_id in expand_job_id(shown):
            found[job_id] = row
        raw = row.get("raw_id", "")
        if raw and "_" in shown:
            base, task = split_job_id(shown)
            if task is not None and raw != base and raw not in found:
                # a running array task also answers to its own plain id (its SLURM_JOB_ID)
                found[raw] = row
    return found


def _statuses(
    by_id: Mapping[str, Mapping[str, str]], job_ids: Iterable[str], zone: Optional[tzinfo]
) -> Dict[str, JobStatus]:
    """The statuses of those of ``job_ids`` that have a row: only those rows are read."""
    made = _Made(zone)
    return {job_id: made.of_row(job_id, by_id[job_id]) for job_id in job_ids if job_id in by_id}


class _Made:
    """The statuses of one output's rows, each distinct row (its ids aside) read once:
    the jobs of a round mostly share their state, reason, times and exit code."""

    def __init__(self, zone: Optional[tzinfo]) -> None:
        self.zone = zone
        self.by_row: Dict[Tuple[Optional[str], ...], JobStatus] = {}
        #: by what a line holds past its two ids
        self.by_tail: Dict[str, JobStatus] = {}

    def of_row(self, job_id: str, row: Mapping[str, str]) -> JobStatus:
        key = tuple(row.get(column) for column in _STATUS_COLUMNS)
        template = self.by_row.get(key)
        if template is None:
            template = self.by_row[key] = self._template(row)
        return _given(template, job_id, row.get("raw_id", ""))

    def of_line(self, job_id: str, line: str, columns: Sequence[str]) -> Optional[JobStatus]:
        """The same from an output line (``columns``: the two ids first); ``None``: too
        few cells."""
        _, _, rest = line.partition("|")
        raw_id, _, tail = rest.partition("|")
        template = self.by_tail.get(tail)
        if template is None:
            cells = _cells(line, len(columns))
            if cells is None:
                return None
            template = self.by_tail[tail] = self._template(
                dict(zip(columns, map(str.strip, cells)))
            )
        return _given(template, job_id, raw_id.strip())

    def _template(self, row: Mapping[str, str]) -> JobStatus:
        return _status_from_row("", {**row, "raw_id": ""}, self.zone)


def _given(template: JobStatus, job_id: str, raw_id: str) -> JobStatus:
    """A row's status: its template's, with the row's ids."""
    return template.with_(job_id=job_id, extra={"raw_id": raw_id} if raw_id else {})


#: the columns a status is read from: ``_status_from_row``'s, but the ids
_STATUS_COLUMNS = ("state", "reason", "start", "end", "exit_code", "wait_status")


def parse_squeue(
    text: str,
    columns: Sequence[str] = SQUEUE_COLUMNS,
    zone: Optional[tzinfo] = None,
    wanted: Optional[Sequence[str]] = None,
) -> Dict[str, JobStatus]:
    """Statuses by job id from ``squeue_argv`` output (or any ``|`` format whose ``columns``
    are among ``id raw_id state reason start end wait_status exit_code``); with
    ``wanted``, of those ids only: a row of another id is not read past its id."""
    if wanted is None or tuple(columns[:2]) != ("id", "raw_id"):
        by_id = _rows_by_id(_rows(text, columns))
        return _statuses(by_id, by_id if wanted is None else wanted, zone)
    asked = set(wanted)
    bases = {job_id.partition("_")[0] for job_id in asked}
    made = _Made(zone)
    found: Dict[str, JobStatus] = {}
    arrays: List[str] = []  # ranges, tasks and their raw ids: the general reading
    for line in text.splitlines():
        shown, _, rest = line.partition("|")
        shown = shown.strip()
        if shown in asked:  # a job's own row (a plain id is never a task's nor a range's)
            status = made.of_line(shown, line, columns)
            if status is not None:
                found[shown] = status
        elif "_" in shown or "[" in shown or ";" in shown:
            # an array asked about, by one of its tasks or by a task's own (raw) id
            base = normalize_job_id(shown).partition("_")[0]
            if base in bases or rest.partition("|")[0].strip() in asked:
                arrays.append(line)
    if arrays:
        by_id = _rows_by_id(_rows("\n".join(arrays), columns))
        left = [job_id for job_id in wanted if job_id not in found and job_id in by_id]
        found.update(_statuses(by_id, left, zone))
    return {job_id: found[job_id] for job_id in dict.fromkeys(wanted) if job_id in found}


def _cells(line: str, count: int, separator: str = "|") -> Optional[List[str]]:
    """One line's ``count`` cells, as ``_rows`` reads them (``None``: too few)."""
    cells = line.split(separator)
    if len(cells) == count + 1 and cells[-1].strip() == "":
        cells.pop()  # the suffix of the last --Format field
    if len(cells) < count:
        return None
    if len(cells) > count:  # a separator inside the last column (a job name)
        cells = cells[: count - 1] + [separator.join(cells[count - 1 :])]
    return cells
