"""The portable wrapper that runs a user's script and records its exit code (no
scheduler directives: one wrapper for every scheduler; the exit-code file tells the end
where the scheduler forgot the job)."""

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
LAUNCHER_VARIABLE = "HPCBRIDGE_LAUNCHER"
#: set when the wrapper runs as several tasks of one job (Flux): each records its code in
#: ``<exit file>.rank<N>``; the last to end writes the highest into the exit file
EXIT_RANKS_VARIABLE = "HPCBRIDGE_EXIT_RANKS"
#: tasks per part of a many-task wrapper's table (``<wrapper>.<k>``, sourced by its jobs)
TASKS_PER_PART = 100
#: the largest script that travels in a wrapper's table (``build_wrapper``'s ``bundled``)
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


#: each container runtime's words before a script, the job's folder ($PWD) bound as the
#: working directory (ch-run at /mnt: it cannot make a mount point in a read-only image)
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

#: ``$HPCBRIDGE_LAUNCHER`` inside a container: hands the launcher's options and the command
#: (after ``--``, else the first word naming a command in the image) to the wrapper outside
#: through a request file, and waits for the launch's exit code
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
    lines = [
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
    if len(tasks) == 1:
        lines.append(f"unset {TASK_INDEX_VARIABLE}")
        lines.append(f"hpcb_exit={shlex.quote(exit_file)}")
        lines.append(_task_line(tasks[0]))
    else:
        if array_index_variable:
            lines.append(f'hpcb_index="${{1:-${{{array_index_variable}:-}}}}"')
        else:
            lines.append(f'hpcb_index="${{{TASK_INDEX_VARIABLE}:-}}"')
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
    run = _run_lines(running.forward, running.container, running.inside)
    return "\n".join([*lines, *run, *_record_lines(), 'exit "$hpcb_rc"', ""])


def wrapper_parts(
    tasks: Sequence[TaskSpec], parts_path: str, bundled: Optional[Mapping[str, str]] = None
) -> List[Tuple[str, str]]:
    """The ``(path, text)`` of each part of a many-task wrapper's table (none when it is
    inline or there is no table)."""
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
    """Whether a script's text can travel in a wrapper's table (a here-document)."""
    return (
        len(text) <= BUNDLED_SCRIPT_MAX and "\0" not in text and (not text or text.endswith("\n"))
    )


def _alike(tasks: Sequence[TaskSpec]) -> bool:
    """Whether every task sets the same (the same script, arguments, environment)."""
    first = _task_line(tasks[0])
    return all(_task_line(task) == first for task in tasks[1:])


def _table_lines(
    tasks: Sequence[TaskSpec], indexes: Sequence[int], bundled: Mapping[str, str]
) -> List[str]:
    """The ``case`` that sets task ``$hpcb_index`` (a ``bundled`` script's text after it)."""
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


#: writes a bundled script to ``$hpcb_script`` unless there: renamed into place, as the
#: tasks of one Flux job run this at once
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


def _relay_lines(container: Sequence[str], folder_inside: str) -> List[str]:
    """With a launcher, ``$HPCBRIDGE_LAUNCHER`` in the container is ``LAUNCH_RELAY``, its
    requests run here as ``$LAUNCHER OPTIONS RUNTIME... IMAGE -- COMMAND``."""
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
    """Run the task's script; ``hpcb_rc`` its exit code.  ``forward``: a signal passed on
    to it (Slurm's ``--signal=B:``); ``container``: a runtime's words it runs after."""
    inside = " ".join(container) + " " if container else ""
    # In a container the script is named from the job's folder; ch-run wants USER.
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
            'hpcb_first=; IFS= read -r hpcb_first < "$hpcb_script" || true',
            *starts(""),
            "hpcb_rc=$?",
            *stop,
        ]
    return [
        'hpcb_first=; IFS= read -r hpcb_first < "$hpcb_script" || true',
        # the signals this shell catches, as the script's process has them until its exec
        'hpcb_masks "$$"; hpcb_mine=$hpcb_cgt',
        *starts(" &"),
        "hpcb_child=$!",
        # a signal that came before the script had a pid goes to it now
        '[ -z "$hpcb_pending" ] || hpcb_pass',
        'wait "$hpcb_child"; hpcb_rc=$?',
        # dash keeps an ended child's status: a second wait gives it again; bash as sh
        # (POSIX mode) forgets it once given: 127, the pid gone, keeps the first answer.
        'while [ -n "$hpcb_again" ]; do',
        '  hpcb_again=; wait "$hpcb_child" 2>/dev/null; hpcb_next=$?',
        '  [ "$hpcb_next" = 127 ] && ! kill -0 "$hpcb_child" 2>/dev/null || hpcb_rc=$hpcb_next',
        "done",
        *stop,
    ]


#: how many tenths of a second a forwarded signal waits for the script to catch it
FORWARD_PATIENCE = 100


def _trap_lines(forward: Optional[str]) -> List[str]:
    """The wrapper's traps, set before anything else.  ``forward``: the signal passed on
    to the script (``hpcb_pass``), the others only noted."""
    if not forward:
        return [
            # A TERM would end this shell before it records: trapped, it records 143.
            "trap 'hpcb_rc=143' TERM",
            # Flux signals the task's process group: trapped, the script alone acts on it.
            f"trap 'hpcb_warned=1' {' '.join(_NOTED[1:])}",
        ]
    return [
        # Any trapped signal ends a wait early: it is waited for again.
        "hpcb_again=; hpcb_child=; hpcb_pending=; hpcb_passing=; hpcb_sure=",
        *_pass_function(forward),
        *_forward_traps(forward),
    ]


#: the signals the wrapper traps (TERM first)
_NOTED = ("TERM", "USR1", "USR2", "HUP", "ALRM", "INT")


def _forward_traps(forward: str) -> List[str]:
    others = " ".join(name for name in _NOTED if name != forward)
    return [f"trap 'hpcb_again=1; hpcb_pass' {forward}", f"trap 'hpcb_again=1' {others}"]


def _pass_function(forward: str) -> List[str]:
    """``hpcb_pass``: send ``forward`` to the script, noted for later while it has no pid.
    A script starts with the signal's default action (most: the end) until its own trap:
    on Linux the signal waits until the script catches or ignores it (its ``/proc`` masks;
    a catch the wrapper's own, as a child has it before its exec, does not count), or
    ``FORWARD_PATIENCE`` has passed, or the script has ended; elsewhere it goes at once.
    While it passes one the trapped signals are ignored (the forwarded one merged into the
    one passed): dash runs a trap inside a trap, and the inner one's status became the
    outer one's test result."""
    return [
        # hpcb_read: 0 the State and low SigCgt and SigIgn words of /proc/$1 were read
        # whole, 1 not (sh's arithmetic on a bad word would end the wrapper), 2 no file
        "hpcb_masks() {",
        "  hpcb_state=; hpcb_cgt=; hpcb_ign=; hpcb_read=2",
        '  if [ -r "/proc/$1/status" ]; then',
        "    while IFS=': \t' read -r hpcb_k hpcb_v hpcb_rest; do",
        "      case $hpcb_k in",
        "        State) hpcb_state=$hpcb_v ;;",
        "        SigCgt) hpcb_cgt=$hpcb_v ;;",
        "        SigIgn) hpcb_ign=$hpcb_v ;;",
        "      esac",
        '    done < "/proc/$1/status"',
        "    hpcb_read=1",
        # 16 hex digits whole (64 signals), of which the low 8 (1-32) are kept
        "    case $hpcb_cgt:$hpcb_ign in",
        "      *[!0-9a-fA-F:]* | *:*:*) ;;",
        "      ????????????????*:????????????????*)",
        '        hpcb_cgt=${hpcb_cgt#"${hpcb_cgt%????????}"}',
        '        hpcb_ign=${hpcb_ign#"${hpcb_ign%????????}"}',
        "        hpcb_read=0 ;;",
        "    esac",
        "  fi",
        "}",
        # hpcb_go=1: send it now (no /proc, the script ignores or catches it, or ended);
        # hpcb_mine: the wrapper's catches, a child's until its exec
        "hpcb_ready() {",
        '  hpcb_go=; hpcb_masks "$hpcb_child"',
        '  if [ "$hpcb_read" = 2 ] || [ "$hpcb_state" = Z ]; then hpcb_go=1',
        '  elif [ "$hpcb_read" = 0 ]; then',
        "    if [ $(( (0x$hpcb_ign >> (hpcb_num - 1)) & 1 )) = 1 ]; then hpcb_go=1",
        "    elif [ $(( (0x$hpcb_cgt >> (hpcb_num - 1)) & 1 )) = 1 ] \\",
        '      && [ "$hpcb_cgt" != "$hpcb_mine" ]; then hpcb_go=1',
        "    fi",
        "  fi",
        "}",
        "hpcb_pass() {",
        "  hpcb_pending=1",
        '  if [ -n "$hpcb_child" ] && [ -z "$hpcb_passing" ]; then',
        f"    hpcb_passing=1; trap '' {' '.join(_NOTED)}",
        '    if [ -z "$hpcb_sure" ] && [ -r "/proc/$$/status" ]; then',
        # the signal's number as this system numbers it (1-31: the masks' low word)
        "      hpcb_num=1",
        '      while [ "$hpcb_num" -lt 32 ] \\',
        f'        && [ "$(kill -l "$hpcb_num" 2>/dev/null)" != {forward} ]; do',
        "        hpcb_num=$((hpcb_num + 1))",
        "      done",
        '      hpcb_go=; hpcb_tries=0; [ "$hpcb_num" -lt 32 ] || hpcb_go=1',
        f'      while [ -z "$hpcb_go" ] && [ "$hpcb_tries" -lt {FORWARD_PATIENCE} ]; do',
        '        hpcb_ready; [ -n "$hpcb_go" ] || sleep 0.1; hpcb_tries=$((hpcb_tries + 1))',
        "      done",
        "      hpcb_sure=1",  # waited for once: later signals go at once
        "    fi",
        f'    hpcb_pending=; kill -{forward} "$hpcb_child" 2>/dev/null',
        f"    {'; '.join(_forward_traps(forward))}; hpcb_passing=",
        '    [ -z "$hpcb_pending" ] || hpcb_pass',  # one that came in between
        "  fi",
        "}",
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
