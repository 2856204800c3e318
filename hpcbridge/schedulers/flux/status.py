"""A Flux job's state from ``flux jobs``, its eventlog or the bindings (by state NAMES, never
the display abbreviations).  Pure.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set

from ...model import CANCELLED_WHILE_PENDING, JobState, JobStatus
from .ids import InvalidJobIdError, canonical_job_id


@dataclass
class JobFacts:
    """One job as Flux reports it; times are epoch seconds, ``None`` when not set."""

    id: str
    state: str = ""
    result: str = ""
    returncode: Optional[int] = None
    waitstatus: Optional[int] = None
    t_submit: Optional[float] = None
    t_run: Optional[float] = None
    t_cleanup: Optional[float] = None
    t_inactive: Optional[float] = None
    #: set only when an exception occurred (cancel, timeout, a failed dependency, ...)
    exception_type: str = ""
    exception_note: str = ""
    dependencies: List[str] = field(default_factory=list)
    reason_pending: str = ""
    #: the job's own expiration (a nested instance's time limit)
    expiration: Optional[float] = None
    #: the URI a nested instance published
    uri: str = ""


def number(value: Any) -> Optional[float]:
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def integer(value: Any) -> Optional[int]:
    found = number(value)
    return None if found is None or not math.isfinite(found) else int(found)  # "inf", 1e400


def facts_from_jobinfo(info: Any) -> JobFacts:
    """The facts of a ``flux.job.JobInfo`` (bindings; attributes may be missing)."""

    def get(name: str, default: Any = None) -> Any:
        try:
            value = getattr(info, name)
        except (AttributeError, KeyError):
            return default
        return default if value in ("", None) else value

    exception = get("exception")
    try:
        reason_pending = str(info.sched.reason_pending or "")
    except (AttributeError, KeyError):
        reason_pending = ""
    job: Dict[str, Any] = {name: get(name) for name in ("state", "result", *_NUMBERS)}
    job.update((name, number(job[name]) or None) for name in _TIMES)
    job.update(
        id=int(info.id),
        exception={
            "occurred": bool(getattr(exception, "occurred", False)),
            "type": getattr(exception, "type", ""),
            "note": getattr(exception, "note", ""),
        },
        dependencies=get("dependencies", []),
        annotations={
            "sched": {"reason_pending": "" if reason_pending == "None" else reason_pending}
        },
    )
    return facts_from_json(job)


#: the fields of ``JobFacts`` that are numbers, those that are times, those of a job's events
_EVENT_TIMES = ("t_submit", "t_run", "t_cleanup", "t_inactive")
_TIMES = (*_EVENT_TIMES, "expiration")
_NUMBERS = ("returncode", "waitstatus", *_TIMES)


_PENDING_STATES = {"NEW", "DEPEND", "PRIORITY", "SCHED"}
_RUNNING_STATES = {"RUN", "CLEANUP"}
_RESULTS = {
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "CANCELED": JobState.CANCELLED,
    "CANCELLED": JobState.CANCELLED,
    "TIMEOUT": JobState.TIMEOUT,
}


def state_from_names(state: str, result: str = "") -> JobState:
    """Our state from Flux's state name and (when inactive) result name."""
    state = (state or "").strip().upper()
    result = (result or "").strip().upper()
    if state in _PENDING_STATES:
        return JobState.PENDING
    if state in _RUNNING_STATES:
        return JobState.RUNNING
    if state == "INACTIVE":
        return _RESULTS.get(result, JobState.FAILED)
    return JobState.UNKNOWN


def exit_code_from(returncode: Optional[int], waitstatus: Optional[int]) -> Optional[int]:
    """Flux's returncode, else 128+signal from a wait status.  Flux says ``-SIGNAL`` for a
    killed shell (a cancelled running job) and ``-128`` for a job cancelled before it ran."""
    if returncode is not None:
        if returncode == -128:
            return None
        if returncode < 0:
            return 128 - returncode
        return returncode
    if waitstatus is None:
        return None
    if os.WIFSIGNALED(waitstatus):
        return 128 + os.WTERMSIG(waitstatus)
    if os.WIFEXITED(waitstatus):
        return os.WEXITSTATUS(waitstatus)
    return None


def _when(stamp: Optional[float]) -> Optional[datetime]:
    if not stamp:
        return None
    try:
        return datetime.fromtimestamp(stamp, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):  # inf, year 0: no time Flux writes
        return None


#: the exception Flux raises on a job whose ``afterok`` parent did not complete
DEPENDENCY_EXCEPTION = "dependency"
#: a parent in a dependency note: ``after-success=14763950080`` (as submitted: decimal)
_PARENT = re.compile(r"(after-\w+=)(\d+)\b")


def _reason(facts: JobFacts, state: JobState) -> str:
    if facts.exception_type == DEPENDENCY_EXCEPTION:
        # the parent as hpcbridge shows ids (F58), not in the decimal it was submitted in
        note = _PARENT.sub(
            lambda m: m.group(1) + canonical_job_id(int(m.group(2))), facts.exception_note
        )
        return f"DependencyNeverSatisfied ({note})"
    if facts.exception_type == "cancel" and not facts.t_run:
        # a job cancelled before it ran: the words of Slurm's and the mock's answer
        note = f" ({facts.exception_note})" if facts.exception_note else ""
        return CANCELLED_WHILE_PENDING + note
    if facts.exception_type:
        return f"{facts.exception_type}: {facts.exception_note}".rstrip(": ")
    if state is not JobState.PENDING:
        return ""
    if facts.dependencies:
        return "depends on " + ", ".join(facts.dependencies)
    return facts.reason_pending or facts.state


def status_from_facts(facts: JobFacts) -> JobStatus:
    state = state_from_names(facts.state, facts.result)
    exit_code = None
    end = None
    if state.is_terminal:
        exit_code = exit_code_from(facts.returncode, facts.waitstatus)
        end = _when(facts.t_inactive or facts.t_cleanup)
    if state is JobState.FAILED and facts.exception_type == DEPENDENCY_EXCEPTION:
        # Flux fails a child whose parent did not complete (returncode 1, it never
        # ran); Slurm and the mock cancel it: CANCELLED, no exit code, everywhere.
        state, exit_code = JobState.CANCELLED, None
    extra: Dict[str, Any] = {}
    if facts.uri:
        extra["uri"] = facts.uri
    if facts.expiration:
        extra["expiration"] = facts.expiration
    return JobStatus(
        job_id=facts.id,
        state=state,
        exit_code=exit_code,
        start_time=_when(facts.t_run),
        end_time=end,
        native_state=facts.result or facts.state,
        reason=_reason(facts, state),
        extra=extra,
    )


def unknown(job_ids: Iterable[str], reason: str) -> Dict[str, JobStatus]:
    return {job_id: JobStatus(job_id, JobState.UNKNOWN, reason=reason) for job_id in job_ids}


def statuses_from_facts(
    job_ids: Iterable[str], facts: Iterable[JobFacts], missing_reason: str
) -> Dict[str, JobStatus]:
    found = {item.id: status_from_facts(item) for item in facts}
    return {
        job_id: found.get(job_id) or JobStatus(job_id, JobState.UNKNOWN, reason=missing_reason)
        for job_id in job_ids
    }


#: for releases without ``flux jobs --json`` (0.26); the free-text note last
JOBS_FORMAT_FIELDS = (
    "id.dec",
    "state",
    "result",
    "returncode",
    "waitstatus",
    "t_submit",
    "t_run",
    "t_cleanup",
    "t_inactive",
    "exception.type",
    "exception.note",
)
JOBS_FORMAT = "|".join("{" + name + "}" for name in JOBS_FORMAT_FIELDS)


def facts_from_json(job: Mapping[str, Any]) -> JobFacts:
    exception = job.get("exception") or {}
    exception = exception if isinstance(exception, Mapping) else {}  # not Flux's shape: none
    dependencies = job.get("dependencies") or []
    occurred = bool(exception.get("occurred", bool(exception.get("type"))))
    annotations = job.get("annotations") or {}
    sched = annotations.get("sched") if isinstance(annotations, Mapping) else None
    if not isinstance(sched, Mapping):
        sched = {}
    return JobFacts(
        id=canonical_job_id(job.get("id", job.get("jobid"))),
        state=str(job.get("state") or ""),
        result=str(job.get("result") or ""),
        returncode=integer(job.get("returncode")),
        waitstatus=integer(job.get("waitstatus")),
        t_submit=number(job.get("t_submit")),
        t_run=number(job.get("t_run")),
        t_cleanup=number(job.get("t_cleanup")),
        t_inactive=number(job.get("t_inactive")),
        exception_type=str(exception.get("type") or "") if occurred else "",
        exception_note=str(exception.get("note") or "") if occurred else "",
        dependencies=[str(dep) for dep in dependencies] if isinstance(dependencies, list) else [],
        reason_pending=str(sched.get("reason_pending") or ""),
        expiration=number(job.get("expiration")),
        uri=str(job.get("uri") or ""),
    )


def parse_jobs_json(stdout: str) -> List[JobFacts]:
    """``flux jobs --json``: one object for one id, ``{"jobs": [...]}`` for several."""
    text = stdout.strip()
    if not text:
        return []
    jobs: List[JobFacts] = []
    # Usually one JSON document; tolerate one per line as well.
    try:
        documents = [json.loads(text)]
    except json.JSONDecodeError:
        documents = [json.loads(line) for line in text.splitlines() if line.strip()]
    for document in documents:
        if isinstance(document, Mapping) and "jobs" in document and "id" not in document:
            listed = document["jobs"] if isinstance(document["jobs"], list) else []
            jobs.extend(facts_from_json(job) for job in listed if isinstance(job, Mapping))
        elif isinstance(document, Mapping):
            jobs.append(facts_from_json(document))
    return jobs


def parse_jobs_format(stdout: str) -> List[JobFacts]:
    jobs: List[JobFacts] = []
    count = len(JOBS_FORMAT_FIELDS)
    for line in stdout.splitlines():
        parts = line.rstrip("\n").split("|", count - 1)
        if len(parts) < count or not parts[0].strip().isdigit():
            continue  # a header, a stray or an empty line
        job: Dict[str, Any] = {
            name: value.strip() for name, value in zip(JOBS_FORMAT_FIELDS, parts)
        }
        # `--format` prints 0.0 for times that are not set yet.
        job.update((name, number(job[name]) or None) for name in _EVENT_TIMES)
        exception = {"occurred": True, "type": job["exception.type"], "note": job["exception.note"]}
        jobs.append(facts_from_json({**job, "id": job["id.dec"], "exception": exception}))
    return jobs


_UNKNOWN_ID = re.compile(r"JobID (\S+) unknown")


def parse_unknown_ids(stderr: str) -> Set[str]:
    found = set()
    for match in _UNKNOWN_ID.finditer(stderr):
        try:
            found.add(canonical_job_id(match.group(1)))
        except InvalidJobIdError:
            continue
    return found


def only_unknown_ids(stderr: str) -> bool:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return bool(lines) and all(
        _UNKNOWN_ID.search(line) or "Filtering options ignored" in line for line in lines
    )


def apply_event(facts: JobFacts, name: str, stamp: Optional[float], context: Any) -> None:
    """One eventlog event's effect on the facts, in the order Flux writes them."""
    if name == "submit":
        facts.t_submit, facts.state = stamp, "DEPEND"
    elif name in ("depend", "validate"):
        facts.state = "DEPEND" if name == "validate" else "PRIORITY"
    elif name == "dependency-add":
        facts.dependencies.append(str(context.get("description", "")))
    elif name == "priority":
        facts.state = "SCHED"
    elif name == "alloc":
        facts.state, facts.t_run = "RUN", stamp
    elif name == "start":
        facts.state = "RUN"
    elif name == "exception":
        # Severity 0 is fatal: the first one is the job's end.
        if (integer(context.get("severity")) or 0) == 0 and not facts.exception_type:
            facts.exception_type = str(context.get("type", ""))
            facts.exception_note = str(context.get("note", ""))
            facts.state = "CLEANUP" if facts.state == "RUN" else facts.state
    elif name == "finish":
        facts.waitstatus, facts.t_cleanup = integer(context.get("status")), stamp
        facts.state = "CLEANUP"
    elif name == "clean":
        facts.state, facts.t_inactive = "INACTIVE", stamp


def parse_eventlog(job_id: str, text: str) -> JobFacts:
    """Facts from ``flux job info ID eventlog``, a C subcommand that works where ``flux jobs``
    of another release fails ("invalid payload")."""
    facts = JobFacts(id=canonical_job_id(job_id))
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # empty or garbled lines
        if isinstance(event, dict):
            context = event.get("context") or {}
            context = context if isinstance(context, dict) else {}  # not Flux's shape: none
            apply_event(facts, str(event.get("name")), number(event.get("timestamp")), context)
    return settle(facts)


def settle(facts: JobFacts) -> JobFacts:
    """An inactive job's result and return code, from its events (as ``flux jobs``)."""
    if facts.state != "INACTIVE":
        return facts
    kind = facts.exception_type
    if kind:
        facts.result = {"cancel": "CANCELED", "timeout": "TIMEOUT"}.get(kind, "FAILED")
    else:
        facts.result = "COMPLETED" if facts.waitstatus == 0 else "FAILED"
    facts.returncode = exit_code_from(None, facts.waitstatus)
    # Flux's returncode for a job that never ran (a failed dependency) is 1; a job cancelled
    # before it ran has none (-128 in `flux jobs`).
    if facts.returncode is None and kind and (kind != "cancel" or facts.t_run):
        facts.returncode = 1
    return facts


def listed_infos(
    job_ids: Iterable[str], infos: Iterable[Any], errors: Iterable[str]
) -> Dict[str, JobStatus]:
    """Each id's status from the bindings' ``JobList`` (its ``JobInfo``s and ``errors``)."""
    facts = [facts_from_jobinfo(info) for info in infos]
    said = "; ".join(errors) or "no answer"
    return statuses_from_facts(job_ids, facts, f"not known to the Flux instance ({said})")
