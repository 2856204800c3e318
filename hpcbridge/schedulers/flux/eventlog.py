"""A Flux job's eventlog as ``JobFacts``: the fallback where ``flux jobs`` cannot answer.

``flux job info ID eventlog`` is a C subcommand (~10 ms) that still works
where ``flux jobs`` of another release than the broker fails ("invalid
payload").  Pure; tested against eventlogs recorded from flux-core 0.88
(``tests/data/flux/``).
"""

from __future__ import annotations

import json
from typing import Any, Optional

from .ids import canonical_job_id
from .status import JobFacts, exit_code_from, integer, number


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
        if int(context.get("severity", 0)) == 0 and not facts.exception_type:
            facts.exception_type = str(context.get("type", ""))
            facts.exception_note = str(context.get("note", ""))
            facts.state = "CLEANUP" if facts.state == "RUN" else facts.state
    elif name == "finish":
        facts.waitstatus, facts.t_cleanup = integer(context.get("status")), stamp
        facts.state = "CLEANUP"
    elif name == "clean":
        facts.state, facts.t_inactive = "INACTIVE", stamp


def parse_eventlog(job_id: str, text: str) -> JobFacts:
    """Facts from ``flux job info ID eventlog`` (one JSON event per line).

    The fallback when ``flux jobs`` cannot answer (e.g. a client of another
    release: "invalid payload").  A C subcommand, ~10 ms.
    """
    facts = JobFacts(id=canonical_job_id(job_id))
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # empty or garbled lines
        if isinstance(event, dict):
            context = event.get("context") or {}
            apply_event(facts, str(event.get("name")), number(event.get("timestamp")), context)
    return settle(facts)


def settle(facts: JobFacts) -> JobFacts:
    """An inactive job's result and return code, from its events (as ``flux jobs``)."""
    if facts.state == "INACTIVE":
        facts.result = _result_from_events(facts)
        facts.returncode = _returncode_from_events(facts)
    return facts


def _result_from_events(facts: JobFacts) -> str:
    kind = facts.exception_type
    if kind == "cancel":
        return "CANCELED"
    if kind == "timeout":
        return "TIMEOUT"
    if kind:
        return "FAILED"
    return "COMPLETED" if facts.waitstatus == 0 else "FAILED"


def _returncode_from_events(facts: JobFacts) -> Optional[int]:
    code = exit_code_from(None, facts.waitstatus)
    if code is None and facts.exception_type == "cancel" and not facts.t_run:
        return None  # as `flux jobs` says it (-128): cancelled before it ran, no exit code
    if code is None and facts.exception_type:
        return 1  # Flux's returncode for a job that never ran (e.g. a failed dependency)
    return code
