"""The portable wrapper that runs a user's script and records its exit code.

No ``#SBATCH`` or ``# flux:`` directives: every option goes on the submit
command line, so the same wrapper serves every scheduler.  The exit-code
file lets the final state be known even where the scheduler has forgotten
the job (accounting off, history purged) - an idea from PSI/J.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import AbstractSet, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import __version__

MARKER_DIR = ".hpcbridge"

#: the variable a many-task wrapper reads first to pick its task
TASK_INDEX_VARIABLE = "HPCBRIDGE_TASK_INDEX"
#: what the wrapper exports: the command that starts parallel tasks inside the job
#: (``srun``, ``flux run``; empty where there is none)
LAUNCHER_VARIABLE = "HPCBRIDGE_LAUNCHER"
#: set by a driver when the wrapper runs as each of several tasks of one job (a
#: Flux plain job): each task records its exit code in ``<exit file>.rank<N>``,
#: and whichever ends last writes the highest into the exit file itself
EXIT_RANKS_VARIABLE = "HPCBRIDGE_EXIT_RANKS"
#: tasks per part of a many-task wrapper's table (``<wrapper>.<k>``, sourced by the
#: job that runs one of them): a job's shell parses its part, not a table of
#: thousands (3,000 tasks inline: 19 ms a job instead of 3)
TASKS_PER_PART = 100
#: the largest script that travels in a wrapper's table (``build_wrapper``'s
#: ``bundled``) instead of being copied into the job folder on its own
BUNDLED_SCRIPT_MAX = 64 * 1024


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
    #: the name the scheduler shows for the submission as a whole (a Slurm array's one
    #: name); each task's own is ``name_of``
    job_name: str
    #: each task's own name, in task order (its script's file name, or the caller's
    #: ``job_name``); empty: every task is called ``job_name``
    task_names: Tuple[str, ...] = ()
    #: the staged scripts (of ``scripts``) that one task alone of the whole submission
    #: runs: they may travel in the wrapper's table, written by their task when it
    #: starts (``build_wrapper``'s ``bundled``), instead of being copied one by one
    single_use: AbstractSet[str] = frozenset()

    def name_of(self, index: int) -> str:
        """Task ``index``'s own name: what its record keeps and what it is called when
        it is submitted alone (one Flux job, one Slurm job where arrays are refused)."""
        return self.task_names[index] if self.task_names else self.job_name

    def exit_file_for(self, index: int, count: int) -> str:
        """Where task ``index`` of a wrapper of ``count`` tasks records its exit code
        (the same rule ``build_wrapper`` writes into the wrapper)."""
        return self.exit_file if count == 1 else f"{self.exit_file}.{index}"


def marker_path(remote_dir: str, token: str, suffix: str) -> str:
    return posixpath.join(remote_dir, MARKER_DIR, f"{token}{suffix}")


@dataclass(frozen=True)
class Running:
    """How the wrapper runs a task's script, beyond the task itself."""

    #: what it exports as ``HPCBRIDGE_LAUNCHER`` (``srun``, ``flux run``; none under mock)
    launcher: str = ""
    #: a signal it passes on to the script (``signal=B:...``: sent to the wrapper alone)
    forward: Optional[str] = None
    #: shell words the script's command is put after: a container runtime's
    #: (``container_words``); none: the script runs as it is
    container: Tuple[str, ...] = ()
    #: the job's folder as the container shows it (``FOLDER_INSIDE``)
    inside: str = ""


#: the container runtimes the wrapper can run a script in, and their words before it,
#: the job's folder ($PWD) bound and the working directory.  ch-run binds it at /mnt:
#: unprivileged, it cannot make a mount point in a read-only image, and /mnt is in
#: every image; Apptainer and Singularity bind it at its own path.
CONTAINER_RUNTIMES: Mapping[str, Tuple[str, ...]] = {
    "ch-run": ("ch-run", "-b", '"$PWD":/mnt', "-c", "/mnt", "{image}", "--"),
    "apptainer": ("apptainer", "exec", "--bind", '"$PWD"', "--pwd", '"$PWD"', "{image}"),
    "singularity": ("singularity", "exec", "--bind", '"$PWD"', "--pwd", '"$PWD"', "{image}"),
}


#: where each runtime shows the job's folder inside the container (a shell word)
FOLDER_INSIDE: Mapping[str, str] = {
    "ch-run": "/mnt",
    "apptainer": '"$PWD"',
    "singularity": '"$PWD"',
}

#: ``$HPCBRIDGE_LAUNCHER`` inside a container: it hands the launcher's options and the
#: command to the wrapper outside (a request file in the job's folder) and waits there
#: for the launch's exit code.  The command is the first word after ``--``, else the
#: first that is not an option and names a command in the image (``2`` in ``-n 2`` does
#: not).  It uses sh, sed, date, dirname and sleep of the image.
LAUNCH_RELAY = r"""#!/bin/sh
# hpcbridge: "$HPCBRIDGE_LAUNCHER [OPTIONS] COMMAND [ARGS]" in a container: the wrapper
# outside runs the site's launcher with OPTIONS, each task COMMAND in this same image.
hpcb_q() { printf " '%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
hpcb_opts=; hpcb_cmd=
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; break ;;
    -*) ;;
    *) command -v "$1" >/dev/null 2>&1 && break ;;
  esac
  hpcb_opts="$hpcb_opts$(hpcb_q "$1")"; shift
done
[ $# -gt 0 ] || { echo "hpcbridge: $0: no command among its words to launch" >&2; exit 2; }
for hpcb_a in "$@"; do hpcb_cmd="$hpcb_cmd$(hpcb_q "$hpcb_a")"; done
hpcb_d=$(dirname "$0"); hpcb_n=$$.$(date +%s%N)
printf '%s
%s
' "$hpcb_opts" "$hpcb_cmd" > "$hpcb_d/$hpcb_n.tmp" || exit 126
mv "$hpcb_d/$hpcb_n.tmp" "$hpcb_d/$hpcb_n.req" || exit 126
while [ ! -e "$hpcb_d/$hpcb_n.rc" ]; do sleep 0.2; done
read -r hpcb_rc < "$hpcb_d/$hpcb_n.rc"; rm -f "$hpcb_d/$hpcb_n.rc"; exit "$hpcb_rc"
"""


def container_words(runtime: str, image: str) -> Tuple[str, ...]:
    """The shell words that run a script in ``image`` with ``runtime``."""
    quoted = shlex.quote(image)
    return tuple(quoted if word == "{image}" else word for word in CONTAINER_RUNTIMES[runtime])


def build_wrapper(
    tasks: Sequence[TaskSpec],
    workdir: str,
    exit_file: str,
    array_index_variable: Optional[str] = None,
    running: Running = Running(),
    parts_path: Optional[str] = None,
    bundled: Optional[Mapping[str, str]] = None,
) -> str:
    """The wrapper's text.

    With one task, it runs that task.  With several, job ``i`` runs task
    ``i``: with ``array_index_variable`` (Slurm's ``SLURM_ARRAY_TASK_ID``) the
    index is the wrapper's first argument, else that variable; without, it is
    ``HPCBRIDGE_TASK_INDEX`` (set per job by drivers that submit jobs one by
    one with an environment each); the exit file
    gets the index as a suffix, ``<exit_file>.<index>``.  The table of tasks
    holds only what each sets (its environment, script and arguments), one line
    a task; the code that runs it is written once.  Tasks that all set the same
    need no table, only a check of the index.  With ``parts_path`` and more than
    ``TASKS_PER_PART`` tasks, the table is not inline: job ``i`` sources
    ``<parts_path>.<i // TASKS_PER_PART>`` (``wrapper_parts``).

    ``bundled`` maps a task's script path to its text: that script is not staged
    on its own but travels in the table (always in parts, so the submitted wrapper
    stays small), and its task writes it to its path when it starts (a ``cat``, a
    ``chmod`` and a ``mv``; skipped when it is already there, as for a requeued task).  One
    file per hundred tasks instead of one per script: a sweep of distinct scripts
    is staged as fast as one of a single script.  Only for scripts one task runs.

    ``running``: what it exports as the launcher, a signal it passes on, a container it
    runs the script in (``_run_lines``).
    """
    lines = _wrapper_lines(
        tasks, workdir, exit_file, array_index_variable, running.launcher, parts_path, bundled or {}
    )
    run = _run_lines(running.forward, running.container, running.inside)
    return "\n".join([*lines, *run, *_record_lines(), 'exit "$hpcb_rc"', ""])


def wrapper_parts(
    tasks: Sequence[TaskSpec], parts_path: str, bundled: Optional[Mapping[str, str]] = None
) -> List[Tuple[str, str]]:
    """The ``(path, text)`` of each part of a many-task wrapper's table (none when the
    table is inline: ``TASKS_PER_PART`` tasks or fewer and no script ``bundled``; none
    when the tasks all set the same: no table at all)."""
    bundled = bundled or {}
    if len(tasks) < 2 or _alike(tasks) or (len(tasks) <= TASKS_PER_PART and not bundled):
        return []
    parts = []
    for first in range(0, len(tasks), TASKS_PER_PART):
        indexes = range(first, min(first + TASKS_PER_PART, len(tasks)))
        lines = _table_lines(tasks, indexes, bundled)
        parts.append((f"{parts_path}.{first // TASKS_PER_PART}", "\n".join(lines) + "\n"))
    return parts


def can_bundle(text: str) -> bool:
    """Whether a script's text can travel in a wrapper's table: shell text (no NUL),
    ending with a line end (a here-document adds one), at most ``BUNDLED_SCRIPT_MAX``."""
    return (
        len(text) <= BUNDLED_SCRIPT_MAX and "\0" not in text and (not text or text.endswith("\n"))
    )


def _wrapper_lines(
    tasks: Sequence[TaskSpec],
    workdir: str,
    exit_file: str,
    array_index_variable: Optional[str],
    launcher: str,
    parts_path: Optional[str],
    bundled: Mapping[str, str],
) -> List[str]:
    if not tasks:
        raise ValueError("no task to wrap")
    lines = [
        "#!/bin/sh",
        f"# Generated by hpcbridge {__version__}: runs the staged script and records its exit",
        "# code.  No scheduler directives: every option is on the submit command line.",
        f"cd {shlex.quote(workdir)} || exit 97",
        # Linux: how long this shell ran is /proc/uptime now and at the end (no process
        # in every job; 20 bytes: dash's read takes a byte per system call, so not the
        # 300 of /proc/$$/stat).  Elsewhere, when it started: date +%s.%N gives
        # nanoseconds with GNU date; BSD and old busybox print a literal N, cut off here.
        "hpcb_start=; hpcb_up0=",
        "read -r hpcb_up0 hpcb_rest < /proc/uptime 2>/dev/null \\",
        "  || hpcb_start=$(date +%s.%N 2>/dev/null) || hpcb_start=",
        'case "$hpcb_start" in *N) hpcb_start=${hpcb_start%.*} ;; esac',
        f"{LAUNCHER_VARIABLE}={shlex.quote(launcher)}; export {LAUNCHER_VARIABLE}",
        f'hpcb_ranks="${{{EXIT_RANKS_VARIABLE}:-}}"; unset {EXIT_RANKS_VARIABLE}',
    ]
    if len(tasks) == 1:
        lines.append(f"unset {TASK_INDEX_VARIABLE}")
        lines.append(f"hpcb_exit={shlex.quote(exit_file)}")
        lines.append(_task_line(tasks[0]))
    else:
        if array_index_variable:
            # An array's task: the array's own variable; one task submitted alone: its
            # index as the wrapper's argument (an index in the environment may be one
            # inherited from the job that submitted this one).
            lines.append(f'hpcb_index="${{1:-${{{array_index_variable}:-}}}}"')
        else:
            lines.append(f'hpcb_index="${{{TASK_INDEX_VARIABLE}:-}}"')
        # Read once, then gone: jobs the script submits in turn must not inherit it.
        lines.append(f"unset {TASK_INDEX_VARIABLE}")
        lines.append(f'hpcb_exit={shlex.quote(exit_file)}."$hpcb_index"')
        if _alike(tasks):
            lines.extend(_index_check_lines())
            lines.append(f'[ "$hpcb_index" -lt {len(tasks)} ] || {{ {NO_TASK}; }}')
            lines.append(_task_line(tasks[0]))
        elif parts_path is not None and (len(tasks) > TASKS_PER_PART or bundled):
            if bundled:
                lines.append(_UNPACK_FUNCTION)
            lines.extend(_part_lines(parts_path))
        else:
            lines.extend(_table_lines(tasks, range(len(tasks)), {}))
    return lines


def _alike(tasks: Sequence[TaskSpec]) -> bool:
    """Whether every task sets the same (the same script, arguments, environment)."""
    first = _task_line(tasks[0])
    return all(_task_line(task) == first for task in tasks[1:])


def _table_lines(
    tasks: Sequence[TaskSpec], indexes: Sequence[int], bundled: Mapping[str, str]
) -> List[str]:
    """The ``case`` that sets task ``$hpcb_index`` of ``indexes``, a line each (with
    its script's text after it when that is ``bundled``)."""
    lines = ['case "$hpcb_index" in']
    for index in indexes:
        task = tasks[index]
        text = bundled.get(task.script)
        if text is None:
            lines.append(f"  {index}) {_task_line(task)} ;;")
            continue
        end = _here_document_end(text)
        lines.append(f"  {index}) {_task_line(task)}; hpcb_unpack <<'{end}'")
        lines.append(f"{text}{end}")
        lines.append("  ;;")
    lines.append(f"  *) {NO_TASK} ;;")
    lines.append("esac")
    return lines


#: writes a bundled script (the here-document on its input) to ``$hpcb_script`` unless
#: it is there already: whole, then renamed into place, as several tasks of one Flux
#: job (``hpcb_ranks``) run this at once
_UNPACK_FUNCTION = (
    'hpcb_unpack() { [ -x "$hpcb_script" ] && return 0; '
    'hpcb_new="$hpcb_script.tmp.${FLUX_TASK_RANK:-0}.$$"; '
    'cat > "$hpcb_new" && chmod 700 "$hpcb_new" && mv -f "$hpcb_new" "$hpcb_script" '
    '|| echo "hpcbridge: cannot write $hpcb_script" >&2; }'
)


def _here_document_end(text: str) -> str:
    """A here-document delimiter that is no line of ``text``."""
    lines = set(text.split("\n"))
    end, counter = "HPCB_SCRIPT_END", 0
    while end in lines:
        counter += 1
        end = f"HPCB_SCRIPT_END_{counter}"
    return end


def _index_check_lines() -> List[str]:
    # Digits only, no leading zero: dash's arithmetic would abort, or read octal.
    return ['case "$hpcb_index" in', f"  '' | *[!0-9]* | 0?*) {NO_TASK} ;;", "esac"]


def _part_lines(parts_path: str) -> List[str]:
    """Source the part of the table that holds task ``$hpcb_index`` (``.``: no process)."""
    return [
        *_index_check_lines(),
        f'hpcb_part={shlex.quote(parts_path)}."$((hpcb_index / {TASKS_PER_PART}))"',
        f'[ -r "$hpcb_part" ] || {{ {NO_TASK}; }}',
        '. "$hpcb_part"',
    ]


#: what a wrapper asked for a task it does not have says, and its exit code
NO_TASK = "echo \"hpcbridge: no task '$hpcb_index'\" >&2; exit 98"


def _record_lines() -> List[str]:
    """Write the exit code and how long this shell ran (``"<code> +<seconds>"``), or
    when it started (``"<code> <start epoch>"``, ``-`` when not known); the end is the
    file's mtime.  With ``hpcb_ranks`` tasks, one code per task, then the highest once
    every task has written (the last one to end sees them all)."""
    return [
        'hpcb_record() { printf "%s\\n" "$2" > "$1.tmp.$$" && mv -f "$1.tmp.$$" "$1"; }',
        'hpcb_times="${hpcb_start:--}"',
        'if [ -n "$hpcb_up0" ] && read -r hpcb_up hpcb_rest < /proc/uptime 2>/dev/null; then',
        # /proc/uptime: seconds since boot, two decimals.  Digits and one dot each, or
        # dash's arithmetic aborts; "1<cs> - 1<cs0>": a fraction like 08 is not octal.
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
        # One short write, no mv process per job: a reader that finds the file still
        # empty takes it for not written yet (the rank files above, read by the other
        # ranks, are renamed into place whole).
        '  printf "%s\\n" "$hpcb_rc $hpcb_times" > "$hpcb_exit"',
        "fi",
    ]


def _task_line(task: TaskSpec) -> str:
    """What one task sets, on one line: its environment, its script (``hpcb_script``)
    and its arguments (the wrapper's own positional parameters, which are none)."""
    words = [
        *(
            f"{name}={shlex.quote(value)}; export {name}"
            for name, value in sorted(task.environment.items())
        ),
        f"hpcb_script={shlex.quote(task.script)}",
        " ".join(["set --", *(shlex.quote(argument) for argument in task.arguments)]),
    ]
    return "; ".join(words)


def _relay_lines(container: Sequence[str], folder_inside: str) -> List[str]:
    """With a launcher, ``$HPCBRIDGE_LAUNCHER`` in the container is ``LAUNCH_RELAY``, its
    requests served here, outside: ``$LAUNCHER OPTIONS RUNTIME... IMAGE -- COMMAND``,
    each task in the same image from the job's folder.  No launcher, no relay."""
    runtime = " ".join(container)
    return [
        'hpcb_relay=; if [ -n "$HPCBRIDGE_LAUNCHER" ]; then',
        "  hpcb_launcher=$HPCBRIDGE_LAUNCHER; hpcb_req=.hpcbridge-launch.$$",
        r'  mkdir -p "$hpcb_req" && cat > "$hpcb_req/launch" <<\HPCB_RELAY_END',
        *LAUNCH_RELAY.splitlines(),
        "HPCB_RELAY_END",
        '  chmod +x "$hpcb_req/launch"',
        "  hpcb_serve() {",
        "    while :; do",
        '      for hpcb_r in "$hpcb_req"/*.req; do',
        '        [ -e "$hpcb_r" ] && mv "$hpcb_r" "$hpcb_r.taken" || continue',
        '        ( { read -r hpcb_o; read -r hpcb_c; } < "$hpcb_r.taken"',
        # in a subshell of its own: an eval that cannot parse still answers (2)
        f'          ( eval "$hpcb_launcher $hpcb_o {_eval_quoted(runtime)} $hpcb_c" )',
        '          echo $? > "$hpcb_r.rc"; mv "$hpcb_r.rc" "${hpcb_r%.req}.rc" ) &',
        "      done",
        "      sleep 0.2",
        "    done",
        "  }",
        "  hpcb_serve & hpcb_relay=$!",
        f"  HPCBRIDGE_LAUNCHER={folder_inside}/$hpcb_req/launch; export HPCBRIDGE_LAUNCHER",
        "fi",
    ]


def _eval_quoted(words: str) -> str:
    """Shell words as they stand inside a double-quoted ``eval`` argument."""
    return words.replace("\\", "\\\\").replace('"', '\\"')


def _run_lines(
    forward: Optional[str] = None, container: Sequence[str] = (), folder_inside: str = ""
) -> List[str]:
    """Run the task's script with its arguments; ``hpcb_rc`` its exit code.  With
    ``forward`` (a signal's name) the script runs in the background and that signal,
    sent to this shell alone (Slurm's ``--signal=B:``), is passed on to it; with
    ``container`` (a runtime's words) the script runs in that container, its launcher
    relayed to this shell (``_relay_lines``)."""
    inside = " ".join(container) + " " if container else ""
    # In a container the script is named from the job's folder, bound as the working
    # directory (a script staged elsewhere keeps its path: the image may have it).
    # (ch-run wants USER, which a job's environment may lack.)
    named = (
        [
            'case $hpcb_script in "$PWD"/*) hpcb_run=./${hpcb_script#"$PWD"/} ;;'
            " *) hpcb_run=$hpcb_script ;; esac",
            '[ -n "${USER:-}" ] || { USER=$(id -un); export USER; }',
            *_relay_lines(container, folder_inside),
        ]
        if container
        else ["hpcb_run=$hpcb_script"]
    )

    def starts(after: str) -> List[str]:
        return [
            *named,
            'case "$hpcb_first" in',
            "  '#!'*) " + inside + '"$hpcb_run" "$@"' + after + " ;;",
            "  *) " + inside + '/bin/sh "$hpcb_run" "$@"' + after + " ;;",
            "esac",
        ]

    # the relay stops with the script (every launch it asked for has ended)
    stop = (
        ['[ -z "$hpcb_relay" ] || { kill "$hpcb_relay" 2>/dev/null; rm -rf "$hpcb_req"; }']
        if container
        else []
    )
    if not forward:
        return [
            # A TERM (cancel, time limit) would end this shell before it records
            # anything; with a trap it waits for the script, then records 143.
            # (A trap, not "ignore": an ignored signal stays ignored in the child.)
            "trap 'hpcb_rc=143' TERM",
            # A warning signal before the time limit (the signal key) reaches the whole
            # job - Flux's shell signals the task's process group - and would end this
            # shell too: trapped, the script alone acts on it (a child gets the default).
            "trap 'hpcb_warned=1' USR1 USR2 HUP ALRM INT",
            'hpcb_first=; IFS= read -r hpcb_first < "$hpcb_script" || true',
            *starts(""),
            "hpcb_rc=$?",
            *stop,
        ]
    return [
        # Any trapped signal ends a wait early: it is waited for again.  (As any
        # background command of a script, this one's input is /dev/null and INT and
        # QUIT are ignored in it.)
        "hpcb_again=",
        "trap 'hpcb_again=1' TERM USR1 USR2 HUP ALRM INT",
        'hpcb_first=; IFS= read -r hpcb_first < "$hpcb_script" || true',
        *starts(" &"),
        "hpcb_child=$!",
        f"trap 'hpcb_again=1; kill -{forward} \"$hpcb_child\" 2>/dev/null' {forward}",
        'wait "$hpcb_child"; hpcb_rc=$?',
        # The shell keeps an ended child's status: a second wait gives it again.
        'while [ -n "$hpcb_again" ]; do hpcb_again=; wait "$hpcb_child"; hpcb_rc=$?; done',
        *stop,
    ]


def check_environment_names(environment: Mapping[str, str]) -> Dict[str, str]:
    """Environment names must be shell identifiers; values may be anything."""
    checked: Dict[str, str] = {}
    for name, value in environment.items():
        if not name.isidentifier() or not name.isascii():
            raise ValueError(f"environment variable name {name!r} is not a valid identifier")
        checked[name] = str(value)
    return checked


# -- a submission's folder: which names, which wrappers --------------------


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
    running: Running = Running(),
    bundled: Optional[Mapping[str, str]] = None,
) -> List[Tuple[str, str]]:
    """``(path, text)`` of the wrapper and, with many tasks, the parts of its table
    (``jobscript.wrapper_parts``), the wrapper last; ``bundled``: the staged scripts
    that travel in the table (``Stager.bundle``); ``running``: ``build_wrapper``'s."""
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
