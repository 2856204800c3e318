"""The ``flux`` command lines hpcbridge runs, built from what a driver wants; their answers are
read by ``answers`` and ``status``.  Ids go to commands in decimal (any locale).  Pure.
"""

from __future__ import annotations

import json
import math
import shlex
from typing import Any, Callable, Iterable, List, Mapping, Sequence

from ...engine.driver import SubmitBatch
from ...errors import SchedulerUnavailableError
from ...resources import format_fsd
from .ids import decimal_job_id
from .instance import FluxPolicy, InstanceFacts
from .jobspec import KEY_ATTRIBUTE
from .options import Attributes
from .planning import Questions, flux_plan, plan_batch
from .request import JobKind, SubmitRequest
from .status import JOBS_FORMAT


def bulk_input(
    params: Mapping[str, Any],
    environments: Sequence[Mapping[str, str]],
    keys: Sequence[str] = (),
    names: Sequence[str] = (),
) -> str:
    return json.dumps(
        {
            "job": dict(params),
            "environments": [dict(e) for e in environments],
            "keys": list(keys),
            "names": list(names),
        }
    )


#: what the listing of recent jobs prints: decimal id, submit time (epoch seconds)
RECENT_FORMAT = "{id.dec} {t_submit}"


def recent_jobs_argv(flux: str, policy: FluxPolicy, since: float) -> List[str]:
    """This user's jobs of every state; inactive ones since ``since`` where the release can."""
    argv = [flux, "jobs", "-a", "-n", "-c", "0"]
    if policy.jobs_since:
        argv.append(f"--since={math.floor(since)}")
    # 0.26 knows only the short spellings of --no-header and --format.
    return [*argv, "-o", RECENT_FORMAT]


def clock_argv() -> List[str]:
    return ["date", "+%s"]


def jobs_argv(flux: str, policy: FluxPolicy, job_ids: Sequence[str]) -> List[str]:
    """One ``flux jobs`` call for many ids (no ``-a``: with ids Flux ignores filters, warning)."""
    ids = [decimal_job_id(job_id) for job_id in job_ids]
    if policy.jobs_json:
        return [flux, "jobs", "--json", *ids]
    # 0.26 knows only the short spellings of --no-header and --format.
    return [flux, "jobs", "-n", "-o", JOBS_FORMAT, *ids]


#: ``flux jobs`` fields for a job's charge: the cores of its R, its run time (0.88 has no
#: GPU field: "Unknown format field: ngpus")
CHARGE_FORMAT = "{id.dec}|{ncores}|{runtime}"


def charges_argv(flux: str, job_ids: Sequence[str]) -> List[str]:
    """One ``flux jobs`` call for what these jobs held and for how long."""
    return [flux, "jobs", "-n", "-o", CHARGE_FORMAT, *[decimal_job_id(i) for i in job_ids]]


def cancel_argv(flux: str, policy: FluxPolicy, job_ids: Sequence[str]) -> List[str]:
    return [flux, *policy.cancel_command, *[decimal_job_id(job_id) for job_id in job_ids]]


def cancel_groups(policy: FluxPolicy, job_ids: Sequence[str]) -> List[List[str]]:
    """The ids of each cancel command: all in one, or one per ``flux job cancel`` (0.26)."""
    if policy.cancel_command == ("job", "cancel"):
        return [[job_id] for job_id in job_ids]
    return [list(job_ids)]


def jobspec_argv(flux: str, job_id: str) -> List[str]:
    return [flux, "job", "info", decimal_job_id(job_id), "jobspec"]


def version_argv(flux: str) -> List[str]:
    return [flux, "version"]


def submit_argv(flux: str, policy: FluxPolicy, request: SubmitRequest) -> List[str]:
    """``flux batch`` or ``flux submit`` (``flux mini ...`` on 0.26) of ``request``."""
    command = policy.batch_command if request.kind is JobKind.BATCH else policy.submit_command
    argv = [flux, *command, f"-n{request.nslots}"]
    if request.nodes:
        argv.append(f"-N{request.nodes}")
    if request.cores_per_slot > 1:
        argv.append(f"-c{request.cores_per_slot}")
    if request.gpus_per_slot:
        argv.append(f"-g{request.gpus_per_slot}")
    if request.exclusive:
        argv.append("--exclusive")
    if request.duration:
        # Always with a unit: a bare `-t 90` means 90 *minutes* to the CLI.
        argv.append(f"-t{format_fsd(request.duration)}")
    if request.queue:
        argv.append(f"--queue={request.queue}")
    if request.bank:
        # `--setattr=system.bank`: every release (0.49 has no --bank); ignored without accounting.
        argv.append(f"--setattr=system.bank={request.bank}")
    if request.requires:
        argv.append(f"--requires={request.requires}")
    for job_id in request.dependencies:
        argv.append(f"--dependency=afterok:{job_id}")
    if request.begin:
        argv.append(f"--dependency=begin-time:{float(request.begin)}")
    if request.signal:
        # Leaf by leaf, each value JSON (as the native options' attributes).
        signum, timeleft = request.signal
        argv.append(f"--setattr=system.shell.options.signal.signum={signum}")
        argv.append(f"--setattr=system.shell.options.signal.timeleft={timeleft}")
    argv.append(f"--job-name={request.job_name}")
    argv.append(f"--output={request.output}")
    for name, value in sorted(request.environment.items()):
        argv.append(f"--env={name}={value}")
    for path, value in request.attributes:
        argv.append(f"--setattr={path}={json.dumps(value)}")
    if request.key:
        # --setattr parses JSON (123e45 would be a number): a JSON string stays the key.
        argv.append(f"--setattr={KEY_ATTRIBUTE}={json.dumps(request.key)}")
    argv.append(request.wrapper_path)
    return argv


def dry_run_argv(
    flux: str, command: Sequence[str], batch: bool, options: Sequence[str]
) -> List[str]:
    """The release's ``flux batch``/``flux submit`` building a bare job's jobspec, unsent."""
    if batch:
        return [flux, *command, "--dry-run", "-n1", *options, "--wrap", "true"]
    return [flux, *command, "--dry-run", *options, "true"]


def eventlog_argv(flux: str, job_id: str) -> List[str]:
    """A C subcommand: it reads a broker of another release (``flux jobs`` may not)."""
    return [flux, "job", "info", decimal_job_id(job_id), "eventlog"]


def getattr_argv(flux: str, name: str) -> List[str]:
    """A broker attribute: ``rank`` answers once the broker is up, ``version`` says its release."""
    return [flux, "getattr", name]


def uri_argv(flux: str, target: str) -> List[str]:
    return [flux, "uri", "--remote", target]


def slurm_nodes_argv(job_id: str) -> List[str]:
    """The nodes of Slurm job ``job_id`` as a hostlist (empty while it is pending)."""
    return ["squeue", "--noheader", "--format=%N", f"--jobs={job_id}"]


def slurm_first_node_uri_argv(flux: str, job_id: str, node: str) -> List[str]:
    """``flux uri slurm:JOB`` run by a step of the job on its first ``node`` (rank 0's)."""
    # FLUX_URI is dropped: the step's `flux uri` would otherwise name the caller's instance
    step = ["srun", "--overlap", f"--jobid={job_id}", "--nodes=1", "--ntasks=1"]
    return ["env", "-u", "FLUX_URI", *step, f"--nodelist={node}", flux, "uri", f"slurm:{job_id}"]


def config_argv(flux: str) -> List[str]:
    return [flux, "config", "get"]


def queue_list_argv(flux: str) -> List[str]:
    return [flux, "queue", "list"]


def resource_r_argv(flux: str) -> List[str]:
    """A fast C subcommand in every release; R has execution.expiration in a limited job."""
    return [flux, "kvs", "get", "resource.R"]


def resource_list_argv(flux: str) -> List[str]:
    """Cores by the scheduler's state (free, allocated, down), one line each; ``-s up``
    is free and allocated; every release has these fields (0.26 to 0.88)."""
    return [flux, "resource", "list", "--no-header", "--format={state} {ncores}"]


def hostname_argv() -> List[str]:
    return ["uname", "-n"]


def user_argv() -> List[str]:
    return ["id", "-un"]


def command_lines(
    batches: Iterable[SubmitBatch],
    known: InstanceFacts,
    flux: str,
    native: Callable[[FluxPolicy, bool, Sequence[str]], Attributes],
) -> str:
    """The command line each batch would be sent with (a dry run); native options
    ``native`` cannot judge (no flux command here) are named, not shown."""
    unchecked: List[str] = []

    def judged(policy: FluxPolicy, batch: bool, options: Sequence[str]) -> Attributes:
        try:
            return native(policy, batch, options)
        except SchedulerUnavailableError:  # no flux command here to judge them
            unchecked.extend(option for option in options if option not in unchecked)
            return ()

    lines = []
    for batch in batches:
        ask = Questions(None, judged, lambda: None)  # banks: Flux judges at submission
        request = flux_plan(plan_batch(batch, known, ask, 0.0)).request
        lines.append(shlex.join(submit_argv(flux, known.policy, request)))
    if unchecked:
        lines.append(f"# not shown, no flux command here to judge them: {shlex.join(unchecked)}")
    return "\n".join(lines)
