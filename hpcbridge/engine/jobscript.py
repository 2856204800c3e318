"""The portable wrapper that runs a user's script and records its exit code (no
scheduler directives: one wrapper for every scheduler; the exit-code file tells the end
where the scheduler forgot the job), and the files of one submission (its tokens, the
staged scripts' names, its chunks).  The wrapper's parts: a many-task table
(``task_table.py``), a signal passed on to the script (``forwarding.py``), a container
image (``containers.py``)."""

from __future__ import annotations

import os
import posixpath
import shlex
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import AbstractSet, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import __version__
from .containers import STOP_RELAY, setup_lines
from .forwarding import NOTED, forward_trap_lines, forwarded_run_lines
from .task_table import (
    NO_TASK,
    TASKS_PER_PART,
    UNPACK_FUNCTION,
    Entry,
    index_check_lines,
    part_files,
    part_lines,
    table_lines,
)

MARKER_DIR = ".hpcbridge"

#: the variable a many-task wrapper reads first to pick its task
TASK_INDEX_VARIABLE = "HPCBRIDGE_TASK_INDEX"
#: what the wrapper exports: the command that starts parallel tasks inside the job
LAUNCHER_VARIABLE = "HPCBRIDGE_LAUNCHER"
#: set when the wrapper runs as several tasks of one job (Flux): each records its code in
#: ``<exit file>.rank<N>``; the last to end writes the highest into the exit file
EXIT_RANKS_VARIABLE = "HPCBRIDGE_EXIT_RANKS"


def new_token() -> str:
    """A short unique name for one submission's files."""
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class TaskSpec:
    """One thing to run: a staged script, its arguments and extra environment."""

    script: str
    arguments: Sequence[str] = ()
    environment: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PreparedJob:
    """Where a submission's files live on the scheduler's side."""

    token: str
    remote_dir: str
    wrapper_path: str
    exit_file: str
    scripts: List[str]
    #: the name of the submission as a whole (a Slurm array's); each task's: ``name_of``
    job_name: str
    #: each task's own name, in task order; empty: every task is called ``job_name``
    task_names: Tuple[str, ...] = ()
    #: the staged scripts one task alone of the whole submission runs (may be ``bundled``)
    single_use: AbstractSet[str] = frozenset()

    def name_of(self, index: int) -> str:
        """Task ``index``'s own name."""
        return self.task_names[index] if self.task_names else self.job_name

    def exit_file_for(self, index: int, count: int) -> str:
        """Where task ``index`` of a wrapper of ``count`` tasks records its exit code."""
        return self.exit_file if count == 1 else f"{self.exit_file}.{index}"


def marker_path(remote_dir: str, token: str, suffix: str) -> str:
    return posixpath.join(remote_dir, MARKER_DIR, f"{token}{suffix}")


@dataclass(frozen=True)
class Running:
    """How the wrapper runs a task's script, beyond the task itself."""

    #: what it exports as ``HPCBRIDGE_LAUNCHER``
    launcher: str = ""
    #: a signal it passes on to the script (``signal=B:...``: sent to the wrapper alone)
    forward: Optional[str] = None
    #: a container runtime's words the script's command is put after (``container_words``)
    container: Tuple[str, ...] = ()
    #: the job's folder as the container shows it (``FOLDER_INSIDE``)
    inside: str = ""


def build_wrapper(
    tasks: Sequence[TaskSpec],
    workdir: str,
    exit_file: str,
    array_index_variable: Optional[str] = None,
    running: Running = Running(),
    parts_path: Optional[str] = None,
    bundled: Optional[Mapping[str, str]] = None,
) -> str:
    """The wrapper's text.  With several tasks, job ``i`` runs task ``i``: its index is
    the first argument, else ``array_index_variable``, else ``HPCBRIDGE_TASK_INDEX``;
    its exit file is ``<exit_file>.<index>``.  The table of tasks holds what each sets,
    a line a task (none when all set the same); with ``parts_path`` and more than
    ``TASKS_PER_PART`` tasks it is in parts (``wrapper_parts``).  ``bundled``: script
    path -> text of scripts that travel in the table (always in parts), written by
    their task when it starts.  ``running``: launcher, forwarded signal, container.
    """
    if not tasks:
        raise ValueError("no task to wrap")
    if len(tasks) == 1:
        unset = f"unset {TASK_INDEX_VARIABLE}"
        picked = [unset, f"hpcb_exit={shlex.quote(exit_file)}", _task_line(tasks[0])]
    else:
        picked = _pick_lines(tasks, exit_file, array_index_variable, parts_path, bundled)
    run = _run_lines(running.forward, running.container, running.inside)
    body = [*_header_lines(workdir, running), *picked, *run, *_record_lines()]
    return "\n".join([*body, 'exit "$hpcb_rc"', ""])


def _header_lines(workdir: str, running: Running) -> List[str]:
    """The traps, the job's folder, the start time, the launcher, the ranks' count."""
    return [
        "#!/bin/sh",
        f"# Generated by hpcbridge {__version__}: runs the staged script and records its exit",
        "# code.  No scheduler directives: every option is on the submit command line.",
        # first: a signal that comes while the wrapper sets up is not its end
        *_trap_lines(running.forward),
        f"cd {shlex.quote(workdir)} || exit 97",
        # Linux: /proc/uptime now and at the end; elsewhere the start (BSD date: a literal N)
        "hpcb_start=; hpcb_up0=",
        "read -r hpcb_up0 hpcb_rest < /proc/uptime 2>/dev/null \\",
        "  || hpcb_start=$(date +%s.%N 2>/dev/null) || hpcb_start=",
        'case "$hpcb_start" in *N) hpcb_start=${hpcb_start%.*} ;; esac',
        f"{LAUNCHER_VARIABLE}={shlex.quote(running.launcher)}; export {LAUNCHER_VARIABLE}",
        f'hpcb_ranks="${{{EXIT_RANKS_VARIABLE}:-}}"; unset {EXIT_RANKS_VARIABLE}',
    ]


def _pick_lines(
    tasks: Sequence[TaskSpec],
    exit_file: str,
    array_index_variable: Optional[str],
    parts_path: Optional[str],
    bundled: Optional[Mapping[str, str]],
) -> List[str]:
    """Which task this job of a many-task wrapper runs, and its exit file."""
    if array_index_variable:
        lines = [f'hpcb_index="${{1:-${{{array_index_variable}:-}}}}"']
    else:
        lines = [f'hpcb_index="${{{TASK_INDEX_VARIABLE}:-}}"']
    lines.append(f"unset {TASK_INDEX_VARIABLE}")
    lines.append(f'hpcb_exit={shlex.quote(exit_file)}."$hpcb_index"')
    if _alike(tasks):
        lines.extend(index_check_lines())
        lines.append(f'[ "$hpcb_index" -lt {len(tasks)} ] || {{ {NO_TASK}; }}')
        lines.append(_task_line(tasks[0]))
    elif parts_path is not None and (len(tasks) > TASKS_PER_PART or bundled):
        if bundled:
            lines.append(UNPACK_FUNCTION)
        lines.extend(part_lines(parts_path))
    else:
        lines.extend(table_lines(_entries(tasks, {})))
    return lines


def wrapper_parts(
    tasks: Sequence[TaskSpec], parts_path: str, bundled: Optional[Mapping[str, str]] = None
) -> List[Tuple[str, str]]:
    """The ``(path, text)`` of each part of a many-task wrapper's table (none when it is
    inline or there is no table)."""
    bundled = bundled or {}
    if len(tasks) < 2 or _alike(tasks) or (len(tasks) <= TASKS_PER_PART and not bundled):
        return []
    return part_files(_entries(tasks, bundled), parts_path)


def _entries(tasks: Sequence[TaskSpec], bundled: Mapping[str, str]) -> List[Entry]:
    """Each task as a line of the table (with its script's text when it is ``bundled``)."""
    return [(i, _task_line(task), bundled.get(task.script)) for i, task in enumerate(tasks)]


def _alike(tasks: Sequence[TaskSpec]) -> bool:
    """Whether every task sets the same (the same script, arguments, environment)."""
    first = _task_line(tasks[0])
    return all(_task_line(task) == first for task in tasks[1:])


def _trap_lines(forward: Optional[str]) -> List[str]:
    """The wrapper's traps, set before anything else (``forward``: passed on to the
    script, ``forwarding.py``)."""
    if forward:
        return forward_trap_lines(forward)
    return [
        # A TERM would end this shell before it records: trapped, it records 143.
        "trap 'hpcb_rc=143' TERM",
        # Flux signals the task's process group: trapped, the script alone acts on it.
        f"trap 'hpcb_warned=1' {' '.join(NOTED[1:])}",
    ]


def _record_lines() -> List[str]:
    """Write ``"<code> +<seconds ran>"`` or ``"<code> <start epoch|->"`` (the end: the
    file's mtime); with ``hpcb_ranks``, one code per task, then the highest."""
    return [
        'hpcb_record() { printf "%s\\n" "$2" > "$1.tmp.$$" && mv -f "$1.tmp.$$" "$1"; }',
        'hpcb_times="${hpcb_start:--}"',
        'if [ -n "$hpcb_up0" ] && read -r hpcb_up hpcb_rest < /proc/uptime 2>/dev/null; then',
        # dash's arithmetic aborts on non-digits; "1<cs>": a fraction like 08 is not octal
        '  case "$hpcb_up0:$hpcb_up" in',
        "    *[!0-9.:]* | *.*.*.* | *:*:*) ;;",
        "    [0-9]*.[0-9][0-9]:[0-9]*.[0-9][0-9])",
        "      hpcb_ran=$(( (${hpcb_up%.*} - ${hpcb_up0%.*}) * 100 ))",
        "      hpcb_ran=$(( hpcb_ran + 1${hpcb_up#*.} - 1${hpcb_up0#*.} ))",
        '      hpcb_cs="$((hpcb_ran % 100 / 10))$((hpcb_ran % 10))"',
        '      [ "$hpcb_ran" -lt 0 ] || hpcb_times="+$((hpcb_ran / 100)).$hpcb_cs" ;;',
        "  esac",
        "fi",
        'if [ -n "$hpcb_ranks" ]; then',
        '  hpcb_record "$hpcb_exit.rank${FLUX_TASK_RANK:-0}" "$hpcb_rc"',
        "  hpcb_max=0; hpcb_rank=0",
        '  while [ -n "$hpcb_max" ] && [ "$hpcb_rank" -lt "$hpcb_ranks" ]; do',
        '    hpcb_code=$(cat "$hpcb_exit.rank$hpcb_rank" 2>/dev/null) || hpcb_code=',
        '    if [ -z "$hpcb_code" ]; then hpcb_max=',
        '    elif [ "$hpcb_code" -gt "$hpcb_max" ]; then hpcb_max=$hpcb_code; fi',
        "    hpcb_rank=$((hpcb_rank + 1))",
        "  done",
        '  [ -z "$hpcb_max" ] || hpcb_record "$hpcb_exit" "$hpcb_max $hpcb_times"',
        "else",
        # one short write, no mv (an empty file reads as not written yet)
        '  printf "%s\\n" "$hpcb_rc $hpcb_times" > "$hpcb_exit"',
        "fi",
    ]


def _task_line(task: TaskSpec) -> str:
    """What one task sets, on one line: its environment, ``hpcb_script``, its arguments."""
    words = [
        *(
            f"{name}={shlex.quote(value)}; export {name}"
            for name, value in sorted(task.environment.items())
        ),
        f"hpcb_script={shlex.quote(task.script)}",
        " ".join(["set --", *(shlex.quote(argument) for argument in task.arguments)]),
    ]
    return "; ".join(words)


def _run_lines(
    forward: Optional[str] = None, container: Sequence[str] = (), folder_inside: str = ""
) -> List[str]:
    """Run the task's script; ``hpcb_rc`` its exit code.  ``forward``: a signal passed on
    to it (Slurm's ``--signal=B:``); ``container``: a runtime's words it runs after."""
    first = 'hpcb_first=; IFS= read -r hpcb_first < "$hpcb_script" || true'
    stop = [STOP_RELAY] if container else []
    if not forward:
        return [first, *_start_lines(container, folder_inside, ""), "hpcb_rc=$?", *stop]
    started = _start_lines(container, folder_inside, " &")
    return [first, *forwarded_run_lines(started), *stop]


def _start_lines(container: Sequence[str], folder_inside: str, after: str) -> List[str]:
    """Start the script (``after``: `` &`` in the background): by its own ``#!`` line,
    else with ``/bin/sh``; in a container, after the runtime's words."""
    inside = " ".join(container) + " " if container else ""
    named = setup_lines(container, folder_inside) if container else ["hpcb_run=$hpcb_script"]
    return [
        *named,
        'case "$hpcb_first" in',
        "  '#!'*) " + inside + '"$hpcb_run" "$@"' + after + " ;;",
        "  *) " + inside + '/bin/sh "$hpcb_run" "$@"' + after + " ;;",
        "esac",
    ]


def check_environment_names(environment: Mapping[str, str]) -> Dict[str, str]:
    """Environment names must be shell identifiers; values may be anything."""
    checked: Dict[str, str] = {}
    for name, value in environment.items():
        if not name.isidentifier() or not name.isascii():
            raise ValueError(f"environment variable name {name!r} is not a valid identifier")
        checked[name] = str(value)
    return checked


def staged_basenames(
    scripts: Sequence[str], taken: Optional[Mapping[str, str]] = None
) -> Dict[str, str]:
    """Each script's file name in a job folder, deduplicated (``run.sh``, ``run.sh.2``);
    ``taken``: the names already given in that folder."""
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


def shared_name(names: Sequence[str]) -> str:
    """The one name of a submission of tasks called ``names``: theirs, or ``t0.sh+99``."""
    if not names:
        raise ValueError("no task to name")
    if all(name == names[0] for name in names):
        return names[0]
    return f"{names[0]}+{len(names) - 1}"


def plan_chunks(
    directory: str,
    tasks: Sequence[TaskSpec],
    job_name: Optional[str],
    chunk_size: int,
    first_token: str,
    script_names: Optional[Mapping[str, str]] = None,
) -> List[Tuple[PreparedJob, List[TaskSpec]]]:
    """One wrapper per ``chunk_size`` tasks, all in one folder, named ``T``, ``T-1``...
    after ``first_token`` (one order always names the same files); ``script_names``:
    as ``staged_basenames``' ``taken``."""
    basenames = staged_basenames([task.script for task in tasks], script_names)
    scripts = [posixpath.join(directory, basenames[task.script]) for task in tasks]
    # a task's own name: job_name, else its script's file name
    names = [job_name or os.path.basename(task.script) or "hpcbridge" for task in tasks]
    single_use = {script for script, uses in Counter(scripts).items() if uses == 1}
    size = max(chunk_size, 1)
    chunks: List[Tuple[PreparedJob, List[TaskSpec]]] = []
    for start in range(0, len(tasks), size):
        end = min(start + size, len(tasks))
        token = first_token if start == 0 else f"{first_token}-{len(chunks)}"
        mine, own = scripts[start:end], names[start:end]
        job = PreparedJob(
            token=token,
            remote_dir=directory,
            wrapper_path=marker_path(directory, token, ".sh"),
            exit_file=marker_path(directory, token, ".exit"),
            scripts=mine,
            job_name=shared_name(own),
            task_names=tuple(own),
            single_use=frozenset(mine).intersection(single_use) if len(mine) > 1 else frozenset(),
        )
        chunks.append((job, list(tasks[start:end])))
    return chunks


def wrapper_files(
    job: PreparedJob,
    tasks: Sequence[TaskSpec],
    array_index_variable: Optional[str],
    running: Running = Running(),
    bundled: Optional[Mapping[str, str]] = None,
) -> List[Tuple[str, str]]:
    """``(path, text)`` of the parts of the wrapper's table, then of the wrapper."""
    staged = [
        TaskSpec(remote, task.arguments, task.environment)
        for remote, task in zip(job.scripts, tasks)
    ]
    wrapper = build_wrapper(
        staged,
        job.remote_dir,
        job.exit_file,
        array_index_variable,
        running,
        job.wrapper_path,
        bundled,
    )
    return [*wrapper_parts(staged, job.wrapper_path, bundled), (job.wrapper_path, wrapper)]
