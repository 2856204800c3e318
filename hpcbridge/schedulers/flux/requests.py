"""Submission requests: resources translated for Flux, the argv and jobspec built from them.

Pure: nothing here runs a process.  Both drivers submit the same
``SubmitRequest`` - the CLI driver as ``flux batch`` (a batch job) or ``flux
submit`` (a plain job) argv with the same options (or, in bulk, the
``jobspec_params`` handed to ``jobspec.py`` under ``flux python``), the native
driver as a jobspec built from the same ``jobspec_params``.

How resources become Flux options::

    nodes -> -N   ntasks -> -n (slots)   cpus_per_task -> -c (cores per slot)
    gpus -> -g (gpus per slot; omitted when 0)   time -> -t<seconds>s
    qos -> --queue   account -> bank   constraint -> --requires
    job_name -> --job-name   output -> --output
    mem, partition -> dropped (see DROPPED_KEYS)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...durations import format_fsd
from ...errors import JobSubmissionError
from ...jobscript import EXIT_RANKS_VARIABLE
from ...resources import Resources
from .ids import InvalidJobIdError, canonical_job_id, decimal_job_id
from .jobspec import batch_script
from .versions import FluxPolicy

#: resource keys Flux ignores, and why
DROPPED_KEYS: Mapping[str, str] = {
    "mem": "flux-core has no schedulable memory",
    "partition": "Flux has no partitions",
}

#: the job kinds a request can ask for: "batch" = a nested instance (``flux batch``),
#: "plain" = the wrapper runs as the job's tasks (``flux submit``)
BATCH = "batch"
PLAIN = "plain"


@dataclass(frozen=True)
class SubmitRequest:
    """One job, scheduler-side: what both drivers submit."""

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
    #: which kind of job (``jobspec.KINDS``)
    kind: str = BATCH

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
    kind: str = BATCH,
) -> Tuple[SubmitRequest, List[str]]:
    """Translate validated resources; return the request and warnings to log.

    ``queue`` is the already-chosen queue (see ``queues.choose_queue``).
    """
    warnings = []
    if resources.mem:
        warnings.append(f"mem={resources.mem} dropped: {DROPPED_KEYS['mem']}")
    if resources.partition:
        warnings.append(
            f"partition={resources.partition!r} dropped: {DROPPED_KEYS['partition']} "
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
    environment = {}
    if kind == PLAIN and resources.slots > 1:
        environment[EXIT_RANKS_VARIABLE] = str(resources.slots)
    request = SubmitRequest(
        wrapper_path=wrapper_path,
        job_name=job_name,
        output=output,
        cwd=cwd,
        nslots=resources.slots,  # -N must not exceed the slot count
        cores_per_slot=resources.cpus_per_task or 1,
        gpus_per_slot=resources.gpus or 0,
        nodes=resources.nodes,
        duration=duration,
        queue=queue,
        bank=resources.account,
        requires=requires,
        dependencies=dependencies,
        environment=environment,
        kind=kind,
    )
    return request, warnings


def submit_argv(flux: str, policy: FluxPolicy, request: SubmitRequest) -> List[str]:
    """The command submitting ``request``: ``flux batch`` for a batch job, ``flux
    submit`` for a plain one (``flux mini ...`` on 0.26), with the same options."""
    if request.kind == BATCH:
        return job_argv(flux, policy.batch_command, request)
    if request.kind == PLAIN:
        return job_argv(flux, policy.submit_command, request)
    raise ValueError(f"unknown Flux job kind {request.kind!r}")


def batch_argv(flux: str, policy: FluxPolicy, request: SubmitRequest) -> List[str]:
    """``flux batch`` (``flux mini batch`` on 0.26) for one request."""
    return job_argv(flux, policy.batch_command, request)


def job_argv(flux: str, command: Sequence[str], request: SubmitRequest) -> List[str]:
    """``flux <command>`` with the request's options and the wrapper as the script."""
    argv = [flux, *command, f"-n{request.nslots}"]
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
    """The JSON-able description ``jobspec.build_jobspec`` takes."""
    return {
        "kind": request.kind,
        "script": batch_script(request.wrapper_path),
        "command": [request.wrapper_path],
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


def bulk_argv(flux: str, helper_source: str) -> List[str]:
    """One ``flux python`` process that submits every job (request on stdin)."""
    return [flux, "python", "-c", helper_source]


def bulk_input(requests: Sequence[SubmitRequest]) -> Dict[str, Any]:
    """What the bulk helper reads on stdin (as JSON)."""
    return {"jobs": [jobspec_params(request) for request in requests]}


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
