"""The ``hpcbridge`` command: submit, follow, read logs, cancel, list, cost, doctor, login."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Callable, Dict, Optional, Sequence

from ..errors import SchedulerAdapterError
from .costs import cmd_cost
from .exits import EXIT_BROKEN_PIPE, exit_code_for, exit_code_for_stop, stopped_by_signals
from .follow import cmd_cancel, cmd_logs, cmd_status, cmd_wait
from .output import one_line
from .parser import build_parser
from .probe import cmd_doctor, cmd_uri
from .records import cmd_jobs
from .session import cmd_login, cmd_logout
from .submit import cmd_submit, cmd_submit_many

COMMANDS: Dict[str, Callable[[argparse.Namespace], int]] = {
    "submit": cmd_submit,
    "submit-many": cmd_submit_many,
    "status": cmd_status,
    "wait": cmd_wait,
    "logs": cmd_logs,
    "cancel": cmd_cancel,
    "jobs": cmd_jobs,
    "cost": cmd_cost,
    "doctor": cmd_doctor,
    "uri": cmd_uri,
    "login": cmd_login,
    "logout": cmd_logout,
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not args.verbose:
        # paramiko logs a failed handshake as a traceback (ERROR paramiko.transport) before
        # hpcbridge's one-line error says the same: its own words only with -v
        logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    try:
        with stopped_by_signals():
            code = COMMANDS[args.command](args)
            sys.stdout.flush()  # a reader that left is noticed here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _reader_left()
    except KeyboardInterrupt as stop:  # INT, TERM or HUP (exits.Stopped)
        try:
            said = f" by {stop}" if str(stop) else ""
            print(f"hpcbridge: interrupted{said}", file=sys.stderr)
        except OSError:
            pass  # SIGHUP: the terminal may be gone
        return exit_code_for_stop(stop)
    except (SchedulerAdapterError, ValueError, OSError) as exc:
        if args.debug:
            raise
        print(f"hpcbridge: error: {one_line(exc)}", file=sys.stderr)
        return exit_code_for(exc)


def _reader_left() -> int:
    """The reader of stdout went away (``| head``): end quietly; stdout goes to
    /dev/null so that the flush at exit does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


__all__ = ["COMMANDS", "build_parser", "main"]
