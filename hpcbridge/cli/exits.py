"""The ``hpcbridge`` command's exit codes, and which error gives which."""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from ..errors import (
    ConfigurationError,
    JobNotFoundError,
    JobSubmissionError,
    JobTimeoutError,
    ResourceError,
    SchedulerAdapterError,
    SchedulerUnavailableError,
    TransportError,
)

EXIT_OK = 0
EXIT_JOB_NOT_COMPLETED = 1
EXIT_USAGE = 2
EXIT_SUBMISSION = 3
EXIT_NOT_FOUND = 4
EXIT_TIMEOUT = 5
EXIT_TRANSPORT = 6
EXIT_UNAVAILABLE = 7
EXIT_INTERRUPTED = 130
#: 128 + SIGPIPE: what a command killed by a closed pipe exits with (``| head``)
EXIT_BROKEN_PIPE = 141

EXIT_CODES_HELP = """\
exit codes:
  0    success (for --wait / wait: every job COMPLETED)
  1    a job ended FAILED, CANCELLED or TIMEOUT; a sweep was cancelled before
       all its tasks were sent (submit-many, wait NAME)
  2    bad usage, a bad resource value or a bad setting (nothing was submitted)
  3    the submission was refused: by the scheduler, or because the script is
       missing or a parent (--after) cannot be found or already failed
  4    a job could not be found: no record, and nothing in the queue, in history
       or in its folder (uri: no running job with that id)
  5    a scheduler command or the wait ran past its time budget
  6    the transport failed (SSH connection, host key, file transfer); doctor:
       the selected transport is not usable
  7    the scheduler is not usable from here (doctor: the selected one)
  129  stopped by SIGHUP (the terminal closed, the SSH session dropped)
  130  interrupted (Ctrl-C, SIGINT)
  143  stopped by SIGTERM
  141  the reader of the output went away (| head)
"""

# The first match wins: ResourceError is a ValueError and a SchedulerAdapterError.
_ERROR_EXITS = (
    (ResourceError, EXIT_USAGE),
    (ConfigurationError, EXIT_USAGE),
    (JobSubmissionError, EXIT_SUBMISSION),
    (JobNotFoundError, EXIT_NOT_FOUND),
    (JobTimeoutError, EXIT_TIMEOUT),
    (TransportError, EXIT_TRANSPORT),
    (SchedulerUnavailableError, EXIT_UNAVAILABLE),
    (SchedulerAdapterError, EXIT_UNAVAILABLE),
)


def exit_code_for(error: BaseException) -> int:
    """The exit code for an error the command reports in one line."""
    for kind, code in _ERROR_EXITS:
        if isinstance(error, kind):
            return code
    return EXIT_USAGE if isinstance(error, ValueError) else EXIT_TRANSPORT


#: the signals that stop the command the way Ctrl-C does (a pack's allocations released)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A signal asked the command to stop: raised in the main thread so that every
    ``finally`` runs on the way out (a pack releases its allocations); the command exits
    128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code_for_stop(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal's number (a ``KeyboardInterrupt`` raised otherwise: SIGINT's)."""
    return 128 + interrupt.signum if isinstance(interrupt, Stopped) else EXIT_INTERRUPTED


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    """INT, TERM and HUP raise ``Stopped`` once; a second one, while the command stops,
    is said and let pass (SIGKILL ends it at once).  The handlers before, again after.  A
    signal ignored when the command started stays ignored (``nohup``, a shell's background
    job); only the main thread may set handlers: elsewhere (a caller's thread) none is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        if stopping:
            try:
                print(
                    f"hpcbridge: {signal.Signals(signum).name} while stopping: releasing "
                    "what this command holds first (SIGKILL stops it now)",
                    file=sys.stderr,
                    flush=True,
                )
            except OSError:
                pass  # SIGHUP: the terminal may be gone
            return
        stopping = True
        raise Stopped(signum)

    before = {
        signum: signal.signal(signum, stop)
        for signum in STOP_SIGNALS
        if signal.getsignal(signum) is not signal.SIG_IGN
    }
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
