"""slurmrestd's answers in the Slurm parsers' terms: its job records as the rows
``status.parse_sacct`` reads (so the states, exit codes, reasons and the array-task fill
are the CLI's), a submission's id, a cancel's verdict, the light states, and the data
parser version both sides speak.  Pure, no I/O; read against slurmrestd 25.11's data
parsers v0.0.41-v0.0.44 (tests/data/slurm-rest/)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ...engine.driver import Again, NotAskedNow
from ...errors import (
    JobTimeoutError,
    SchedulerAdapterError,
    SchedulerUnavailableError,
    SubmissionUncertainError,
)
from .cluster import parse_assoc, parse_qos
from .commands import refusal_error, transient
from .ids import KEY_PREFIX, split_job_id
from .pyslurm_records import waiting_indices
from .queries import NoHistory, Statuses
from .rest_requests import VERSIONS, RestRequest
from .status import SACCT_COLUMNS, STATE_MAP, cell, parse_sacct, sacct_lines, shown_ids


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: its status and its body (JSON parsed; text where it was none)."""

    status: int
    body: Any

    def errors(self) -> List[str]:
        """The answer's ``errors[]`` in Slurm's words (its body's text when it has none)."""
        if not isinstance(self.body, dict):
            return [str(self.body).strip()] if self.status >= 400 else []
        return [_words(item) for item in _list(self.body.get("errors"))]

    def message(self) -> str:
        return "; ".join(self.errors()) or f"HTTP {self.status}"


def lost_answer(request: RestRequest, lost: str, timed_out: bool) -> Answer:
    """A reply lost on the way back: a 504 of our own; for a submission (which may have
    gone in) ``SubmissionUncertainError``, or ``JobTimeoutError`` past its time."""
    text = f"{request.describe()}: {lost} (slurmrestd)"
    if request.method == "POST":
        raise (JobTimeoutError if timed_out else SubmissionUncertainError)(text)
    return Answer(504, text)


def reply_answer(status: int, body: Any) -> Answer:
    """An HTTP reply as an ``Answer``; a 503 in plain text is slurmrestd's own (slurmctld or
    slurmdbd never reached), and says so."""
    if status == 503 and isinstance(body, str):
        return Answer(503, f"slurmrestd: {body}")
    return Answer(status, body)


def _list(value: Any) -> List[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _whole(value: Any) -> Optional[int]:
    """An API number as a whole number (an id, an index); ``None`` unset or not one."""
    found = number(value)
    return int(found) if found is not None and 0 <= found < 2**63 else None


def _int(text: Any) -> int:
    return int(text) if str(text).isdecimal() else 0


def _words(item: Any) -> str:
    if not isinstance(item, dict):
        return str(item)
    error, description = item.get("error") or "", item.get("description") or ""
    return f"{description}: {error}" if error and description else error or description


def number(value: Any) -> Optional[float]:
    """An API number (``{set, infinite, number}`` or plain) -> its value; ``None`` unset."""
    if isinstance(value, dict):
        if not value.get("set", True):
            return None
        if value.get("infinite"):
            return float("inf")
        value = value.get("number")
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def exit_text(value: Any) -> str:
    """``{status[], return_code, signal{id}}`` as sacct's ``ExitCode`` (``N:S``); empty
    when unknown."""
    code, signal = number(_at(value, "return_code")), number(_at(value, "signal.id"))
    if code is None and not signal or not 0 <= (code or 0) + (signal or 0) < 2**32:
        return ""
    return f"{int(code or 0)}:{int(signal or 0)}"


#: the flags squeue shows instead of a job's base state, first first (job_state_string)
_SHOWN_OVER_BASE = (
    "COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED",
    "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING",
)  # fmt: skip


def state_word(states: Any) -> str:
    """A ``job_state`` list (``["RUNNING", "COMPLETING"]``) as squeue's one word."""
    words = [str(word) for word in states] if isinstance(states, list) else [str(states or "")]
    known = [flag for flag in _SHOWN_OVER_BASE if flag in words]
    known = known or [word for word in words if word in STATE_MAP]
    return known[0] if known else (words[0] if words else "")


#: slurmdbd's start of a job that never started: NO_VAL (0xfffffffe), not a time
_NO_VAL = 0xFFFFFFFE


def _time(value: Any) -> str:
    seconds = number(value)
    if not seconds or not 0 < seconds < _NO_VAL:
        return "Unknown"
    return datetime.fromtimestamp(seconds).astimezone().isoformat()


#: where slurmctld's records (``job_state``...) and slurmdbd's (``state.current``...) keep
#: each field
_PLACES = {
    "raw": ("job_id", "job_id"), "array": ("array_job_id", "array.job_id"),
    "task": ("array_task_id", "array.task_id"), "waiting": ("array_task_string", "array.task"),
    "state": ("job_state", "state.current"), "start": ("start_time", "time.start"),
    "end": ("end_time", "time.end"), "exit": ("exit_code", "exit_code"),
    "reason": ("state_reason", "state.reason"), "comment": ("comment", "comment.job"),
}  # fmt: skip


def _at(item: Any, place: str) -> Any:
    """``item``'s value at ``place`` (``state.current``); ``None`` where it has none."""
    for part in place.split("."):
        item = _dict(item).get(part)
    return item


def _record(job: Mapping[str, Any]) -> Dict[str, Any]:
    """A job record of slurmctld or slurmdbd in one shape: ids, state word, times, exit
    code, reason, comment."""
    found = {name: _at(job, places["job_state" not in job]) for name, places in _PLACES.items()}
    found.update(raw=str(found["raw"] or ""), array=_whole(found["array"]) or 0)
    found.update(task=_whole(found["task"]), state=state_word(found["state"]))
    return found


def sacct_rows(jobs: Iterable[Mapping[str, Any]], history: bool = False) -> str:
    """REST job records as ``sacct -X -P`` would print them (``status.SACCT_COLUMNS``)."""
    return sacct_lines(_row_of(_record(job), history) for job in jobs)


def _row_of(record: Mapping[str, Any], history: bool) -> Tuple[Dict[str, str], List[str]]:
    fields = {"raw_id": record["raw"], "state": cell(record["state"])}
    fields.update(exit_code=exit_text(record["exit"]), reason=cell(record["reason"]))
    fields.update(start=_time(record["start"]), end=_time(record["end"]))
    tasks = [str(index) for index in waiting_indices(str(record["waiting"] or ""))]
    array = str(record["array"] or "")
    return fields, shown_ids(record["raw"], array, record["task"], tasks, history)


def _jobs(answer: Answer, key: str = "jobs") -> List[Mapping[str, Any]]:
    """The answer's records (its ``jobs``, ``associations``, ``qos``)."""
    return [item for item in _list(_dict(answer.body).get(key)) if isinstance(item, dict)]


# -- the answers, one parser each ------------------------------------------------------


def _unreached(answer: Answer) -> bool:
    """slurmrestd could not reach slurmctld (restarting, busy): ask again."""
    return answer.status in (502, 503, 504) or transient(answer.message())


def live_answer(answer: Answer, wanted: Sequence[str]) -> Statuses:
    """``GET /slurm/{v}/jobs/`` or ``/job/{id}``: the statuses of ``wanted``; none for a
    purged id (404, "Invalid job id specified")."""
    if answer.status == 404 and "Invalid job id" in answer.message():
        return {}
    if answer.status >= 400 or answer.errors():
        failure = NotAskedNow(f"slurmrestd: the queue could not be read: {answer.message()}")
        raise Again(answer.message(), failure) if _unreached(answer) else failure
    return parse_sacct(sacct_rows(_jobs(answer)), SACCT_COLUMNS, wanted=wanted)


def history_answer(answer: Answer, wanted: Sequence[str]) -> Statuses:
    """``GET /slurmdb/{v}/jobs/``: the statuses of ``wanted``; ``NoHistory`` without
    slurmdbd (404: no ``slurmdb/`` paths) or when it failed."""
    if answer.status >= 400 or answer.errors():
        raise NoHistory(f"slurmrestd: no job history: {answer.message()}", answer.status == 404)
    return parse_sacct(sacct_rows(_jobs(answer), history=True), SACCT_COLUMNS, wanted=wanted)


def task_aliases(last: Mapping[str, Any]) -> Dict[str, str]:
    """A running task's own job id -> its ``array_task`` id, of the last answers (their
    statuses): 25.11's ``jobs/state`` names a task split off its array by its own job id."""
    return {s.extra["raw_id"]: i for i, s in last.items() if "_" in i and s.extra.get("raw_id")}


def states_answer(answer: Answer, aliases: Mapping[str, str] = {}) -> Dict[str, str]:
    """``GET /slurm/{v}/jobs/state/``: job id -> squeue's state word.  ``aliases``: a
    running task's own job id -> its ``array_task`` id, from earlier full answers."""
    if answer.status >= 400 or answer.errors():
        failure = NotAskedNow(f"slurmrestd: job states could not be read: {answer.message()}")
        raise Again(answer.message(), failure) if _unreached(answer) else failure
    found: Dict[str, str] = {}
    for job in _jobs(answer):
        shown = str(job.get("job_id") or "")
        base, task = split_job_id(shown)
        # 25.11 names a task split off its array by its own id: 28_0 for 25_0
        if task is not None and base in aliases:
            shown = aliases[base]
        found[shown] = state_word(job.get("state"))
    return found


def submitted_answer(answer: Answer) -> str:
    """``POST /slurm/{v}/job/submit``: the job id, or the error Slurm's refusal means."""
    job_id = answer.body.get("job_id") if isinstance(answer.body, dict) else None
    if answer.status < 400 and not answer.errors() and job_id:
        return str(job_id)
    message = answer.message()
    error = refusal_error(message)(
        f"slurmrestd refused the job (HTTP {answer.status}): {message}",
        scheduler_message=message,
    )
    if answer.status in (502, 503) or "Unable to contact slurm controller" in message:
        raise Again(message, error)  # slurmrestd never reached slurmctld: nothing went in
    raise error


#: a cancel's errors that mean the job has ended or is gone: no failure
_ENDED = ("Invalid job id specified", "already completing or completed")


def cancel_answer(answer: Answer) -> None:
    """``DELETE /slurm/{v}/job/{id}``: a job already ended or purged is no failure
    (v0.0.41 says nothing of it; later ones list it in ``status[]``)."""
    listed = _list(answer.body.get("status")) if isinstance(answer.body, dict) else []
    problems = answer.errors() + [
        str(_dict(_dict(item).get("error")).get("message") or "") for item in listed
    ]
    problems = [text for text in problems if text and not any(end in text for end in _ENDED)]
    if answer.status >= 400 and not problems:
        problems = [answer.message()]
    if problems:
        raise SchedulerAdapterError(f"slurmrestd could not cancel: {'; '.join(problems)}")


def output_answer(answer: Answer) -> Optional[str]:
    """``GET /slurm/{v}/job/{id}``: where the job writes its output, if known (from
    v0.0.43 ``stdout_expanded``; before, ``standard_output`` came expanded)."""
    job = (_jobs(answer) if answer.status < 400 else None) or [{}]
    return job[0].get("stdout_expanded") or job[0].get("standard_output") or None


def keys_answer(answer: Answer, keys: Iterable[str]) -> Dict[str, str]:
    """key -> the job (an array's own id) whose comment carries it, of jobs in any list
    (the newest, should two carry it)."""
    wanted = {KEY_PREFIX + key: key for key in keys}
    found: Dict[str, str] = {}
    for job in _jobs(answer):
        record = _record(job)
        key = wanted.get(str(record["comment"]))
        job_id = str(record["array"] or record["raw"])
        if key is not None and _int(job_id) >= _int(found.get(key, "0")):
            found[key] = job_id
    return found


def _sacctmgr_cell(value: Any) -> str:
    """A field as sacctmgr prints it (a number unset or infinite: empty; a list: ``a,b``)."""
    if isinstance(value, (str, list)):
        return ",".join(value) if isinstance(value, list) else value
    return "" if _whole(value) is None else str(_whole(value))


def caps_answer(assoc: Answer, qos: Answer, account: Optional[str]) -> Optional[int]:
    """``/slurmdb/{v}/associations/`` and ``/qos/`` as sacctmgr's rows, read by its rule
    (``cluster.parse_assoc``, ``parse_qos``): the smallest cap on queued jobs, ``None``
    where none is known (v0.0.41 leaves out a QOS's GrpSubmitJobs)."""
    if assoc.status >= 400 or assoc.errors():
        return None
    cluster = _at(assoc.body, "meta.slurm.cluster")
    caps, names = parse_assoc(_rows(assoc, "associations"), cluster, account)
    return min(caps + parse_qos(_rows(qos, "qos"), names), default=None)


#: sacctmgr's columns (``cluster.ASSOC_FIELDS``, ``QOS_FIELDS``) in slurmdbd's records
_SACCTMGR = {
    "associations": "cluster account max.jobs.total max.jobs.per.submitted default.qos qos",
    "qos": "name limits.max.jobs.per.user limits.max.jobs.count",
}


def _rows(answer: Answer, key: str) -> str:
    """The answer's records as sacctmgr's ``--parsable2`` rows."""
    rows = [[_at(item, place) for place in _SACCTMGR[key].split()] for item in _jobs(answer, key)]
    return "\n".join("|".join(map(_sacctmgr_cell, row)) for row in rows)


def config_answer(answer: Answer) -> Dict[str, str]:
    """Any answer's ``meta``: the cluster's name, as slurm.conf's ``ClusterName``."""
    name = _at(answer.body, "meta.slurm.cluster")
    return {"ClusterName": str(name)} if name else {}


# -- which version ---------------------------------------------------------------------


def spoken_versions(answer: Answer) -> List[str]:
    """The data parser versions the daemon's ``/openapi/v3`` lists (``/slurm/{v}/...``)."""
    paths = _dict(answer.body.get("paths") if isinstance(answer.body, dict) else None)
    found = {path.split("/")[2] for path in paths if str(path).startswith("/slurm/v")}
    return sorted(found, key=_version_key, reverse=True)


def choose_version(spoken: Sequence[str], wanted: str = "") -> str:
    """The newest version both sides speak (``wanted``: that one, checked); a clear
    ``SchedulerUnavailableError`` when there is none."""
    if wanted and wanted not in VERSIONS:
        raise SchedulerUnavailableError(
            f"HPCBRIDGE_SLURM_REST_VERSION={wanted} is not a version hpcbridge speaks "
            f"({', '.join(VERSIONS)}): unset it to take the newest both sides speak"
        )
    candidates = [wanted] if wanted else VERSIONS
    common = [version for version in candidates if version in spoken]
    if not common:
        raise SchedulerUnavailableError(
            f"slurmrestd speaks {', '.join(spoken) or 'no Slurm API version'}; hpcbridge "
            f"speaks {wanted or ', '.join(VERSIONS)}: use a Slurm whose slurmrestd loads one "
            "of those data parsers (-d), or HPCBRIDGE_SLURM_DRIVER=cli"
        )
    return common[0]


def _version_key(version: str) -> tuple:
    parts = version.lstrip("v").split(".")
    return tuple(int(part) if part.isdigit() else -1 for part in parts)


def openapi_answer(answer: Answer) -> Answer:
    """``GET /openapi/v3`` as it came; ``Again`` while slurmrestd cannot be reached."""
    if _unreached(answer):
        message = f"slurmrestd cannot be reached: {answer.message()}"
        raise Again(message, SchedulerUnavailableError(message))
    return answer


def release(answer: Answer) -> Optional[str]:
    """Slurm's release from ``/openapi/v3`` (``25.11.7``), if it says."""
    return str(_at(answer.body, "info.x-slurm.release") or "") or None
