"""The contract between an adapter and the ways it talks to a scheduler.

An adapter (``base.SchedulerAdapter``) does the scheduler-neutral work once:
validation, staging the wrapper, the job records, the exit-code-file
fallback, merging states so they never go backwards, the wait loop.  It
hands everything scheduler-specific to a **driver**: one class per way of
talking to a scheduler (mock, Slurm CLI, pyslurm, Flux CLI, Flux bindings),
each a thin layer over pure command builders and parsers.

Every driver keeps the same promises:

``plan(batch)``
    Works out what ``submit_many`` will send for ``batch`` and refuses - with
    ``JobSubmissionError`` saying why and what to change - anything the
    scheduler would refuse (a queue it lacks, a job longer than the time
    left, a dependency it cannot honour), *before* anything is staged.
    Parents that cannot be waited for are refused before, by the submission
    itself (``submitting.refuse_unmet``).
    Pure but for what the scheduler must be asked; returns a ``Planned``.
``describe(planned)``
    The exact command (or jobspec) ``submit_many(planned)`` would send.
``submit_many(planned)``
    Submits ``batch.count`` jobs of one staged wrapper and returns one
    ``Submitted`` per job, in index order.  When only some went in, it raises
    ``PartialSubmissionError`` carrying the ones that did (so they are
    recorded, never lost, never submitted twice) and the failures' messages.
    When nothing went in it raises ``JobSubmissionError`` (or
    ``SubmissionUncertainError`` when it cannot know).
``query(job_ids)``
    Answers **every** id asked: ``UNKNOWN`` with a reason for one it cannot
    see (purged, never existed).  When the scheduler itself cannot be asked
    right now (a controller restarting) it raises ``NotAskedNow``: the adapter
    then waits for the scheduler instead of reading the wrapper's exit-code
    file, which cannot tell a time limit or a cancel from a failure
    (``observation.Reach.OUT_FOR_NOW``).  It never raises for a single job; a
    transport failure may raise ``TransportError`` / ``JobTimeoutError`` for
    the round.
``cancel(job_ids)``
    Asks the scheduler to end the jobs.  An id that already ended or is
    unknown is not an error; anything else raises ``SchedulerAdapterError``.
``find_submitted(planned)``
    For a submission whose answer was lost (the process that sent it died, the
    connection dropped): the ``Submitted`` jobs ``submit_many(planned)`` made,
    found by the batch's key; ``None`` once the scheduler surely has none;
    ``SubmissionUncertainError`` when it cannot tell within its budget.
``queue_limit(account=None)``
    How many jobs this user may have queued at once (charged to ``account``,
    when given), where the scheduler sets a cap (Slurm's ``MaxSubmitJobs``);
    ``None`` where it sets none.  Asked only for many jobs with no cap given
    (``sweeping``), and cheap to ask again: Slurm's is remembered a few minutes
    (``slurm.limit_cache``).  A job refused for such a cap raises
    ``LimitRefusedError`` from ``submit_many``.
``capabilities``
    What the driver can do, as data: waiting woken by events, arrays,
    dependencies, and the resource keys it drops with the reason - shown by
    ``hpcbridge doctor`` and by every dry run.

A driver is made by its adapter's ``open()`` - the one step that talks to the
scheduler to choose it - together with a ``DriverChoice`` saying why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import (
    Callable,
    Collection,
    Dict,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
    TypeVar,
)

from ..errors import JobSubmissionError, SchedulerUnavailableError
from ..model import JobStatus
from ..resources import Resources
from .jobscript import TASK_INDEX_VARIABLE, PreparedJob


@dataclass(frozen=True)
class Capabilities:
    """What a driver can do; ``doctor`` and ``--dry-run`` say it (``summary``)."""

    #: ``waiter()`` can end a pause between status rounds the moment a job ends
    events: bool = False
    #: a batch of many jobs goes in as one array submission
    arrays: bool = False
    #: ``afterok`` dependencies are honoured
    dependencies: bool = True
    #: the variable an array sets to the task index (``SLURM_ARRAY_TASK_ID``)
    array_index_variable: Optional[str] = None
    #: resource key -> why this scheduler ignores it (e.g. Flux has no memory)
    dropped_keys: Mapping[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: what waiting, arrays and dependencies do, and which keys are dropped."""
        words = [
            "waiting woken by job events" if self.events else "waiting by polling",
            "arrays" if self.arrays else "one submission per job",
            "afterok dependencies" if self.dependencies else "no dependencies",
        ]
        dropped = "; ".join(f"{key} dropped ({why})" for key, why in self.dropped_keys.items())
        return ", ".join(words) + (f"; {dropped}" if dropped else "")


@dataclass(frozen=True)
class SubmitBatch:
    """``count`` jobs of one staged wrapper: what a driver is asked to submit.

    With ``count == 1`` the wrapper runs its only task.  With more, job ``i``
    must see ``TASK_INDEX_VARIABLE=i``; with ``capabilities.array_index_variable``,
    the array's own index variable, or ``i`` as the wrapper's first argument.
    """

    job: PreparedJob
    count: int
    resources: Resources
    depends_on: Tuple[str, ...]
    #: the output path handed to the scheduler, its own placeholder kept
    output: str
    #: the scheduler's own choices for this submission, made by its adapter
    #: (``job_options``) and read only by its drivers; ``None`` where there are none
    options: object = None


@dataclass(frozen=True)
class Planned:
    """A batch a driver accepted (``plan``): what it will send, before anything is staged."""

    batch: SubmitBatch
    #: the driver's own rendering of it (argv, requests), read only by that driver
    detail: object = None


@dataclass(frozen=True)
class Submitted:
    """One job that went in: its id, where its output lands, which task it runs."""

    job_id: str
    log_path: str
    #: the task of the batch (``HPCBRIDGE_TASK_INDEX``); 0 for a batch of one
    index: int = 0
    #: what kind of job the scheduler made, where it has several (recorded, shown)
    kind: Optional[str] = None


class NotAskedNow(Exception):
    """``query``: the scheduler cannot be asked right now (a controller restarting,
    past the driver's own retries); the message says why."""


class PartialSubmissionError(JobSubmissionError):
    """Some jobs of a bulk submission went in and some did not.

    ``submitted`` holds the ones that went in (they are recorded and can be
    waited for or cancelled), each with its task's index (not always the first
    ones: Flux takes a pipelined batch job by job, and a cap may free up midway);
    ``failures`` the scheduler's words for the rest;
    ``limited``: the rest was refused for a cap on this user's queued jobs (as
    ``LimitRefusedError``: a sweep holds it back until some end).
    """

    def __init__(
        self,
        submitted: Sequence[Submitted],
        failures: Sequence[str],
        total: Optional[int] = None,
        limited: bool = False,
    ) -> None:
        self.submitted = list(submitted)
        self.failures = list(failures)
        self.limited = limited
        total = total if total is not None else len(self.submitted) + len(self.failures)
        first = self.failures[0] if self.failures else "unknown error"
        ids = ", ".join(item.job_id for item in self.submitted) or "none"
        self.total = total
        super().__init__(
            f"{total - len(self.submitted)} of {total} submissions did not go in "
            f"(first error: {first}); submitted: {ids}. The submitted jobs are recorded: "
            "wait for or cancel them, and submit the rest again",
            scheduler_message=first,
        )

    @property
    def submitted_ids(self) -> List[str]:
        return [item.job_id for item in self.submitted]


class Waiter(Protocol):
    """Pauses between status rounds; ends early when a watched job ends."""

    def pause(self, seconds: float) -> Set[str]:
        """Wait up to ``seconds``; the ids of the watched jobs that ended meanwhile
        (empty: none did, or this waiter cannot tell)."""
        ...

    def listening(self) -> bool:
        """Whether it hears every watched job's end now (then no exit-code file is read)."""
        ...

    def settled(self, job_ids: Collection[str]) -> None:
        """These watched jobs are known to have ended (a listing, an exit-code file, or
        this waiter): it no longer waits for them, heard or not."""
        ...

    def close(self) -> None: ...


class SchedulerDriver(Protocol):
    """One way of talking to one scheduler; see the module docstring."""

    #: "mock", "cli" or "native"
    name: str
    capabilities: Capabilities

    def plan(self, batch: SubmitBatch) -> Planned:
        """What ``submit_many`` will send; raises ``JobSubmissionError`` to refuse."""
        ...

    def describe(self, planned: Planned) -> str:
        """The exact command (or jobspec) ``submit_many(planned)`` would send."""
        ...

    def submit_many(self, planned: Planned) -> List[Submitted]: ...

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]: ...

    def cancel(self, job_ids: Sequence[str]) -> None: ...

    def max_batch(self) -> int:
        """How many jobs one ``SubmitBatch`` may hold (an array's size limit)."""
        ...

    def find_submitted(
        self, planned: Planned, since: Optional[float] = None
    ) -> Optional[List[Submitted]]:
        """The jobs a lost submission of ``planned`` made, by its key (``None``: none);
        ``since``: when it was sent (epoch seconds), where a lookup lists recent jobs."""
        ...

    def queue_limit(self, account: Optional[str] = None) -> Optional[int]:
        """The cap on this user's queued jobs (charged to ``account``, when given), if
        the scheduler sets one."""
        ...

    def find_output(self, job_id: str) -> Optional[str]:
        """Where a job the store has no record of writes its output, if known."""
        ...

    def waiter(self, job_ids: Sequence[str]) -> Optional[Waiter]:
        """An event-driven pause for these jobs, or ``None`` to sleep."""
        ...

    def close(self) -> None: ...


D = TypeVar("D")

log = logging.getLogger("hpcbridge")


class NativeDriverBroken(SchedulerUnavailableError):
    """The in-process bindings are installed but do not work here (another
    release than the scheduler's, no connection): worth a warning, unlike
    bindings that are simply not installed."""


@dataclass(frozen=True)
class DriverChoice:
    """Which driver an adapter uses and why (for the log, ``describe`` and ``doctor``)."""

    name: str
    reason: str


class Session(Protocol):
    """What an adapter's ``open()`` made: the driver, and why that one."""

    @property
    def driver(self) -> SchedulerDriver: ...

    @property
    def choice(self) -> DriverChoice: ...


@dataclass(frozen=True)
class OpenDriver:
    """The session of a scheduler with nothing more to learn than its driver."""

    driver: SchedulerDriver
    choice: DriverChoice


def choose_driver(
    scheduler: str,
    requested: str,
    native: Callable[[], Tuple[D, str]],
    cli: Callable[[], D],
) -> Tuple[D, DriverChoice]:
    """The bindings when they work, else the CLI; the same rule for every scheduler.

    ``requested`` is "auto", "native" or "cli" (checked by the settings).
    ``native()`` builds the in-process driver and says why it is usable, or
    raises ``SchedulerUnavailableError`` saying why it cannot be used.  With
    "auto" the CLI driver is used and the reason logged: a warning when the
    bindings are there but broken (``NativeDriverBroken``), else at INFO
    (bindings not installed, an SSH transport: the CLI is simply the way);
    with "native" it is raised.
    """
    if requested == "cli":
        return cli(), DriverChoice("cli", "the CLI driver was asked for")
    try:
        driver, reason = native()
    except SchedulerUnavailableError as exc:
        if requested == "native":
            raise SchedulerUnavailableError(
                f"the native {scheduler} driver cannot be used: {exc}; "
                f"set HPCBRIDGE_{scheduler.upper()}_DRIVER=cli or auto to use the commands"
            ) from exc
        level = logging.WARNING if isinstance(exc, NativeDriverBroken) else logging.INFO
        log.log(level, "%s: using the CLI driver (%s)", scheduler, exc)
        return cli(), DriverChoice("cli", str(exc))
    return driver, DriverChoice("native", reason)


__all__ = [
    "DriverChoice",
    "OpenDriver",
    "Planned",
    "Session",
    "NotAskedNow",
    "choose_driver",
    "TASK_INDEX_VARIABLE",
    "Capabilities",
    "PartialSubmissionError",
    "SchedulerDriver",
    "SubmitBatch",
    "Submitted",
    "Waiter",
]
