"""The error hierarchy: catch :class:`SchedulerAdapterError` for any failure."""

from __future__ import annotations

from typing import Optional, Sequence


class SchedulerAdapterError(Exception):
    """Base class of every error hpcbridge raises on purpose."""


#: The source system's name for the base class; the same class, not a subclass.
SlurmAdapterError = SchedulerAdapterError


class ConfigurationError(SchedulerAdapterError, ValueError):
    """A setting (environment variable or override) has a value that cannot be used."""


class ResourceError(SchedulerAdapterError, ValueError):
    """A resource request is malformed; raised before anything is submitted.

    ``origin`` names what the user set: a variable (``HPCBRIDGE_TIME``), a flag (``--time``).
    """

    def __init__(self, key: str, message: str, origin: Optional[str] = None) -> None:
        where = f" (set by {origin})" if origin else ""
        super().__init__(f"resource {key!r}{where}: {message}")
        self.key = key
        self.detail = message
        self.origin = origin

    def with_origin(self, origin: str) -> ResourceError:
        """The same error, naming where the value came from."""
        return ResourceError(self.key, self.detail, origin)


class JobSubmissionError(SchedulerAdapterError):
    """The scheduler refused the job, or the script to submit does not exist.

    ``scheduler_message`` holds the scheduler's own words (e.g. Slurm's
    "Invalid partition name specified") so callers can show them unchanged.
    """

    def __init__(
        self,
        message: str,
        *,
        argv: Optional[Sequence[str]] = None,
        scheduler_message: str = "",
    ) -> None:
        super().__init__(message)
        self.argv = list(argv) if argv is not None else None
        self.scheduler_message = scheduler_message


class SubmissionUncertainError(JobSubmissionError):
    """The connection dropped while a submission was in flight.

    The job may or may not exist: it is deliberately *not* submitted again.
    Inspect the queue (``hpcbridge jobs`` / ``squeue``) before retrying.
    """


class LimitRefusedError(JobSubmissionError):
    """The scheduler refused the job for a limit on how many one may have queued
    (Slurm's ``MaxSubmitJobs``): nothing went in, and it can go in once others end.

    A sweep (``submit_many(max_queued=...)``) holds such jobs back and sends them
    later; it never reports them as failed.
    """


class JobNotFoundError(SchedulerAdapterError):
    """The job cannot be observed in the queue, in history or in its job folder."""


class JobTimeoutError(SchedulerAdapterError):
    """A scheduler command or a whole wait ran past its time budget."""


class TransportError(SchedulerAdapterError):
    """Commands or files could not be moved to where the scheduler runs.

    ``permanent``: trying again cannot fix it (a refused login, a changed host key);
    a wait rides out any other (the login node down for a while) until its deadline.
    """

    permanent: bool = False


class HostKeyError(TransportError):
    """The SSH server's host key is unknown or differs from the one on record."""

    permanent = True


class SchedulerUnavailableError(SchedulerAdapterError):
    """The requested scheduler cannot be used from here (no command, no bindings)."""


class SweepCancelledError(SchedulerAdapterError):
    """A sweep was cancelled (``hpcbridge cancel NAME``, ``Sweep.cancel``) before all
    its tasks were sent: nothing more of it is sent.

    ``submitted_ids``: the ids of the jobs that were sent (in task order; their
    cancel was requested with the sweep's); ``unsent``: how many tasks never were;
    ``how``: "cancelled by 'hpcbridge cancel NAME' (process host:pid)".
    The command reports it as a job ended CANCELLED (exit code 1).
    """

    def __init__(self, name: str, submitted_ids: Sequence[str], unsent: int, how: str) -> None:
        self.name = name
        self.submitted_ids = list(submitted_ids)
        self.unsent = unsent
        sent = ", ".join(self.submitted_ids) or "none"
        super().__init__(
            f"sweep {name} was {how}: {unsent} task(s) never sent; "
            f"sent: {sent} (cancel requested for those not ended); "
            f"'hpcbridge wait {name}' reports how they ended"
        )
