"""Slurm's command lines and their outputs: pure builders and parsers, no I/O.

Everything here is tested against outputs recorded from a real Slurm 22.05
(``tests/data/slurm/``).  The runner that executes these argvs is ``cli.py``;
the pyslurm driver (``native.py``) reuses the state map and id helpers.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ...durations import format_slurm_time
from ...model import JobState, JobStatus
from ...resources import Resources

# -- the state map -------------------------------------------------------------

#: Every Slurm job state (long form, as squeue %T / sacct State print it).
STATE_MAP: Dict[str, JobState] = {
    "PENDING": JobState.PENDING,
    "CONFIGURING": JobState.PENDING,
    "REQUEUED": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "NODE_FAIL": JobState.FAILED,
    "BOOT_FAIL": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    "LAUNCH_FAILED": JobState.FAILED,
    # A preempted job that is requeued shows REQUEUED instead, so PREEMPTED
    # as a final state means the job was killed and will not come back.
    "PREEMPTED": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    # Federation: the sibling that did not run the job.
    "REVOKED": JobState.CANCELLED,
    "TIMEOUT": JobState.TIMEOUT,
    "DEADLINE": JobState.TIMEOUT,
}

#: The compact codes (squeue %t), accepted too: some sites set SQUEUE_FORMAT.
COMPACT_STATES: Dict[str, str] = {
    "PD": "PENDING",
    "CF": "CONFIGURING",
    "RQ": "REQUEUED",
    "RF": "REQUEUE_FED",
    "RH": "REQUEUE_HOLD",
    "RD": "RESV_DEL_HOLD",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "SO": "STAGE_OUT",
    "SI": "SIGNALING",
    "S": "SUSPENDED",
    "ST": "STOPPED",
    "RS": "RESIZING",
    "CD": "COMPLETED",
    "F": "FAILED",
    "NF": "NODE_FAIL",
    "BF": "BOOT_FAIL",
    "OOM": "OUT_OF_MEMORY",
    "SE": "SPECIAL_EXIT",
    "LF": "LAUNCH_FAILED",
    "PR": "PREEMPTED",
    "CA": "CANCELLED",
    "RV": "REVOKED",
    "TO": "TIMEOUT",
    "DL": "DEADLINE",
}


def map_state(native: str) -> JobState:
    """Our state for Slurm's words; UNKNOWN (never a guess) for anything new.

    sacct prints ``CANCELLED by 0`` (the uid that cancelled), and its default
    column width truncates to ``CANCELLED+``: only the first word counts.
    """
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


# -- exit codes and times ----------------------------------------------------------


def parse_exit_code(text: str) -> Optional[int]:
    """``N:S`` (sacct ExitCode, scontrol ExitCode) -> N, or 128+S when signalled."""
    text = text.strip()
    match = re.fullmatch(r"(\d+)(?::(\d+))?", text)
    if not match:
        return None
    code = int(match.group(1))
    signal = int(match.group(2) or 0)
    return 128 + signal if signal else code


def parse_wait_status(text: str) -> Optional[int]:
    """squeue's ``exit_code`` field: the raw wait(2) status, not ``N:S``.

    Quirk: ``squeue -O exit_code`` prints ``768`` for ``exit 3`` (3 << 8) and
    ``9`` for a job killed by SIGKILL, where sacct prints ``3:0`` and ``0:9``.
    """
    text = text.strip()
    if ":" in text:
        return parse_exit_code(text)
    if not text.isdigit():
        return None
    status = int(text)
    signal = status & 0x7F
    if signal:
        return 128 + signal
    return (status >> 8) & 0xFF


_NO_TIME = {"", "unknown", "none", "n/a", "(null)", "0"}


def parse_time(text: str, zone: Optional[tzinfo] = None) -> Optional[datetime]:
    """A Slurm timestamp as an aware datetime; ``None`` for Unknown/None/N/A.

    Slurm prints local time without a zone (``2026-11-29T15:32:57``): it is
    read in ``zone``, by default this machine's local zone.
    """
    text = text.strip()
    if text.lower() in _NO_TIME:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is not None:
        return moment
    if zone is not None:
        return moment.replace(tzinfo=zone)
    return moment.astimezone()  # a naive time is local time: attach the local zone


# -- job ids and arrays ----------------------------------------------------------

_TASK_ID = re.compile(r"^(?P<base>\d+)_(?P<task>\d+)$")
_BRACKETED = re.compile(r"^(?P<base>\d+)_\[(?P<spec>[^\]]*)\]$")
_SPEC_ITEM = re.compile(r"^(?P<first>\d+)(?:-(?P<last>\d+)(?::(?P<step>\d+))?)?$")


def parse_sbatch_id(stdout: str) -> str:
    """The job id from ``sbatch --parsable``: ``id`` or ``id;cluster``."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        match = re.fullmatch(r"(\d+(?:_\d+)?)(?:;\S+)?", line)
        if match:
            return match.group(1)
        match = re.fullmatch(r"Submitted batch job (\d+)(?: on cluster \S+)?", line)
        if match:  # without --parsable (a site wrapper may drop the flag)
            return match.group(1)
    raise ValueError(f"no job id in sbatch output {stdout.strip()[:200]!r}")


def normalize_job_id(job_id: object) -> str:
    """``123``, ``"123;cluster"``, ``" 123_4 "`` -> ``"123"`` / ``"123_4"``."""
    text = str(job_id).strip()
    return text.split(";", 1)[0].strip()


def split_job_id(job_id: str) -> Tuple[str, Optional[int]]:
    """``"123_4"`` -> ``("123", 4)``; ``"123"`` -> ``("123", None)``."""
    match = _TASK_ID.match(job_id)
    if match:
        return match.group("base"), int(match.group("task"))
    return job_id, None


def expand_array_spec(spec: str) -> List[int]:
    """Task indices of an array spec: ``3-6%2``, ``[1,3,5-7]``, ``0-15:4``.

    ``%N`` (the throttle) is ignored; a malformed spec gives an empty list.
    """
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
    """Every id a squeue/sacct job id column stands for.

    A pending array is shown once for all its waiting tasks, as
    ``123_[4-9]`` or, throttled, ``123_[4-9%2]``: each task must be
    answerable on its own, so the range is expanded to ``123_4`` ... ``123_9``.
    """
    text = normalize_job_id(text)
    match = _BRACKETED.match(text)
    if match:
        base = match.group("base")
        return [f"{base}_{index}" for index in expand_array_spec(match.group("spec"))]
    return [text] if text else []


def array_task_ids(array_id: str, count: int) -> List[str]:
    """The ids of the tasks of ``sbatch --array=0-<count-1>``."""
    return [f"{array_id}_{index}" for index in range(count)]


def job_list(job_ids: Sequence[str], collapse_over: int = 50) -> List[str]:
    """The ``--jobs`` list for many ids, deduplicated.

    When more than ``collapse_over`` tasks of one array are asked, the array
    id alone is passed (squeue and sacct then list all its tasks): a short
    command line even for thousands of tasks.
    """
    ordered = list(dict.fromkeys(job_ids))
    by_array: Dict[str, List[str]] = {}
    for job_id in ordered:
        base, task = split_job_id(job_id)
        if task is not None:
            by_array.setdefault(base, []).append(job_id)
    collapsed = {base for base, tasks in by_array.items() if len(tasks) > collapse_over}
    result: List[str] = []
    for job_id in ordered:
        base, task = split_job_id(job_id)
        entry = base if task is not None and base in collapsed else job_id
        if entry not in result:
            result.append(entry)
    return result


# -- sbatch ------------------------------------------------------------------------


@dataclass(frozen=True)
class SubmitSpec:
    """One sbatch call, scheduler-side paths already decided."""

    wrapper_path: str
    workdir: str
    output: str
    job_name: str
    resources: Resources
    depends_on: Tuple[str, ...] = ()
    #: ``"0-199"`` for a job array, else ``None``
    array: Optional[str] = None


def dependency_text(depends_on: Iterable[str]) -> Optional[str]:
    ids = [normalize_job_id(job_id) for job_id in depends_on]
    return "afterok:" + ":".join(ids) if ids else None


def sbatch_argv(spec: SubmitSpec) -> List[str]:
    """``sbatch --parsable`` with every directive as a flag, then the wrapper.

    The wrapper carries no ``#SBATCH`` lines: what is asked is exactly what is
    on this command line (and what ``describe_submission`` shows).
    """
    resources = spec.resources
    argv = ["sbatch", "--parsable"]
    if resources.partition:
        argv.append(f"--partition={resources.partition}")
    if resources.qos:
        argv.append(f"--qos={resources.qos}")
    if resources.account:
        argv.append(f"--account={resources.account}")
    if resources.constraint:
        argv.append(f"--constraint={resources.constraint}")
    if resources.time is not None:
        argv.append(f"--time={format_slurm_time(resources.time)}")
    if resources.nodes is not None:
        argv.append(f"--nodes={resources.nodes}")
    if resources.ntasks is not None:
        argv.append(f"--ntasks={resources.ntasks}")
    if resources.cpus_per_task is not None:
        argv.append(f"--cpus-per-task={resources.cpus_per_task}")
    if resources.mem:
        argv.append(f"--mem={resources.mem}")
    if resources.gpus:  # omitted when 0: --gpus=0 is refused on clusters without GRES
        argv.append(f"--gpus={resources.gpus}")
    argv.append(f"--job-name={spec.job_name}")
    argv.append(f"--output={spec.output}")
    argv.append(f"--chdir={spec.workdir}")
    dependency = dependency_text(spec.depends_on)
    if dependency:
        argv.append(f"--dependency={dependency}")
        # Without this a child whose parent failed stays PENDING
        # (DependencyNeverSatisfied) forever, and a wait on it never ends.
        argv.append("--kill-on-invalid-dep=yes")
    if spec.array:
        argv.append(f"--array={spec.array}")
    argv.append(spec.wrapper_path)
    return argv


def describe_argv(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(part) for part in argv)


_PREFIX = re.compile(
    r"^(?:sbatch|squeue|sacct|scancel|scontrol|srun|salloc):\s*(?:error|fatal):\s*"
)


def scheduler_message(text: str) -> str:
    """Slurm's own words: ``sbatch: error: `` prefixes stripped, the text kept.

    Warnings (``sbatch: warning: ...``) are dropped when errors are present.
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [_PREFIX.sub("", line) for line in lines if _PREFIX.match(line)]
    chosen = errors or lines
    return "; ".join(chosen)


#: sbatch messages after which the job may exist although sbatch failed
UNCERTAIN_SUBMISSION = ("Socket timed out on send/recv operation",)


# -- squeue --------------------------------------------------------------------------

#: ``squeue --Format`` fields.  Each is ``Name:0|``: width 0 = never truncated,
#: ``|`` the suffix that separates them.  ``--Format`` rather than ``--format``
#: because only it has ``exit_code``.  Quirk: despite its man page ("the base
#: job ID"), JobArrayID prints ``123_4`` for a task and ``123_[5-9%2]`` for the
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


def squeue_argv(job_ids: Sequence[str]) -> List[str]:
    """One squeue for many ids, finished ones included (``--states=all``).

    Quirks: without ``--states=all`` a finished job (kept for MinJobAge) prints
    no row; ``squeue -j <one purged id>`` exits 1 with "Invalid job id
    specified" while a list with the id twice exits 0 with no row - so a single
    id is passed twice.  ``--array`` prints one row per pending array task.
    """
    ids = job_list(job_ids)
    if len(ids) == 1:
        ids = ids * 2
    fields = ",".join(f"{name}:0|" for name, _ in SQUEUE_FIELDS)
    return [
        "squeue",
        "--noheader",
        "--array",
        "--states=all",
        f"--jobs={','.join(ids)}",
        f"--Format={fields}",
    ]


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
        row = {column: cell.strip() for column, cell in zip(columns, cells)}
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
    return JobStatus(
        job_id=job_id,
        state=state,
        exit_code=exit_code,
        start_time=start,
        end_time=end,
        native_state=native,
        reason=_clean_reason(row.get("reason", "")),
        extra=extra,
    )


def _statuses(
    text: str, columns: Sequence[str], zone: Optional[tzinfo], separator: str = "|"
) -> Dict[str, JobStatus]:
    found: Dict[str, JobStatus] = {}
    for row in _rows(text, columns, separator):
        for job_id in expand_job_id(row.get("id", "")):
            found[job_id] = _status_from_row(job_id, row, zone)
        raw = row.get("raw_id", "")
        base, task = split_job_id(normalize_job_id(row.get("id", "")))
        if raw and task is not None and raw != base and raw not in found:
            # A running array task also has its own plain job id (what
            # SLURM_JOB_ID says inside it): answer to that one too.
            found[raw] = _status_from_row(raw, row, zone)
    return found


def parse_squeue(
    text: str, columns: Sequence[str] = SQUEUE_COLUMNS, zone: Optional[tzinfo] = None
) -> Dict[str, JobStatus]:
    """Statuses by job id from ``squeue_argv`` output (or any ``|`` format).

    ``columns`` names each field: ``id`` (the ``%i``/JobArrayID form),
    ``raw_id``, ``state``, ``reason``, ``start``, ``end``, ``wait_status``
    (squeue's exit_code) or ``exit_code`` (``N:S``); others are ignored.
    """
    return _statuses(text, columns, zone)


def is_invalid_job_id(message: str) -> bool:
    """squeue's and scontrol's answer for a single purged or unknown id."""
    return "Invalid job id specified" in message


# -- sacct -----------------------------------------------------------------------------

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


def parse_sacct(
    text: str, columns: Sequence[str] = SACCT_COLUMNS, zone: Optional[tzinfo] = None
) -> Dict[str, JobStatus]:
    """Statuses by job id from ``sacct -P`` output (later rows win: requeues)."""
    return _statuses(text, columns, zone)


def accounting_disabled(message: str) -> bool:
    """sacct's answer on a cluster without slurmdbd (exit 1)."""
    lowered = message.lower()
    return "accounting storage is disabled" in lowered or "accounting_storage/none" in lowered


# -- scancel, scontrol -------------------------------------------------------------------


def scancel_argv(job_ids: Sequence[str]) -> List[str]:
    """scancel takes plain ids and array tasks; unknown or finished ids exit 0."""
    return ["scancel", *dict.fromkeys(job_ids)]


def scontrol_show_job_argv(job_id: str) -> List[str]:
    return ["scontrol", "--oneliner", "show", "job", job_id]


def parse_scontrol_record(text: str) -> Dict[str, str]:
    """``Key=Value`` pairs of a ``scontrol show`` record (one-line or not).

    Values may hold spaces only in a few fields (e.g. ``Comment``); the pairs
    are split at each `` Key=`` boundary.
    """
    pairs: Dict[str, str] = {}
    for match in re.finditer(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=(\S*)", text):
        pairs.setdefault(match.group(1), match.group(2))
    return pairs


def scontrol_config_argv() -> List[str]:
    return ["scontrol", "show", "config"]


def parse_scontrol_config(text: str) -> Dict[str, str]:
    """``scontrol show config``: ``Name = value`` lines."""
    values: Dict[str, str] = {}
    for line in text.splitlines():
        name, separator, value = line.partition("=")
        if separator and name.strip() and " " not in name.strip():
            values[name.strip()] = value.strip()
    return values


def max_array_size(config: Mapping[str, str], default: int = 1001) -> int:
    """``MaxArraySize``: an array may use indices 0 .. MaxArraySize-1."""
    text = config.get("MaxArraySize", "")
    match = re.match(r"\d+", text)
    return int(match.group(0)) if match else default


def parse_version(text: str) -> Optional[Tuple[int, ...]]:
    """``slurm-wlm 22.05.8`` / ``slurm 23.11.1`` -> ``(22, 5, 8)``."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        return None
    return tuple(int(part) for part in match.groups() if part is not None)


def format_version(version: Tuple[int, ...]) -> str:
    """``(22, 5, 8)`` -> ``22.05.8``, Slurm's own spelling."""
    parts = [str(version[0])] + [f"{version[1]:02d}"] + [str(p) for p in version[2:]]
    return ".".join(parts)


def output_for_task(
    pattern: str, job_id: str, array_id: str = "", task: str = "", job_name: str = ""
) -> str:
    """Expand the filename patterns sbatch knows: ``%j %A %a %x %%``."""
    replacements = {"j": job_id, "A": array_id or job_id, "a": task, "x": job_name, "%": "%"}

    def substitute(match: re.Match[str]) -> str:
        letter = match.group(1)
        value = replacements.get(letter)
        return match.group(0) if value is None or (letter == "a" and not task) else value

    return re.sub(r"%([jAax%])", substitute, pattern)
