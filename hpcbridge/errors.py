"""The error hierarchy: catch :class:`SchedulerAdapterError` for any failure."""

from __future__ import annotations

from typing import Optional, Sequence


class SchedulerAdapterError(Exception):
    """Base class of every error hpcbridge raises on purpose."""


def one_line(error: BaseException) -> str:
    """An error's message on one line (its type when it has none)."""
    return " ".join((str(error) or type(error).__name__).split())


#: The source system's name for the base class; the same class, not a subclass.
SlurmAdapterError = SchedulerAdapterError


class ConfigurationError(SchedulerAdapterError, ValueError):
    """A setting (environment variable or override) has a value that cannot be used."""


class ResourceError(SchedulerAdapterError, ValueError):
    """A resource request is malformed; ``origin``: the variable or flag that set it."""

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
    """The scheduler refused the job, or the script does not exist;
    ``scheduler_message``: the scheduler's own words."""

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
    """A submission's answer was lost: the job may exist, so it is not sent again."""


class LimitRefusedError(JobSubmissionError):
    """Refused for a cap on queued jobs (Slurm's ``MaxSubmitJobs``): a sweep holds such
    jobs back until others end."""


class JobNotFoundError(SchedulerAdapterError):
    """The job cannot be observed in the queue, in history or in its job folder;
    ``job_id``: which one, where a wait of several jobs says it."""

    def __init__(self, *args: object, job_id: Optional[str] = None) -> None:
        super().__init__(*args)
        self.job_id = job_id


class JobTimeoutError(SchedulerAdapterError):
    """A scheduler command or a whole wait ran past its time budget."""


class TransportError(SchedulerAdapterError):
    """Commands or files could not reach the scheduler's host; ``permanent``: retrying
    cannot fix it (a wait rides out any other until its deadline)."""

    permanent: bool = False


class HostKeyError(TransportError):
    """The SSH server's host key is unknown or differs from the one on record."""

    permanent = True


class SchedulerUnavailableError(SchedulerAdapterError):
    """The requested scheduler cannot be used from here (no command, no bindings)."""


class SweepCancelledError(SchedulerAdapterError):
    """A sweep was cancelled before all its tasks were sent; ``submitted_ids``: the
    jobs sent, ``unsent``: how many never were, ``how``: by what."""

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
