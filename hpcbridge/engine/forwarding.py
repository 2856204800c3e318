"""A signal the wrapper passes on to the script (Slurm's ``--signal=B:``): its traps, the
``hpcb_pass`` function, the script run in the background and waited for: shell text for
``jobscript.build_wrapper`` (pure)."""

from __future__ import annotations

from typing import List, Sequence

#: how many tenths of a second a forwarded signal waits for the script to catch it
FORWARD_PATIENCE = 100

#: the signals the wrapper traps (TERM first), whether it passes one on or not
NOTED = ("TERM", "USR1", "USR2", "HUP", "ALRM", "INT")


def forward_trap_lines(forward: str) -> List[str]:
    """The wrapper's traps when it passes ``forward`` on to the script (``hpcb_pass``),
    the other signals only noted; set before anything else."""
    return [
        # Any trapped signal ends a wait early: it is waited for again.
        "hpcb_again=; hpcb_child=; hpcb_pending=; hpcb_passing=; hpcb_sure=",
        *_masks_function(),
        *_ready_function(),
        *_pass_function(forward),
        *_forward_traps(forward),
    ]


def forwarded_run_lines(started: Sequence[str]) -> List[str]:
    """Run the script in the background (``started``: the lines that start it, ending in
    ``&``) and wait for it, waited for again after each trapped signal; ``hpcb_rc`` its
    exit code."""
    return [
        # the signals this shell catches, as the script's process has them until its exec
        'hpcb_masks "$$"; hpcb_mine=$hpcb_cgt',
        *started,
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
    ]


def _forward_traps(forward: str) -> List[str]:
    others = " ".join(name for name in NOTED if name != forward)
    return [f"trap 'hpcb_again=1; hpcb_pass' {forward}", f"trap 'hpcb_again=1' {others}"]


def _masks_function() -> List[str]:
    """``hpcb_masks PID``: the State and low SigCgt and SigIgn words of ``/proc/PID``."""
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
    ]


def _ready_function() -> List[str]:
    """``hpcb_ready``: whether the script is ready for the signal ``hpcb_num``."""
    return [
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
    ]


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
        "hpcb_pass() {",
        "  hpcb_pending=1",
        '  if [ -n "$hpcb_child" ] && [ -z "$hpcb_passing" ]; then',
        f"    hpcb_passing=1; trap '' {' '.join(NOTED)}",
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
