"""sbatch: its command line, its answer, and where each job's output lands. Pure, no I/O."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

from ...durations import format_slurm_time
from ...resources import Resources
from .ids import normalize_job_id
from .status import KEY_PREFIX


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
    #: the task a many-task wrapper runs when submitted as a plain job
    task_index: Optional[int] = None
    #: unique to this submission, kept by Slurm as the job's comment (``status.KEY_PREFIX``):
    #: what finds the job again when sbatch's answer is lost
    key: str = ""


#: what sbatch's ``--mem`` takes: a whole number with an optional unit
_SLURM_MEM = re.compile(r"^\d+[KMGT]?$")


def check_mem(mem: Optional[str]) -> None:
    """``ValueError`` for a memory sbatch refuses (``Invalid --mem specification``).

    pyslurm would take some of them (``1.5G``): both drivers refuse the same.
    ``resources.py`` writes ``1.5G`` as ``1536M`` before it gets here.
    """
    if mem is not None and not _SLURM_MEM.match(mem):
        raise ValueError(f"invalid mem {mem!r}: Slurm takes a whole number with K, M, G or T")


def dependency_text(depends_on: Iterable[str]) -> Optional[str]:
    ids = [normalize_job_id(job_id) for job_id in depends_on]
    return "afterok:" + ":".join(ids) if ids else None


def _resource_flags(resources: Resources) -> List[str]:
    flags = [
        ("partition", resources.partition),
        ("qos", resources.qos),
        ("account", resources.account),
        ("constraint", resources.constraint),
        ("time", format_slurm_time(resources.time) if resources.time is not None else None),
        ("nodes", resources.nodes),
        ("ntasks", resources.ntasks),
        ("cpus-per-task", resources.cpus_per_task),
        ("mem", resources.mem),
        # omitted when 0: --gpus=0 is refused on clusters without GRES
        ("gpus", resources.gpus or None),
    ]
    return [f"--{name}={value}" for name, value in flags if value is not None and value != ""]


def sbatch_argv(spec: SubmitSpec) -> List[str]:
    """``sbatch --parsable`` with every directive as a flag, then the wrapper.

    The wrapper carries no ``#SBATCH`` lines: what is asked is exactly what is
    on this command line (and what ``describe_submission`` shows).
    """
    argv = ["sbatch", "--parsable", *_resource_flags(spec.resources)]
    argv.append(f"--job-name={spec.job_name}")
    argv.append(f"--output={spec.output}")
    argv.append(f"--chdir={spec.workdir}")
    if spec.key:
        argv.append(f"--comment={KEY_PREFIX}{spec.key}")
    dependency = dependency_text(spec.depends_on)
    if dependency:
        argv.append(f"--dependency={dependency}")
        # Without this a child whose parent failed stays PENDING
        # (DependencyNeverSatisfied) forever, and a wait on it never ends.
        argv.append("--kill-on-invalid-dep=yes")
    if spec.array:
        argv.append(f"--array={spec.array}")
    argv.append(spec.wrapper_path)
    # One task of a many-task wrapper: its index as the wrapper's argument, not through
    # --export: any --export but a bare ALL sets SLURM_GET_USER_ENV=1 (sbatch.c), and
    # slurmd then runs `su - USER` (a login shell) before every such job starts.
    if spec.task_index is not None:
        argv.append(str(spec.task_index))
    return argv


def describe_argv(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(part) for part in argv)


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


def array_output(output: str) -> str:
    """The output pattern for the tasks of an array.

    In an array, ``%j`` is each task's own job id, unknown until the task
    starts; ``%A_%a`` (array id, task index) names the same task and is
    known at submission.
    """
    return re.sub(r"(?<!%)%j", "%A_%a", output)


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
