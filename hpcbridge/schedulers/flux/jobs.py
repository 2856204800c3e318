"""Following and ending jobs: ``flux jobs``, ``flux job info``, ``flux cancel``.

Pure argv builders and the parsers of what those commands print, each pair
tested against output recorded from real releases (``tests/data/flux/``).
The parsers return ``states.JobFacts``; ``states`` maps them to ``JobStatus``.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set

from .ids import InvalidJobIdError, canonical_job_id, decimal_job_id
from .states import JobFacts, exit_code_from, integer, number
from .versions import FluxPolicy

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


def jobs_argv(flux: str, policy: FluxPolicy, job_ids: Sequence[str]) -> List[str]:
    """One ``flux jobs`` call for many ids.

    No ``-a``: with an id list Flux ignores filters anyway and warns
    ("Filtering options ignored with jobid list") on stderr.
    """
    ids = [decimal_job_id(job_id) for job_id in job_ids]
    if policy.jobs_json:
        return [flux, "jobs", "--json", *ids]
    # 0.26 knows only the short spellings of --no-header and --format.
    return [flux, "jobs", "-n", "-o", JOBS_FORMAT, *ids]


def facts_from_json(job: Mapping[str, Any]) -> JobFacts:
    """One job of ``flux jobs --json`` (or a ``JobInfo.to_dict``)."""
    exception = job.get("exception") or {}
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
        dependencies=[str(dep) for dep in job.get("dependencies") or []],
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
            jobs.extend(facts_from_json(job) for job in document["jobs"])
        elif isinstance(document, Mapping):
            jobs.append(facts_from_json(document))
    return jobs


def parse_jobs_format(stdout: str) -> List[JobFacts]:
    """``flux jobs -n -o JOBS_FORMAT`` lines (no header, one job per line)."""
    jobs: List[JobFacts] = []
    count = len(JOBS_FORMAT_FIELDS)
    for line in stdout.splitlines():
        parts = line.rstrip("\n").split("|", count - 1)
        if len(parts) < count or not parts[0].strip().isdigit():
            continue  # a header, a stray or an empty line
        values = {name: value.strip() for name, value in zip(JOBS_FORMAT_FIELDS, parts)}
        jobs.append(
            JobFacts(
                id=canonical_job_id(values["id.dec"]),
                state=values["state"],
                result=values["result"],
                returncode=integer(values["returncode"]),
                waitstatus=integer(values["waitstatus"]),
                # `--format` prints 0.0 for times that are not set yet.
                t_submit=number(values["t_submit"]) or None,
                t_run=number(values["t_run"]) or None,
                t_cleanup=number(values["t_cleanup"]) or None,
                t_inactive=number(values["t_inactive"]) or None,
                exception_type=values["exception.type"],
                exception_note=values["exception.note"],
            )
        )
    return jobs


_UNKNOWN_ID = re.compile(r"JobID (\S+) unknown")


def parse_unknown_ids(stderr: str) -> Set[str]:
    """Canonical ids ``flux jobs`` reported as unknown ("JobID 123 unknown")."""
    found = set()
    for match in _UNKNOWN_ID.finditer(stderr):
        try:
            found.add(canonical_job_id(match.group(1)))
        except InvalidJobIdError:
            continue
    return found


def only_unknown_ids(stderr: str) -> bool:
    """True when every stderr line is an "unknown id" line or the filter warning."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return bool(lines) and all(
        _UNKNOWN_ID.search(line) or "Filtering options ignored" in line for line in lines
    )


def eventlog_argv(flux: str, job_id: str) -> List[str]:
    return [flux, "job", "info", decimal_job_id(job_id), "eventlog"]


def _apply_event(facts: JobFacts, name: str, stamp: Optional[float], context: Any) -> None:
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
            _apply_event(facts, str(event.get("name")), number(event.get("timestamp")), context)
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
    if code is None and facts.exception_type:
        return 1  # Flux's returncode for a job that never ran (e.g. a failed dependency)
    return code


def cancel_argv(flux: str, policy: FluxPolicy, job_ids: Sequence[str]) -> List[str]:
    """``flux cancel`` (``flux job cancel`` on 0.26, one id per call there)."""
    return [flux, *policy.cancel_command, *[decimal_job_id(job_id) for job_id in job_ids]]


def cancel_groups(policy: FluxPolicy, job_ids: Sequence[str]) -> List[List[str]]:
    """The ids of each cancel command: all in one, or one per ``flux job cancel`` (0.26)."""
    if policy.cancel_command == ("job", "cancel"):
        return [[job_id] for job_id in job_ids]
    return [list(job_ids)]


def jobspec_argv(flux: str, job_id: str) -> List[str]:
    return [flux, "job", "info", decimal_job_id(job_id), "jobspec"]


def output_path_from_jobspec(text: str, job_id: str) -> Optional[str]:
    """Where a job writes its output, from its jobspec (``{{id}}`` filled in).

    Without an output option a batch job writes ``flux-{{id}}.out`` in its cwd.
    """
    try:
        spec = json.loads(text)
        system: Dict[str, Any] = spec["attributes"]["system"]
    except (ValueError, KeyError, TypeError):
        return None
    try:
        path = str(system["shell"]["options"]["output"]["stdout"]["path"])
    except (KeyError, TypeError):
        path = "flux-{{id}}.out"
    if not posixpath.isabs(path):
        # `flux batch` records its default relative to the job's cwd.
        cwd = system.get("cwd")
        if not cwd:
            return None
        path = posixpath.join(str(cwd), path)
    return fill_id(path, job_id)


def fill_id(path: str, job_id: str) -> str:
    """An output path with Flux's id templates replaced by the job's id."""
    canonical = canonical_job_id(job_id)
    for template in ("{{id}}", "{{id.f58}}", "{{jobid}}"):
        path = path.replace(template, canonical)
    return path.replace("{{id.dec}}", decimal_job_id(job_id))
