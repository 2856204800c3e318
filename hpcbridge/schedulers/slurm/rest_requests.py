"""What the REST driver asks slurmrestd: each request as data (method, path, query, JSON
body), for the OpenAPI data parser versions hpcbridge speaks.  The job description is
``commands.sbatch_argv``'s request in the REST API's names.  Pure, no I/O; checked
against slurmrestd 25.11 (tests/data/slurm-rest/)."""

from __future__ import annotations

import json
import math
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...engine.driver import Planned, SubmitBatch
from ...errors import JobSubmissionError, ResourceError
from ...resources import Resources, signal_parts
from ..native_options import option_name, resolve
from . import options
from .commands import SubmitSpec, dependency_text, plan_batch, planned_spec
from .ids import KEY_PREFIX, split_job_id

#: the data parser versions spoken here, newest first (v0.0.41 leaves Slurm in 26.05)
VERSIONS = ("v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41")


@dataclass(frozen=True)
class RestRequest:
    """One HTTP request to slurmrestd; ``query``: (name, value) pairs, a name repeated."""

    method: str
    path: str
    query: Tuple[Tuple[str, str], ...] = ()
    body: Optional[Mapping[str, Any]] = None

    def target(self) -> str:
        """The path with its query, as sent."""
        return self.path + ("?" + urllib.parse.urlencode(self.query) if self.query else "")

    def describe(self) -> str:
        return f"{self.method} {self.target()}"


def openapi() -> RestRequest:
    """The daemon's OpenAPI document: its paths say which versions it speaks."""
    return RestRequest("GET", "/openapi/v3")


def ping(version: str) -> RestRequest:
    return RestRequest("GET", f"/slurm/{version}/ping/")


def submit(version: str, description: Mapping[str, Any]) -> RestRequest:
    return RestRequest("POST", f"/slurm/{version}/job/submit", body={"job": dict(description)})


def _ids(name: str, job_ids: Sequence[str]) -> Tuple[Tuple[str, str], ...]:
    # One pair per id: slurmrestd 25.11 answers a CSV list ("1,2") with HTTP 500.
    return tuple((name, job_id) for job_id in dict.fromkeys(job_ids))


def job_states(version: str, job_ids: Sequence[str]) -> RestRequest:
    """The light question (slurmctld's REQUEST_JOB_STATE): each job's id and state."""
    return RestRequest("GET", f"/slurm/{version}/jobs/state/", _ids("job_id", job_ids))


def jobs(version: str) -> RestRequest:
    """Every job slurmctld holds (the light round is ``job_states``')."""
    return RestRequest("GET", f"/slurm/{version}/jobs/")


def job(version: str, job_id: str) -> RestRequest:
    """One job (an array: every task of it) as slurmctld holds it; 404 once purged."""
    return RestRequest("GET", f"/slurm/{version}/job/{job_id}")


def full_records(version: str, job_ids: Sequence[str]) -> List[RestRequest]:
    """The requests for the whole records of ``job_ids``: the one job's own (an array's:
    all its tasks) when they are of one job, else every job's; none for none."""
    # jobs/ dumps every job slurmctld holds (~0.5 ms each in slurmrestd 25.11), job/{id}
    # one (~2 ms); a job/{id} each for more than one job costs more RPCs than jobs/' one
    # (10 jobs: 27 status RPCs for 8 waiting processes instead of 9)
    bases = list(dict.fromkeys(split_job_id(job_id)[0] for job_id in job_ids))
    return [job(version, base) for base in bases] if len(bases) <= 1 else [jobs(version)]


def cancel(version: str, job_id: str) -> RestRequest:
    """scancel of one job or task."""
    return RestRequest("DELETE", f"/slurm/{version}/job/{job_id}")


def history(version: str, job_ids: Sequence[str]) -> RestRequest:
    """slurmdbd's records of these jobs (an array's own id: all its tasks), as ``sacct -X``
    asks: no steps, no duplicates (a job id's older records), times untruncated."""
    bases = [split_job_id(job_id)[0] for job_id in job_ids]
    return RestRequest("GET", f"/slurmdb/{version}/jobs/", _ids("step", bases) + _SACCT_X)


#: any flag set drops slurmrestd's default ones (show_duplicates, the untruncated times)
_SACCT_X = (("skip_steps", "true"), ("disable_truncate_usage_time", "true"))


def associations(version: str, user: str) -> RestRequest:
    """slurmdbd's associations of ``user`` (sacctmgr show assoc)."""
    return RestRequest("GET", f"/slurmdb/{version}/associations/", (("user", user),))


def qos(version: str) -> RestRequest:
    return RestRequest("GET", f"/slurmdb/{version}/qos/")


def history_since(version: str, seconds: int = 3600) -> RestRequest:
    """slurmdbd's records of the user's jobs of the last ``seconds`` (their comments: keys)."""
    return RestRequest("GET", f"/slurmdb/{version}/jobs/", (("start_time", f"now-{seconds}"),))


# -- the job description -------------------------------------------------------------

_MIB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2}


def megabytes(mem: str) -> int:
    """``4G``/``1536M``/``100K`` (``resources``' normal form) in the MiB REST takes, up."""
    unit = mem[-1].upper() if mem[-1].isalpha() else "M"
    digits = mem[:-1] if mem[-1].isalpha() else mem
    return max(1, math.ceil(int(digits) * _MIB[unit]))


def number(value: float) -> Dict[str, Any]:
    """A number as the API's no-value struct (``math.inf``: infinite)."""
    if math.isinf(value):
        return {"set": True, "infinite": True, "number": 0}
    return {"set": True, "infinite": False, "number": int(value)}


def _tres(resources: Resources) -> Dict[str, str]:
    """GPUs and generic resources as TRES lists per job, node and task (``gres/gpu:2``)."""
    per_node = [f"gres/{item}" for item in (resources.gres or "").split(",") if item]
    if resources.gpus_per_node:
        per_node.append(f"gres/gpu:{resources.gpus_per_node}")
    found = {
        "tres_per_job": f"gres/gpu:{resources.gpus}" if resources.gpus else "",
        "tres_per_node": ",".join(per_node),
        "tres_per_task": f"gres/gpu:{resources.gpus_per_task}" if resources.gpus_per_task else "",
    }
    return {key: value for key, value in found.items() if value}


#: the typed keys the job description takes as they are: key -> its field
_AS_THEY_ARE = {
    "partition": "partition", "qos": "qos", "account": "account", "constraint": "constraints",
    "reservation": "reservation", "ntasks": "tasks", "cpus_per_task": "cpus_per_task",
    "requeue": "requeue",
}  # fmt: skip


def _limits(resources: Resources) -> Dict[str, Any]:
    found = {field: getattr(resources, key) for key, field in _AS_THEY_ARE.items()}
    found["nodes"] = str(resources.nodes) if resources.nodes else None
    if resources.time is not None:  # minutes, rounded up as sbatch does
        minutes = resources.time if math.isinf(resources.time) else math.ceil(resources.time / 60)
        found["time_limit"] = number(minutes)
    if resources.mem:
        found["memory_per_node"] = number(megabytes(resources.mem))
    if resources.mem_per_cpu:
        found["memory_per_cpu"] = number(megabytes(resources.mem_per_cpu))
    found["shared"] = ["none"] if resources.exclusive else None  # shared with no other job
    found["begin_time"] = None if resources.begin is None else number(resources.begin)
    if resources.signal:
        name, seconds = signal_parts(resources.signal)
        found["kill_warning_signal"] = name
        found["kill_warning_delay"] = None if seconds is None else number(seconds)
        found["kill_warning_flags"] = ["BATCH_JOB"] if resources.signal.startswith("B:") else None
    return {key: value for key, value in found.items() if value is not None}


#: sbatch options with a field of the job description: the field and the value's type
#: there (``bool``: a flag, no value; ``list``: comma-separated); the others have none
NATIVE_FIELDS = {
    "--licenses": ("licenses", str), "--hold": ("hold", bool), "--mail-user": ("mail_user", str),
    "--mail-type": ("mail_type", list), "--nice": ("nice", int), "--prefer": ("prefer", str),
    "--wckey": ("wckey", str), "--contiguous": ("contiguous", bool), "--reboot": ("reboot", bool),
    "--overcommit": ("overcommit", bool), "--exclude": ("excluded_nodes", list),
    "--nodelist": ("required_nodes", list), "--ntasks-per-node": ("tasks_per_node", int),
    "--ntasks-per-core": ("tasks_per_core", int), "--threads-per-core": ("threads_per_core", int),
    "--ntasks-per-socket": ("tasks_per_socket", int), "--mincpus": ("minimum_cpus_per_node", int),
    "--sockets-per-node": ("sockets_per_node", int), "--core-spec": ("core_specification", int),
    "--distribution": ("distribution", str), "--network": ("network", str),
    "--extra": ("extra", str), "--cluster-constraint": ("cluster_constraint", str),
    "--mcs-label": ("mcs_label", str), "--container": ("container", str),
    "--container-id": ("container_id", str), "--cpu-freq": ("cpu_frequency", str),
    "--bb": ("burst_buffer", str), "--input": ("standard_input", str),
}  # fmt: skip


def plan(batch: SubmitBatch, url: str) -> Planned:
    """``batch`` planned as for sbatch; its native options refused here, before anything is
    staged, where hpcbridge sets them or the job description has no field for them."""
    options.check_native(batch.resources, None, url)
    native_fields(batch.resources)
    return plan_batch(batch)


def describe(planned: Planned, version: str) -> str:
    """The request a dry run shows: the submission with the script's path and no environment."""
    spec = planned_spec(planned)
    shown = job_description(spec, f"<{spec.wrapper_path}>", {"...": "..."})
    return f"{submit(version, shown).describe()} {json.dumps(shown)}"


def native_fields(resources: Resources) -> Dict[str, Any]:
    """The job description's fields of the sbatch options given in Slurm's words
    (``NATIVE_FIELDS``, a long name shortened as sbatch takes it); ``ResourceError`` for
    one it has none for, before any staging."""
    found: Dict[str, Any] = {}
    for option in resources.native_options("slurm"):
        given = option_name(option)
        value = option[len(given) :].removeprefix("=")
        field, kind = NATIVE_FIELDS.get(resolve(given, NATIVE_FIELDS)[0] or "", ("", None))
        try:
            if kind is None or (kind is bool) != (value == ""):
                raise ValueError(option)
            found[field] = (
                True if kind is bool else value.split(",") if kind is list else kind(value)
            )
        except ValueError:
            raise ResourceError(
                "native",
                f"{option!r}: the REST API has no field for it, or not with this value (it takes "
                f"{', '.join(sorted(NATIVE_FIELDS))}): give it as a typed key, leave it out, or "
                "submit with HPCBRIDGE_SLURM_DRIVER=cli",
            ) from None
    return found


def job_description(
    spec: SubmitSpec, script: str, environment: Mapping[str, str]
) -> Dict[str, Any]:
    """``spec`` as the REST API's job description; ``script``: the wrapper's text (REST
    takes the script, not its path), ``environment``: the job's (never empty: slurmctld
    refuses an empty one with "I/O error writing script/environment to file")."""
    if not environment:
        raise JobSubmissionError("a job submitted through slurmrestd needs an environment")
    fields = native_fields(spec.resources)
    # Not the REST token: a Slurm command that finds SLURM_JWT authenticates with it, which
    # slurmd refuses (srun in the job: "Protocol authentication error"); sbatch writes
    # SLURM_NTASKS_PER_NODE into the job's environment, where srun reads it (slurmctld not)
    job_env = {key: value for key, value in environment.items() if key != "SLURM_JWT"}
    if "tasks_per_node" in fields:
        job_env["SLURM_NTASKS_PER_NODE"] = str(fields["tasks_per_node"])
    found: Dict[str, Any] = {
        "script": script, "environment": [f"{key}={value}" for key, value in job_env.items()],
        "current_working_directory": spec.workdir, "standard_output": spec.output,
        "name": spec.job_name, **_limits(spec.resources), **_tres(spec.resources), **fields,
    }  # fmt: skip
    if spec.key:
        found["comment"] = f"{KEY_PREFIX}{spec.key}"
    dependency = dependency_text(spec.depends_on)
    if dependency:
        found["dependency"] = dependency
        found["flags"] = ["KILL_INVALID_DEPENDENCY"]  # see commands.sbatch_argv
    if spec.array:
        found["array"] = spec.array
    if spec.task_index is not None:  # the task's index as the wrapper's argument
        found["argv"] = [spec.wrapper_path, str(spec.task_index)]
    return found
