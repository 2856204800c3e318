"""Pure ``flux`` argv builders and output parsers; the state mapping.

Nothing here runs a process.  ``cli.py`` runs what these build (locally or
over SSH) and hands the output back; ``native.py`` turns the same
``SubmitRequest`` into a jobspec.  The parsers are tested against outputs
recorded from real releases (``tests/data/flux/``).

Resource translation (the source document's table)::

    nodes -> -N   ntasks -> -n (slots)   cpus_per_task -> -c (cores per slot)
    gpus -> -g (gpus per slot; omitted when 0)   time -> -t<seconds>s
    qos -> --queue   account -> bank   constraint -> --requires
    job_name -> --job-name   output -> --output
    mem -> dropped (flux-core has no schedulable memory)
    partition -> dropped (Flux has no partitions)
"""

from __future__ import annotations

import json
import logging
import math
import os
import posixpath
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ...durations import format_fsd
from ...errors import JobSubmissionError
from ...model import JobState, JobStatus
from ...resources import Resources
from .ids import InvalidJobIdError, canonical_job_id, decimal_job_id, parse_job_id
from .jobspec import batch_script
from .versions import FluxPolicy

log = logging.getLogger("hpcbridge")

#: the variable that picks the task of a many-task wrapper (set per job in bulk)
TASK_INDEX_VARIABLE = "HPCBRIDGE_TASK_INDEX"


# -- submission --------------------------------------------------------------


@dataclass(frozen=True)
class SubmitRequest:
    """One batch job, scheduler-side: what both drivers submit."""

    wrapper_path: str
    job_name: str
    output: str
    cwd: str
    nslots: int = 1
    cores_per_slot: int = 1
    gpus_per_slot: int = 0
    nodes: Optional[int] = None
    #: seconds; ``None`` = unlimited
    duration: Optional[float] = None
    queue: Optional[str] = None
    bank: Optional[str] = None
    requires: Optional[str] = None
    #: decimal job ids (``afterok``)
    dependencies: Tuple[str, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)

    def with_environment(self, **variables: str) -> SubmitRequest:
        merged = dict(self.environment)
        merged.update(variables)
        return replace(self, environment=merged)


def plan_request(
    resources: Resources,
    *,
    wrapper_path: str,
    job_name: str,
    output: str,
    cwd: str,
    depends_on: Sequence[str],
    queue: Optional[str],
    policy: FluxPolicy,
) -> Tuple[SubmitRequest, List[str]]:
    """Translate validated resources; return the request and warnings to log.

    ``queue`` is the already-chosen queue (see ``queues.choose_queue``).
    """
    warnings = []
    if resources.mem:
        warnings.append(f"mem={resources.mem} dropped: flux-core has no schedulable memory")
    if resources.partition:
        warnings.append(
            f"partition={resources.partition!r} dropped: Flux has no partitions "
            "(use qos= for a Flux queue)"
        )
    requires = resources.constraint
    if requires and not policy.constraints:
        warnings.append(f"constraint={requires!r} dropped: Flux {policy.name} has no --requires")
        requires = None
    dependencies = tuple(decimal_job_id(job_id) for job_id in depends_on)
    if dependencies and not policy.dependencies:
        raise JobSubmissionError(
            f"Flux adapter {policy.name} has no job dependencies (RFC 26 came later); "
            "cannot submit with depends_on"
        )
    duration = resources.time
    if duration is not None and math.isinf(duration):
        duration = None  # unlimited: no -t at all
    nslots = resources.slots  # -N must not exceed the slot count
    request = SubmitRequest(
        wrapper_path=wrapper_path,
        job_name=job_name,
        output=output,
        cwd=cwd,
        nslots=nslots,
        cores_per_slot=resources.cpus_per_task or 1,
        gpus_per_slot=resources.gpus or 0,
        nodes=resources.nodes,
        duration=duration,
        queue=queue,
        bank=resources.account,
        requires=requires,
        dependencies=dependencies,
    )
    return request, warnings


def batch_argv(flux: str, policy: FluxPolicy, request: SubmitRequest) -> List[str]:
    """``flux batch`` (``flux mini batch`` on 0.26) for one request."""
    argv = [flux, *policy.batch_command, f"-n{request.nslots}"]
    if request.nodes:
        argv.append(f"-N{request.nodes}")
    if request.cores_per_slot > 1:
        argv.append(f"-c{request.cores_per_slot}")
    if request.gpus_per_slot:
        argv.append(f"-g{request.gpus_per_slot}")
    if request.duration:
        # Always with a unit: a bare `-t 90` means 90 *minutes* to the CLI.
        argv.append(f"-t{format_fsd(request.duration)}")
    if request.queue:
        argv.append(f"--queue={request.queue}")
    if request.bank:
        # `--setattr=system.bank` works in every release (0.49 has no --bank);
        # nested brokers without flux-accounting ignore it.
        argv.append(f"--setattr=system.bank={request.bank}")
    if request.requires:
        argv.append(f"--requires={request.requires}")
    for job_id in request.dependencies:
        argv.append(f"--dependency=afterok:{job_id}")
    argv.append(f"--job-name={request.job_name}")
    argv.append(f"--output={request.output}")
    for name, value in sorted(request.environment.items()):
        argv.append(f"--env={name}={value}")
    argv.append(request.wrapper_path)
    return argv


def jobspec_params(request: SubmitRequest) -> Dict[str, Any]:
    """The JSON-able description ``jobspec.build_batch_jobspec`` takes."""
    return {
        "script": batch_script(request.wrapper_path),
        "jobname": request.job_name,
        "num_slots": request.nslots,
        "cores_per_slot": request.cores_per_slot,
        "gpus_per_slot": request.gpus_per_slot,
        "num_nodes": request.nodes,
        "duration": request.duration or 0,
        "cwd": request.cwd,
        "output": request.output,
        "queue": request.queue,
        "bank": request.bank,
        "requires": request.requires,
        "dependencies": list(request.dependencies),
        "environment": dict(request.environment),
    }


def parse_submit_output(stdout: str) -> str:
    """The job id ``flux batch``/``flux submit`` prints (canonical form).

    Other lines (warnings from plugins) are skipped; the id is the last
    line that parses as one.
    """
    for line in reversed(stdout.strip().splitlines()):
        token = line.strip()
        if not token:
            continue
        try:
            return canonical_job_id(token)
        except InvalidJobIdError:
            continue
    raise ValueError(f"no job id in the output {stdout.strip()[:200]!r}")


def parse_bulk_output(stdout: str) -> List[Tuple[bool, str]]:
    """The bulk helper's ``OK <id>`` / ``ERR <message>`` lines, in order."""
    results: List[Tuple[bool, str]] = []
    for line in stdout.splitlines():
        kind, _, rest = line.strip().partition(" ")
        if kind == "OK":
            results.append((True, canonical_job_id(rest.strip())))
        elif kind == "ERR":
            results.append((False, rest.strip()))
    return results


def bulk_argv(flux: str, helper_source: str) -> List[str]:
    """One ``flux python`` process that submits every job (request on stdin)."""
    return [flux, "python", "-c", helper_source]


def cancel_argv(flux: str, policy: FluxPolicy, job_ids: Sequence[str]) -> List[str]:
    """``flux cancel`` (``flux job cancel`` on 0.26, one id per call there)."""
    return [flux, *policy.cancel_command, *[decimal_job_id(job_id) for job_id in job_ids]]


def version_argv(flux: str) -> List[str]:
    return [flux, "version"]


def getattr_argv(flux: str, name: str) -> List[str]:
    return [flux, "getattr", name]


def config_get_argv(flux: str) -> List[str]:
    return [flux, "config", "get"]


def queue_list_argv(flux: str) -> List[str]:
    return [flux, "queue", "list"]


def resource_r_argv(flux: str) -> List[str]:
    # A C subcommand (fast) present in every release; holds R with the
    # instance's execution.expiration when it runs inside a time-limited job.
    return [flux, "kvs", "get", "resource.R"]


def uri_argv(flux: str, target: str, local: bool = False) -> List[str]:
    return [flux, "uri", "--local" if local else "--remote", target]


def hostname_argv() -> List[str]:
    return ["uname", "-n"]


def parse_expiration(resource_r: str) -> Optional[float]:
    """``execution.expiration`` of an R document; ``None`` when unlimited (0)."""
    data = json.loads(resource_r)
    expiration = float(((data or {}).get("execution") or {}).get("expiration") or 0.0)
    return expiration if expiration > 0 else None


# -- status --------------------------------------------------------------------

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
    return [flux, "jobs", "--no-header", f"--format={JOBS_FORMAT}", *ids]


def eventlog_argv(flux: str, job_id: str) -> List[str]:
    return [flux, "job", "info", decimal_job_id(job_id), "eventlog"]


def jobspec_argv(flux: str, job_id: str) -> List[str]:
    return [flux, "job", "info", decimal_job_id(job_id), "jobspec"]


def output_path_from_jobspec(text: str, job_id: str) -> Optional[str]:
    """Where a job writes its output, from its jobspec (``{{id}}`` filled in).

    Without an output option a batch job writes ``flux-{{id}}.out`` in its cwd.
    """
    try:
        spec = json.loads(text)
        system = spec["attributes"]["system"]
    except (ValueError, KeyError, TypeError):
        return None
    try:
        path = system["shell"]["options"]["output"]["stdout"]["path"]
    except (KeyError, TypeError):
        path = "flux-{{id}}.out"
    if not posixpath.isabs(path):
        # `flux batch` records its default relative to the job's cwd.
        cwd = system.get("cwd")
        if not cwd:
            return None
        path = posixpath.join(cwd, path)
    canonical = canonical_job_id(job_id)
    for template in ("{{id}}", "{{id.f58}}", "{{jobid}}"):
        path = path.replace(template, canonical)
    return str(path.replace("{{id.dec}}", decimal_job_id(job_id)))


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


def _number(value: Any) -> Optional[float]:
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _integer(value: Any) -> Optional[int]:
    number = _number(value)
    return None if number is None else int(number)


def facts_from_json(job: Mapping[str, Any]) -> Dict[str, Any]:
    """One job of ``flux jobs --json`` (or a ``JobInfo.to_dict``) as plain facts."""
    exception = job.get("exception") or {}
    occurred = bool(exception.get("occurred", bool(exception.get("type"))))
    annotations = job.get("annotations") or {}
    sched = annotations.get("sched") if isinstance(annotations, Mapping) else None
    if not isinstance(sched, Mapping):
        sched = {}
    identifier = job.get("id", job.get("jobid"))
    return {
        "id": canonical_job_id(identifier),
        "state": str(job.get("state") or ""),
        "result": str(job.get("result") or ""),
        "returncode": _integer(job.get("returncode")),
        "waitstatus": _integer(job.get("waitstatus")),
        "t_submit": _number(job.get("t_submit")),
        "t_run": _number(job.get("t_run")),
        "t_cleanup": _number(job.get("t_cleanup")),
        "t_inactive": _number(job.get("t_inactive")),
        "exception_type": str(exception.get("type") or "") if occurred else "",
        "exception_note": str(exception.get("note") or "") if occurred else "",
        "dependencies": list(job.get("dependencies") or []),
        "reason_pending": str(sched.get("reason_pending") or ""),
        "expiration": _number(job.get("expiration")),
        "uri": str(job.get("uri") or ""),
    }


def parse_jobs_json(stdout: str) -> List[Dict[str, Any]]:
    """``flux jobs --json``: one object for one id, ``{"jobs": [...]}`` for several."""
    text = stdout.strip()
    if not text:
        return []
    jobs: List[Dict[str, Any]] = []
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


def parse_jobs_format(stdout: str) -> List[Dict[str, Any]]:
    """``flux jobs --no-header --format=JOBS_FORMAT`` lines."""
    jobs: List[Dict[str, Any]] = []
    count = len(JOBS_FORMAT_FIELDS)
    for line in stdout.splitlines():
        if not line.strip():
            continue
        parts = line.rstrip("\n").split("|", count - 1)
        if len(parts) < count or not parts[0].strip().isdigit():
            continue  # a header or a stray line
        values = dict(zip(JOBS_FORMAT_FIELDS, parts))
        jobs.append(
            {
                "id": canonical_job_id(values["id.dec"].strip()),
                "state": values["state"].strip(),
                "result": values["result"].strip(),
                "returncode": _integer(values["returncode"].strip()),
                "waitstatus": _integer(values["waitstatus"].strip()),
                # `-o` prints 0.0 for times that are not set yet.
                "t_submit": _number(values["t_submit"].strip()) or None,
                "t_run": _number(values["t_run"].strip()) or None,
                "t_cleanup": _number(values["t_cleanup"].strip()) or None,
                "t_inactive": _number(values["t_inactive"].strip()) or None,
                "exception_type": values["exception.type"].strip(),
                "exception_note": values["exception.note"].strip(),
                "dependencies": [],
                "reason_pending": "",
                "expiration": None,
                "uri": "",
            }
        )
    return jobs


def parse_eventlog(job_id: str, text: str) -> Dict[str, Any]:
    """Facts from ``flux job info ID eventlog`` (one JSON event per line).

    The fallback when ``flux jobs`` cannot answer (e.g. a client of another
    release: "invalid payload").  A C subcommand, ~10 ms.
    """
    facts: Dict[str, Any] = {
        "id": canonical_job_id(job_id),
        "state": "",
        "result": "",
        "returncode": None,
        "waitstatus": None,
        "t_submit": None,
        "t_run": None,
        "t_cleanup": None,
        "t_inactive": None,
        "exception_type": "",
        "exception_note": "",
        "dependencies": [],
        "reason_pending": "",
        "expiration": None,
        "uri": "",
    }
    started = False
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        name = event.get("name")
        stamp = _number(event.get("timestamp"))
        context = event.get("context") or {}
        if name == "submit":
            facts["t_submit"] = stamp
            facts["state"] = "DEPEND"
        elif name in ("depend", "validate"):
            facts["state"] = "DEPEND" if name == "validate" else "PRIORITY"
        elif name == "dependency-add":
            facts["dependencies"].append(str(context.get("description", "")))
        elif name == "priority":
            facts["state"] = "SCHED"
        elif name == "alloc":
            facts["state"] = "RUN"
            facts["t_run"] = stamp
        elif name == "start":
            started = True
            facts["state"] = "RUN"
        elif name == "exception":
            if int(context.get("severity", 0)) == 0 and not facts["exception_type"]:
                facts["exception_type"] = str(context.get("type", ""))
                facts["exception_note"] = str(context.get("note", ""))
                facts["state"] = "CLEANUP" if facts["state"] == "RUN" else facts["state"]
        elif name == "finish":
            facts["waitstatus"] = _integer(context.get("status"))
            facts["t_cleanup"] = stamp
            facts["state"] = "CLEANUP"
        elif name == "clean":
            facts["state"] = "INACTIVE"
            facts["t_inactive"] = stamp
    if facts["state"] == "INACTIVE":
        facts["result"] = _result_from_events(facts, started)
        facts["returncode"] = _returncode(facts, started)
    return facts


def _result_from_events(facts: Mapping[str, Any], started: bool) -> str:
    kind = facts["exception_type"]
    if kind == "cancel":
        return "CANCELED"
    if kind == "timeout":
        return "TIMEOUT"
    if kind:
        return "FAILED"
    return "COMPLETED" if facts["waitstatus"] == 0 else "FAILED"


def _returncode(facts: Mapping[str, Any], started: bool) -> Optional[int]:
    code = exit_code_from(None, facts["waitstatus"])
    if code is None and facts["exception_type"]:
        return 1  # Flux's returncode for a job that never ran (e.g. a failed dependency)
    return code


# Map from state and result NAMES, never from the one/two-letter display
# abbreviations (they changed across releases, e.g. "S" vs "SCHED").
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


def status_from_facts(facts: Mapping[str, Any]) -> JobStatus:
    """A ``JobStatus`` from facts (``flux jobs``, an eventlog, or ``JobInfo``)."""
    state = state_from_names(facts.get("state", ""), facts.get("result", ""))
    native = facts.get("result") or facts.get("state") or ""
    exit_code = None
    end = None
    if state.is_terminal:
        exit_code = exit_code_from(facts.get("returncode"), facts.get("waitstatus"))
        end = _when(facts.get("t_inactive") or facts.get("t_cleanup"))
    reason = ""
    if facts.get("exception_type"):
        note = facts.get("exception_note") or ""
        reason = f"{facts['exception_type']}: {note}".rstrip(": ")
    elif state is JobState.PENDING:
        if facts.get("dependencies"):
            reason = "depends on " + ", ".join(str(dep) for dep in facts["dependencies"])
        elif facts.get("reason_pending"):
            reason = str(facts["reason_pending"])
        else:
            reason = str(facts.get("state") or "")
    return JobStatus(
        job_id=str(facts["id"]),
        state=state,
        exit_code=exit_code,
        start_time=_when(facts.get("t_run")),
        end_time=end,
        native_state=str(native),
        reason=reason,
        extra={key: facts[key] for key in ("uri", "expiration") if facts.get(key)},
    )


def statuses_from_facts(
    job_ids: Iterable[str], facts: Iterable[Mapping[str, Any]], missing_reason: str
) -> Dict[str, JobStatus]:
    """A status for every asked id: UNKNOWN for those Flux did not list."""
    found = {str(item["id"]): status_from_facts(item) for item in facts}
    answers = {}
    for job_id in job_ids:
        answers[job_id] = found.get(job_id) or JobStatus(
            job_id, JobState.UNKNOWN, reason=missing_reason
        )
    return answers


def normalize_ids(job_ids: Iterable[Any]) -> List[str]:
    return [canonical_job_id(job_id) for job_id in job_ids]


def same_id(first: Any, second: Any) -> bool:
    try:
        return parse_job_id(first) == parse_job_id(second)
    except InvalidJobIdError:
        return False
