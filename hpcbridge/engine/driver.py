"""The contract between an adapter and a driver: one way of talking to one scheduler.

The adapter does the scheduler-neutral work (validation, staging, records, merging
states, waiting); a driver keeps these promises:

``plan(batch)``
    Refuses (``JobSubmissionError``, saying what to change) what the scheduler would
    refuse, before anything is staged; returns a ``Planned``.
``describe(planned)``
    The exact command (or jobspec) ``submit_many(planned)`` would send.
``submit_many(planned)``
    One ``Submitted`` per job, in index order.  Some went in: ``PartialSubmissionError``
    with those; none: ``JobSubmissionError`` (``SubmissionUncertainError`` when it
    cannot know; ``LimitRefusedError`` for a cap on queued jobs).
``query(job_ids)``
    Answers every id (``UNKNOWN`` with a reason for one it cannot see), never raises
    for one job; ``NotAskedNow`` when the scheduler cannot be asked right now.
``cancel(job_ids)``
    An id already ended or unknown is no error; anything else raises.
``find_submitted(planned)``
    The jobs of a submission whose answer was lost, by its key; ``None`` once the
    scheduler surely has none; ``SubmissionUncertainError`` when it cannot tell.
``queue_limit(account=None, ask=True)``
    The cap on this user's queued jobs (Slurm's ``MaxSubmitJobs``), or ``None``.  With
    ``ask=False`` (before a ``submit_many``, which meets a cap it did not know by a
    refusal), a driver whose scheduler refuses a batch past the cap in one round answers
    from what it already knows (``None``: nothing known) and asks nothing.
``launcher(options)``
    What the wrapper exports as ``HPCBRIDGE_LAUNCHER`` for jobs of these options (the
    adapter's ``job_options``): ``srun``, ``flux run``, nothing for a Flux plain job.
``capabilities``
    What the driver can do, as data (``doctor`` and dry runs show it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import (
    Any,
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
from .jobscript import TASK_INDEX_VARIABLE as TASK_INDEX_VARIABLE  # re-exported
from .jobscript import PreparedJob


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
    """``count`` jobs of one staged wrapper; job ``i`` of several must see
    ``TASK_INDEX_VARIABLE=i`` (or the array's index variable, or ``i`` as argument)."""

    job: PreparedJob
    count: int
    resources: Resources
    depends_on: Tuple[str, ...]
    #: the output path handed to the scheduler, its own placeholder kept
    output: str
    #: the scheduler's own choices (``SchedulerAdapter.job_options``), read by its drivers
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
    """``query``: the scheduler cannot be asked right now; the message says why."""


class CannotAsk(Exception):
    """The scheduler could not be asked about a submission's key right now (busy, restarting)."""


class Again(Exception):
    """A parser's verdict on an answer: the request did not get through (the scheduler
    busy or restarting, or the request never reached it), so asking again is safe; the
    runner does, within its budget, then raises ``error`` (default: ``NotAskedNow``)."""

    def __init__(self, message: str, error: Optional[BaseException] = None) -> None:
        super().__init__(message)
        self.error: BaseException = error if error is not None else NotAskedNow(message)


@dataclass(frozen=True)
class Call:
    """A request into a scheduler's bindings (``fn()``), named ``what`` in the log; the
    runner runs it as it runs an argv through the executor."""

    what: str
    fn: Callable[[], Any]

    def __call__(self) -> Any:
        return self.fn()


@dataclass(frozen=True)
class Command:
    """An argv for the executor with what it needs besides: the folder it runs in
    (``cwd``), its standard input (``stdin``) and its own time budget (``timeout``;
    ``None``: the runner's).  The runner runs it as it runs a bare argv."""

    argv: Sequence[str]
    cwd: Optional[str] = None
    stdin: Optional[str] = None
    timeout: Optional[float] = None


#: one job's outcome in a sending of several: ``(True, its id)`` or ``(False, why not)``
Outcome = Tuple[bool, str]


@dataclass(frozen=True)
class Keyed:
    """How a driver's jobs sent several at once are found by their keys where answers were
    lost (``Runner.send_keyed``): the driver's own lookup and words."""

    #: key -> id of the jobs carrying ``keys`` submitted since ``started`` (this process's
    #: clock, epoch seconds), ``resend(missing keys)`` called once the rest surely never
    #: went in (``Runner.look_up`` over the driver's finder)
    look_up: Callable[[Sequence[str], float, Callable[[List[str]], None]], Mapping[str, str]]
    #: whether a job's failure says its answer was lost (it may have gone in)
    lost: Callable[[str], bool]
    #: the outcome of a job neither found nor sent again (said by key)
    unknown: Callable[[str], Outcome]
    #: the batch of some jobs of a batch (by index, in that order)
    only: Callable[[Any, List[int]], Any]


class Reply(Protocol):
    """A command's answer as parsers read it (the executor's ``CommandResult``)."""

    @property
    def returncode(self) -> int: ...

    @property
    def stdout(self) -> str: ...

    @property
    def stderr(self) -> str: ...

    @property
    def ok(self) -> bool: ...

    def message(self) -> str: ...


class PartialSubmissionError(JobSubmissionError):
    """Some jobs of a bulk submission went in (``submitted``, each with its task's
    index), the rest did not (``failures``: the scheduler's words; ``limited``: refused
    for a cap on queued jobs, as ``LimitRefusedError``)."""

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
        """Wait up to ``seconds``; the ids of the watched jobs that ended meanwhile."""
        ...

    def listening(self) -> bool:
        """Whether it hears every watched job's end now (then no exit-code file is read)."""
        ...

    def settled(self, job_ids: Collection[str]) -> None:
        """These watched jobs are known to have ended: no longer wait for them."""
        ...

    def close(self) -> None: ...


class SchedulerDriver(Protocol):
    """One way of talking to one scheduler (the module docstring is its contract)."""

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

    def launcher(self, options: object) -> str:
        """What the wrapper exports as ``HPCBRIDGE_LAUNCHER`` for jobs of ``options``."""
        ...

    def find_submitted(
        self, planned: Planned, since: Optional[float] = None
    ) -> Optional[List[Submitted]]:
        """``find_submitted``; ``since``: when it was sent (epoch seconds)."""
        ...

    def queue_limit(self, account: Optional[str] = None, *, ask: bool = True) -> Optional[int]:
        """The cap on this user's queued jobs (charged to ``account``), if any; with
        ``ask=False`` possibly only what is known without asking."""
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
    """The bindings are installed but do not work here: a warning, not INFO."""


@dataclass(frozen=True)
class DriverChoice:
    """Which driver an adapter uses and why (for the log, ``describe`` and ``doctor``)."""

    name: str
    reason: str


class Session(Protocol):
    """What an adapter's ``open()`` made: the driver, why that one, and the instance."""

    @property
    def driver(self) -> SchedulerDriver: ...

    @property
    def choice(self) -> DriverChoice: ...

    @property
    def instance(self) -> Optional[str]:
        """The scheduler instance reached, recorded with each job (Flux: its URI; ``None``
        where the scheduler has one)."""
        ...


@dataclass(frozen=True)
class OpenDriver:
    """The session of a scheduler with nothing more to learn than its driver."""

    driver: SchedulerDriver
    choice: DriverChoice
    instance: Optional[str] = None


def choose_driver(
    scheduler: str,
    requested: str,
    native: Callable[[], Tuple[D, str]],
    cli: Callable[[], D],
) -> Tuple[D, DriverChoice]:
    """The bindings when ``native()`` works (it raises ``SchedulerUnavailableError``
    otherwise), else the CLI; ``requested``: "auto", "native" (raise) or "cli"."""
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
