"""What Flux says about a job, as plain facts, and our ``JobStatus`` from them.

Three sources give the same ``JobFacts``: ``flux jobs`` (``jobs.py``), a
job's eventlog (``jobs.py``) and the bindings' ``JobInfo`` (here).  States
and results are mapped from their NAMES, never from the one/two-letter
display abbreviations (they changed across releases, e.g. "S" vs "SCHED").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Optional

from ...model import JobState, JobStatus
from .ids import canonical_job_id


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
    """A float from Flux's output; ``None`` for empty or unparsable values."""
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def integer(value: Any) -> Optional[int]:
    found = number(value)
    return None if found is None else int(found)


def facts_from_jobinfo(info: Any) -> JobFacts:
    """The facts of a ``flux.job.JobInfo`` (bindings; attributes may be missing)."""

    def get(name: str, default: Any = None) -> Any:
        try:
            value = getattr(info, name)
        except (AttributeError, KeyError):
            return default
        return default if value in ("", None) else value

    exception = get("exception")
    occurred = bool(getattr(exception, "occurred", False)) if exception is not None else False
    reason_pending = ""
    try:
        reason_pending = str(info.sched.reason_pending or "")
    except (AttributeError, KeyError):
        reason_pending = ""
    return JobFacts(
        id=canonical_job_id(int(info.id)),
        state=str(get("state", "")),
        result=str(get("result", "")),
        returncode=integer(get("returncode")),
        waitstatus=integer(get("waitstatus")),
        t_submit=number(get("t_submit")) or None,
        t_run=number(get("t_run")) or None,
        t_cleanup=number(get("t_cleanup")) or None,
        t_inactive=number(get("t_inactive")) or None,
        exception_type=str(getattr(exception, "type", "") or "") if occurred else "",
        exception_note=str(getattr(exception, "note", "") or "") if occurred else "",
        dependencies=[str(dep) for dep in get("dependencies", []) or []],
        reason_pending=reason_pending if reason_pending != "None" else "",
        expiration=number(get("expiration")) or None,
    )


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
    """Flux's returncode, else the shell convention from a wait status (128+signal).

    Flux's returncode is the job shell's exit code, ``-SIGNAL`` when the
    shell itself was killed (a cancelled running job: -15, sometimes 143)
    and ``-128`` for a job cancelled before it ran (no exit code at all).
    """
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
    return datetime.fromtimestamp(stamp, tz=timezone.utc)


def _reason(facts: JobFacts, state: JobState) -> str:
    if facts.exception_type:
        return f"{facts.exception_type}: {facts.exception_note}".rstrip(": ")
    if state is not JobState.PENDING:
        return ""
    if facts.dependencies:
        return "depends on " + ", ".join(facts.dependencies)
    return facts.reason_pending or facts.state


def status_from_facts(facts: JobFacts) -> JobStatus:
    """A ``JobStatus`` from facts (``flux jobs``, an eventlog, or ``JobInfo``)."""
    state = state_from_names(facts.state, facts.result)
    exit_code = None
    end = None
    if state.is_terminal:
        exit_code = exit_code_from(facts.returncode, facts.waitstatus)
        end = _when(facts.t_inactive or facts.t_cleanup)
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
    """UNKNOWN with ``reason`` for every id."""
    return {job_id: JobStatus(job_id, JobState.UNKNOWN, reason=reason) for job_id in job_ids}


def statuses_from_facts(
    job_ids: Iterable[str], facts: Iterable[JobFacts], missing_reason: str
) -> Dict[str, JobStatus]:
    """A status for every asked id: UNKNOWN for those Flux did not list."""
    found = {item.id: status_from_facts(item) for item in facts}
    return {
        job_id: found.get(job_id) or JobStatus(job_id, JobState.UNKNOWN, reason=missing_reason)
        for job_id in job_ids
    }
