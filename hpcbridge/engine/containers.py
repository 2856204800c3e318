"""A job's script run in a container image: each runtime's words, where it shows the
job's folder, and the relay that lets ``$HPCBRIDGE_LAUNCHER`` inside it start tasks
through the site's launcher outside: shell text for ``jobscript.build_wrapper`` (pure)."""

from __future__ import annotations

import shlex
from typing import List, Mapping, Sequence, Tuple

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


def setup_lines(container: Sequence[str], folder_inside: str) -> List[str]:
    """Before the script runs in a container: its name from the job's folder, ``USER``
    (ch-run wants it), the launch relay."""
    return [
        'case $hpcb_script in "$PWD"/*) hpcb_run=./${hpcb_script#"$PWD"/} ;;'
        " *) hpcb_run=$hpcb_script ;; esac",
        '[ -n "${USER:-}" ] || { USER=$(id -un); export USER; }',
        *_relay_lines(container, folder_inside),
    ]


#: the relay stops with the script (every launch it asked for has ended)
STOP_RELAY = '[ -z "$hpcb_relay" ] || { kill "$hpcb_relay" 2>/dev/null; rm -rf "$hpcb_req"; }'


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
