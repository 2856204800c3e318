"""Slurm job ids (``123``, ``123_4``, ``123_[5-9%2]``) and array specs; squeue and sacct: one
command line each for many ids, Slurm's states, exit codes and times, and the parsers.
Pure, no I/O; tested against outputs of a real Slurm 22.05 (tests/data/slurm/)."""

from __future__ import annotations

import functools
import re
from datetime import datetime, tzinfo
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ...model import CANCELLED_WHILE_PENDING, JobState, JobStatus

_TASK_ID = re.compile(r"^(?P<base>\d+)_(?P<task>\d+)$")
_BRACKETED = re.compile(r"^(?P<base>\d+)_\[(?P<spec>[^\]]*)\]$")
_SPEC_ITEM = re.compile(r"^(?P<first>\d+)(?:-(?P<last>\d+)(?::(?P<step>\d+))?)?$")


def normalize_job_id(job_id: object) -> str:
    """``123``, ``"123;cluster"``, ``" 123_4 "`` -> ``"123"`` / ``"123_4"``."""
    text = str(job_id).strip()
    if ";" not in text:  # the usual case, on every row of squeue and sacct
        return text
    return text.split(";", 1)[0].strip()


#: what a user may name a job by: a job (``123``) or an array task (``123_4``)
_TYPED_ID = re.compile(r"^\d+(?:_\d+)?$")


def job_id_of(text: object) -> str:
    """A job id as a user types it (``123``, ``123_4``, ``123;cluster``), as recorded;
    ``ValueError`` for text that is no Slurm job id (squeue's failure would read as a
    controller that cannot be asked)."""
    if type(text) is str and text.isdecimal():
        return text  # the usual case: nothing to normalize
    job_id = normalize_job_id(text)
    if not (job_id.isdecimal() or _TYPED_ID.match(job_id)):
        raise ValueError(
            f"{str(text).strip()!r} is not a Slurm job id (expected a number such as 123, "
            "or 123_4 for a task of an array)"
        )
    return job_id


def split_job_id(job_id: str) -> Tuple[str, Optional[int]]:
    """``"123_4"`` -> ``("123", 4)``; ``"123"`` -> ``("123", None)``."""
    if "_" not in job_id:
        return job_id, None
    match = _TASK_ID.match(job_id)
    if match:
        return match.group("base"), int(match.group("task"))
    return job_id, None


def expand_array_spec(spec: str) -> List[int]:
    """Task indices of an array spec: ``3-6%2`` (throttle ignored), ``[1,3,5-7]``,
    ``0-15:4``; a malformed spec gives an empty list."""
    spec = spec.strip()
    if spec.startswith("[") and spec.endswith("]"):
        spec = spec[1:-1]
    spec = spec.split("%", 1)[0]
    indices: List[int] = []
    for item in spec.split(","):
        match = _SPEC_ITEM.match(item.strip())
        if not match:
            return []
        first = int(match.group("first"))
        last = int(match.group("last") or first)
        step = int(match.group("step") or 1)
        if last < first or step < 1:
            return []
        indices.extend(range(first, last + 1, step))
    return indices


def expand_job_id(text: str) -> List[str]:
    """Every id a squeue/sacct job id column stands for: ``123_[4-9]`` (an array's waiting
    tasks, one row) as ``123_4`` ... ``123_9``."""
    text = normalize_job_id(text)
    if "[" not in text:
        return [text] if text else []
    match = _BRACKETED.match(text)
    if match:
        base = match.group("base")
        return [f"{base}_{index}" for index in expand_array_spec(match.group("spec"))]
    return [text] if text else []


def job_list(job_ids: Sequence[str], collapse_over: int = 50) -> List[str]:
    """The ``--jobs`` list for many ids, deduplicated; an array with more than
    ``collapse_over`` tasks asked is named by its id alone (then all its tasks are listed)."""
    ordered = list(dict.fromkeys(job_ids))
    by_array: Dict[str, List[str]] = {}
    for job_id in ordered:
        base, task = split_job_id(job_id)
        if task is not None:
            by_array.setdefault(base, []).append(job_id)
    collapsed = {base for base, tasks in by_array.items() if len(tasks) > collapse_over}
    if not collapsed:
        return ordered
    entries = (
        base if task is not None and base in collapsed else job_id
        for job_id, (base, task) in zip(ordered, map(split_job_id, ordered))
    )
    return list(dict.fromkeys(entries))


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


# -- the commands ------------------------------------------------------------------

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


#: past this many ``--jobs`` entries, squeue lists the user's jobs (``--me``) instead:
#: the same question to slurmctld (every job), a cheaper filter in squeue
BY_USER_OVER = 50


def by_user(job_ids: Sequence[str]) -> bool:
    """Whether ``squeue_argv`` lists the user's jobs (``--me``) for these ids: a job of
    another user is then found by its id only (``squeue_argv(ids, by_id=True)``)."""
    return len(job_list(job_ids)) > BY_USER_OVER


def squeue_argv(job_ids: Sequence[str], by_id: bool = False) -> List[str]:
    """One squeue for many ids (one row per pending array task): by their ids, or
    (unless ``by_id``) every job of the user's where ``by_user``."""
    # Without --states=all a finished job (kept for MinJobAge) prints no row.
    # squeue 22.05 matches each job against every id given: 500 ids cost it ~3 ms more.
    fields = ",".join(f"{name}:0|" for name, _ in SQUEUE_FIELDS)
    entries = job_list(job_ids)
    by_me = len(entries) > BY_USER_OVER and not by_id
    selection = "--me" if by_me else f"--jobs={','.join(entries)}"
    return [
        "squeue",
        "--noheader",
        "--array",
        "--states=all",
        selection,
        f"--Format={fields}",
    ]


#: squeue --only-job-state (the light REQUEST_JOB_STATE RPC) came in Slurm 23.11.5
ONLY_JOB_STATE_SINCE = (23, 11, 5)


def squeue_state_argv(job_ids: Sequence[str]) -> List[str]:
    """squeue through the light RPC: only each job's id and state."""
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


def sacct_argv(job_ids: Sequence[str], fields: Optional[Sequence[str]] = None) -> List[str]:
    """One sacct for the ids squeue no longer knows (an id it never saw: no row, exit 0);
    ``fields``: other columns than the status round's (a charge's)."""
    # -P: fixed columns truncate (CANCELLED+); -X: the allocation's own row (what Slurm
    # charged), no .batch/.extern step rows.
    columns = fields if fields is not None else [name for name, _ in SACCT_FIELDS]
    return [
        "sacct",
        "-X",
        "-P",
        "--noheader",
        f"--jobs={','.join(job_list(job_ids))}",
        f"--format={','.join(columns)}",
    ]


def array_ids(job_ids: Sequence[str]) -> List[str]:
    """The arrays' own ids of the tasks among ``job_ids`` (``123_4`` -> ``123``)."""
    return list(
        dict.fromkeys(base for base, task in map(split_job_id, job_ids) if task is not None)
    )


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
