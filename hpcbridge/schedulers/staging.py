"""Turning what a caller hands in into staged files on the scheduler's side.

Pure planning (which folder, which names, which wrapper text) apart from the
one method that moves files through the executor (``Stager.stage``).
"""

from __future__ import annotations

import logging
import os
import posixpath
import stat
from collections import Counter
from datetime import datetime
from typing import AbstractSet, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import JobNotFoundError, JobSubmissionError, TransportError
from ..jobscript import (
    BUNDLED_SCRIPT_MAX,
    MARKER_DIR,
    PreparedJob,
    TaskSpec,
    build_wrapper,
    can_bundle,
    check_environment_names,
    marker_path,
    wrapper_parts,
)
from ..resources import Resources
from ..transports.base import Executor

log = logging.getLogger("hpcbridge")

#: what ``submit_many`` accepts for one job: a script path, or
#: ``(script, arguments)``, or ``(script, arguments, environment)``
JobInput = Union[str, "os.PathLike[str]", Tuple[Any, ...], TaskSpec]

#: ids a job waits for: one id, or several
DependsOn = Union[None, str, int, Sequence[Any]]


def make_task(
    script_path: Any,
    arguments: Sequence[Any],
    environment: Optional[Mapping[str, str]],
    remote_repo: Optional[str],
    must_exist: bool = True,
) -> TaskSpec:
    """One validated task; ``remote_repo`` reaches the job as ``HPCBRIDGE_REMOTE_REPO``."""
    path = os.fspath(script_path)
    if must_exist:
        _check_script(path)
    job_environment = dict(environment or {})
    if remote_repo:
        job_environment.setdefault("HPCBRIDGE_REMOTE_REPO", remote_repo)
    return TaskSpec(
        os.path.abspath(path),
        tuple(str(argument) for argument in arguments),
        check_environment_names(job_environment),
    )


def _check_script(path: str) -> None:
    """Refuse what is no readable script file, saying what to do."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0
    if stat.S_ISDIR(mode):
        raise JobSubmissionError(
            f"{path} is a directory, not a script (give the path of a batch script file)"
        )
    if not stat.S_ISREG(mode):
        raise JobSubmissionError(
            f"script not found: {path} (give the path of an existing batch script)"
        )
    if not os.access(path, os.R_OK):
        raise JobSubmissionError(
            f"cannot read the script {path}: permission denied (make it readable to you: "
            f"chmod u+r {path})"
        )


def coerce_task(item: JobInput, remote_repo: Optional[str], must_exist: bool = True) -> TaskSpec:
    """A ``submit_many`` input as a task (see ``JobInput``)."""
    if isinstance(item, TaskSpec):
        return make_task(item.script, item.arguments, item.environment, remote_repo, must_exist)
    if isinstance(item, tuple):
        script = item[0]
        arguments = item[1] if len(item) > 1 and item[1] is not None else ()
        environment = item[2] if len(item) > 2 else None
        if isinstance(arguments, str):
            raise ValueError("arguments must be a list of strings, not one string")
        return make_task(script, arguments, environment, remote_repo, must_exist)
    return make_task(item, (), None, remote_repo, must_exist)


def staged_basenames(
    scripts: Sequence[str], taken: Optional[Mapping[str, str]] = None
) -> Dict[str, str]:
    """Each script's file name in a job folder: its own, deduplicated (``run.sh``, then
    ``run.sh.2`` for another script of that name), in the order first met; ``taken``:
    the names already given in that folder (a sweep's, across its submissions)."""
    names = dict(taken or {})
    used = {name: script for script, name in names.items()}
    for script in scripts:
        if script not in names:
            base = os.path.basename(script) or "script"
            candidate, counter = base, 1
            while candidate in used and used[candidate] != script:
                counter += 1
                candidate = f"{base}.{counter}"
            used[candidate] = script
            names[script] = candidate
    return names


def staged_names(
    directory: str, scripts: Sequence[str], taken: Optional[Mapping[str, str]] = None
) -> List[str]:
    """Where each script lands in the job folder (``staged_basenames``)."""
    names = staged_basenames(scripts, taken)
    return [posixpath.join(directory, names[script]) for script in scripts]


def task_name(task: TaskSpec, job_name: Optional[str]) -> str:
    """A task's own name: ``job_name``, else its script's file name."""
    return job_name or os.path.basename(task.script) or "hpcbridge"


def shared_name(names: Sequence[str]) -> str:
    """The one name a submission of tasks called ``names`` gets from the scheduler (a
    Slurm array has one name for all its tasks): theirs when they all share it, else
    the first one's and how many tasks follow it (``t0.sh+99``)."""
    if not names:
        raise ValueError("no task to name")
    if all(name == names[0] for name in names):
        return names[0]
    return f"{names[0]}+{len(names) - 1}"


def prepared(
    directory: str,
    scripts: Sequence[str],
    names: Sequence[str],
    token: str,
    single_use: AbstractSet[str] = frozenset(),
) -> PreparedJob:
    """The files of one wrapper (``token``) in ``directory``; ``names``: each task's own;
    ``single_use``: the scripts of the whole submission that one task alone runs."""
    return PreparedJob(
        token=token,
        remote_dir=directory,
        wrapper_path=marker_path(directory, token, ".sh"),
        exit_file=marker_path(directory, token, ".exit"),
        scripts=list(scripts),
        job_name=shared_name(names),
        task_names=tuple(names),
        single_use=frozenset(scripts).intersection(single_use) if len(scripts) > 1 else frozenset(),
    )


def plan_chunks(
    directory: str,
    tasks: Sequence[TaskSpec],
    job_name: Optional[str],
    chunk_size: int,
    first_token: str,
    script_names: Optional[Mapping[str, str]] = None,
) -> List[Tuple[PreparedJob, List[TaskSpec]]]:
    """One wrapper per ``chunk_size`` tasks (the driver's ``max_batch``: a Slurm array's
    size limit), all in one folder, whatever scripts they run: the wrapper's table
    runs each task's own.  Every task keeps its own name (``task_name``); the chunk
    as a whole is called ``shared_name`` of them.  The wrappers are named after
    ``first_token`` (``T``, ``T-1``, ``T-2``...): one plan of one order always names
    the same files.  ``script_names``: the scripts' names in a folder other orders
    share (``Order.script_names``)."""
    scripts = staged_names(directory, [task.script for task in tasks], script_names)
    names = [task_name(task, job_name) for task in tasks]
    single_use = {script for script, uses in Counter(scripts).items() if uses == 1}
    size = max(chunk_size, 1)
    chunks: List[Tuple[PreparedJob, List[TaskSpec]]] = []
    for start in range(0, len(tasks), size):
        end = min(start + size, len(tasks))
        token = first_token if start == 0 else f"{first_token}-{len(chunks)}"
        job = prepared(directory, scripts[start:end], names[start:end], token, single_use)
        chunks.append((job, list(tasks[start:end])))
    return chunks


def wrapper_files(
    job: PreparedJob,
    tasks: Sequence[TaskSpec],
    array_index_variable: Optional[str],
    launcher: str = "",
    bundled: Optional[Mapping[str, str]] = None,
) -> List[Tuple[str, str]]:
    """``(path, text)`` of the wrapper and, with many tasks, the parts of its table
    (``jobscript.wrapper_parts``), the wrapper last; ``bundled``: the staged scripts
    that travel in the table (``Stager.bundle``)."""
    staged = [
        TaskSpec(remote, task.arguments, task.environment)
        for remote, task in zip(job.scripts, tasks)
    ]
    wrapper = build_wrapper(
        staged,
        job.remote_dir,
        job.exit_file,
        array_index_variable,
        launcher,
        job.wrapper_path,
        bundled,
    )
    return [*wrapper_parts(staged, job.wrapper_path, bundled), (job.wrapper_path, wrapper)]


class Stager:
    """Where one adapter's jobs are staged: the folders, the output path, the files."""

    def __init__(self, executor: Executor, workdir: str, output_template: str) -> None:
        self.executor = executor
        self.workdir = workdir
        #: a job's output file in its folder, with the scheduler's own id placeholder
        self.output_template = output_template

    def folder(self, remote_dir: Optional[str], token: str, made: datetime) -> str:
        """The submission's folder: ``remote_dir``, else a new one under the workdir,
        named by when the submission was made and its token."""
        directory = remote_dir or posixpath.join(
            self.workdir, f"{made.strftime('%Y%m%d-%H%M%S')}-{token}"
        )
        return self.executor.abspath(directory)

    def output_path(self, job: PreparedJob, resources: Resources) -> str:
        """The output path handed to the scheduler (its own placeholder kept)."""
        return posixpath.join(job.remote_dir, resources.output or self.output_template)

    def bundle(self, job: PreparedJob, tasks: Sequence[TaskSpec]) -> Dict[str, str]:
        """The text of each of ``job``'s single-use scripts that can travel in its
        wrapper's table (``jobscript.can_bundle``), by staged path; the others are copied.
        A script that cannot be read here is left to ``stage``, which says so."""
        bundled: Dict[str, str] = {}
        for remote, task in zip(job.scripts, tasks):
            if remote not in job.single_use:
                continue
            try:
                if os.path.getsize(task.script) > BUNDLED_SCRIPT_MAX:
                    continue
                with open(task.script, encoding="utf-8", newline="") as source:
                    text = source.read()
            except (OSError, UnicodeDecodeError):
                continue
            if can_bundle(text):
                bundled[remote] = text
        return bundled

    def stage(
        self,
        job: PreparedJob,
        tasks: Sequence[TaskSpec],
        files: Sequence[Tuple[str, str]],
        bundled: AbstractSet[str] = frozenset(),
    ) -> None:
        """Create the job folder, copy the scripts (but the ``bundled`` ones, which
        travel in ``files``), write the wrapper's ``files``."""
        executor = self.executor
        try:
            executor.mkdir(job.remote_dir, mode=0o700)
            executor.mkdir(posixpath.join(job.remote_dir, MARKER_DIR), mode=0o700)
            copied = set(bundled)
            for remote, task in zip(job.scripts, tasks):
                if remote not in copied:
                    executor.put(task.script, remote, mode=0o700)
                    copied.add(remote)
            for path, text in files:
                executor.write_text(path, text, mode=0o700)
        except (OSError, TransportError) as exc:
            raise JobSubmissionError(
                f"cannot stage the job into {job.remote_dir}: {exc} "
                "(check that the folder is writable and the transport is up)"
            ) from exc

    def unstage(self, folder: str) -> None:
        """Remove a folder staged for a submission that was refused (nothing of it was
        submitted); a failure is logged, never raised over the refusal."""
        try:
            result = self.executor.run(["rm", "-rf", "--", folder], timeout=60)
            problem = "" if result.ok else result.message()
        except (OSError, TransportError) as exc:
            problem = str(exc)
        if problem:
            log.warning("could not remove %s, staged for a refused submission: %s", folder, problem)


def dependency_ids(depends_on: DependsOn, normalize: Any) -> List[str]:
    """The parents as the scheduler writes its ids; text that is no id of it is refused
    like a parent that cannot be found (``dependencies``)."""
    if depends_on is None:
        return []
    if isinstance(depends_on, (str, int)):
        depends_on = [depends_on]
    ids = []
    for job_id in depends_on:
        try:
            ids.append(normalize(job_id))
        except (JobNotFoundError, ValueError) as exc:
            raise JobSubmissionError(
                f"parent job {job_id!r} cannot be found: {exc}; nothing was submitted"
            ) from None
    return ids
