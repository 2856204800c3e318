"""The ``hpcbridge`` command's exit codes, and which error gives which."""

from __future__ import annotations

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
  130  interrupted
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
