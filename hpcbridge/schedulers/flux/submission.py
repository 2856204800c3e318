"""A Flux submission, both drivers alike: planned (resources translated, refused before
anything is staged), sent (again while the instance starts), refused in Flux's own words.
"""

from __future__ import annotations

import json
import logging
import math
import signal as signals
import threading
import time
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ...config import Settings
from ...engine.driver import (
    TASK_INDEX_VARIABLE,
    PartialSubmissionError,
    Planned,
    SubmitBatch,
    Submitted,
)
from ...engine.jobscript import EXIT_RANKS_VARIABLE
from ...errors import JobSubmissionError, LimitRefusedError, ResourceError
from ...resources import Resources, format_fsd, signal_parts
from ...retrying import retry
from .command_line import Outcome, scheduler_message
from .commands import LOOK_BACK, FluxCommands, KeyFinder, look_up_all
from .instance import Association, FluxPolicy, InstanceFacts, QueueInfo, UriSetting
from .jobspec import KEY_ATTRIBUTE, batch_script
from .native import Attributes
from .status import canonical_job_id, decimal_job_id

log = logging.getLogger("hpcbridge")

#: resource keys Flux ignores, and why
DROPPED_KEYS: Mapping[str, str] = {
    "mem": "flux-core has no schedulable memory",
    "mem_per_cpu": "flux-core has no schedulable memory",
    "partition": "Flux has no partitions",
    "requeue": "Flux does not requeue jobs",
}
#: keys Flux cannot honour at all: refused before anything is staged, saying what to use
REFUSED_KEYS: Mapping[str, str] = {
    "gres": "Flux has no generic resources; ask for GPUs with gpus_per_task (Flux's -g)",
    "reservation": "Flux has no reservations; submit into the instance that holds the "
    "resources (HPCBRIDGE_FLUX_URI)",
}
#: keys only some releases take (the policy's flag of that name), dropped by the others
RELEASE_KEYS: Mapping[str, str] = {
    "exclusive": "exclusive",
    "begin": "begin_time",
    "signal": "warning_signal",
}


def key_handling() -> Tuple[Mapping[str, str], Mapping[str, str]]:
    """The resource keys Flux drops and those it refuses, each with why (doctor)."""
    return DROPPED_KEYS, REFUSED_KEYS


_said: set = set()


def _once(message: str, *args: Any) -> None:
    """A warning said once per process (a release that lacks a key)."""
    text = message % args
    if text not in _said:
        _said.add(text)
        log.warning(text)


#: how long the instance's expiration is trusted before asking again
EXPIRATION_TTL = 60.0


class JobKind(Enum):
    """``flux batch`` (a nested instance, as ``sbatch``) or ``flux submit`` (the wrapper as the
    job's tasks: no broker to boot, for many small jobs packed into one allocation)."""

    BATCH = "batch"
    PLAIN = "plain"


@dataclass(frozen=True)
class JobChoice:
    """The kind of job a submission asks for, and why."""

    kind: JobKind
    reason: str


@dataclass(frozen=True)
class SubmitRequest:
    """One job, scheduler-side: what both drivers submit."""

    wrapper_path: str
    job_name: str
    output: str
    cwd: str
    kind: JobKind = JobKind.BATCH
    nslots: int = 1
    cores_per_slot: int = 1
    gpus_per_slot: int = 0
    nodes: Optional[int] = None
    #: seconds; ``None`` = unlimited
    duration: Optional[float] = None
    queue: Optional[str] = None
    bank: Optional[str] = None
    requires: Optional[str] = None
    #: decimal job ids (``afterok``)
    dependencies: Tuple[str, ...] = ()
    #: variables every job of the batch gets
    environment: Mapping[str, str] = field(default_factory=dict)
    #: whole nodes (``exclusive``: needs ``nodes``)
    exclusive: bool = False
    #: the earliest start, epoch seconds (the ``begin-time`` dependency)
    begin: Optional[float] = None
    #: the signal number and the seconds before the time limit it is sent
    signal: Optional[Tuple[int, float]] = None
    #: what the native options set, leaf by leaf: (dotted attribute path, value)
    attributes: Attributes = ()
    #: the key (``jobspec.KEY_ATTRIBUTE``) of a one-job request; many: ``FluxPlan.keys``
    key: Optional[str] = None

    def with_environment(self, extra: Mapping[str, str]) -> SubmitRequest:
        return replace(self, environment={**self.environment, **extra})


@dataclass(frozen=True)
class FluxPlan:
    """A batch as Flux jobs: the request, and what each job adds to its environment."""

    request: SubmitRequest
    #: each job's variables, in index order
    environments: Tuple[Mapping[str, str], ...]
    #: each job's key, in index order (``job_keys``)
    keys: Tuple[str, ...] = ()
    #: each job's own name, in index order; empty: each is ``request.job_name``
    names: Tuple[str, ...] = ()

    def job(self, index: int) -> SubmitRequest:
        key = self.keys[index] if self.keys else self.request.key
        name = self.names[index] if self.names else self.request.job_name
        request = self.request.with_environment(self.environments[index])
        return replace(request, key=key, job_name=name)

    def only(self, indices: Sequence[int]) -> FluxPlan:
        """The plan of some of its jobs, in that order (sent again after lost answers)."""

        def pick(values: Tuple[Any, ...]) -> Tuple[Any, ...]:
            return tuple(values[index] for index in indices) if values else ()

        return FluxPlan(self.request, pick(self.environments), pick(self.keys), pick(self.names))


def job_keys(token: str, count: int) -> Tuple[str, ...]:
    """The key of each job of a batch: the wrapper's token, ``.<task index>`` when many."""
    return (token,) if count == 1 else tuple(f"{token}.{index}" for index in range(count))


def choose_kind(nested: Optional[bool], settings: Settings, uri_setting: UriSetting) -> JobChoice:
    """The keyword wins, then ``HPCBRIDGE_FLUX_NESTED``, then the instance's default."""
    if nested is not None:
        return JobChoice(JobKind.BATCH if nested else JobKind.PLAIN, "nested= asked for it")
    if settings.flux_nested is not None:
        source = settings.sources.get("flux_nested", "HPCBRIDGE_FLUX_NESTED")
        kind = JobKind.BATCH if settings.flux_nested else JobKind.PLAIN
        return JobChoice(kind, f"set by {source}")
    if uri_setting.value is None:
        return JobChoice(JobKind.BATCH, "the system instance: standalone batch jobs")
    which = "the enclosing" if uri_setting.source == "FLUX_URI environment" else "a named"
    return JobChoice(JobKind.PLAIN, f"{which} instance ({uri_setting.source}): allocation packing")


def kind_of(batch: SubmitBatch) -> JobKind:
    return batch.options.kind if isinstance(batch.options, JobChoice) else JobKind.BATCH


def flux_plan(planned: Planned) -> FluxPlan:
    if not isinstance(planned.detail, FluxPlan):
        raise TypeError("a Flux driver was handed another driver's plan")
    return planned.detail


@dataclass(frozen=True)
class Questions:
    """What planning may ask the instance - each only when a batch needs it."""

    #: seconds the instance has left (``TimeLeft``); ``None``: not checked (a dry run)
    time_left: Optional[Callable[[], Optional[float]]]
    #: what native options set (``commands.FluxCommands.native_attributes``)
    native: Callable[[FluxPolicy, bool, Sequence[str]], Attributes]
    #: the user's flux-accounting banks, ``None`` without accounting
    #: (``commands.FluxCommands.associations``)
    associations: Callable[[], Optional[List[Association]]]


def plan_batch(batch: SubmitBatch, facts: InstanceFacts, ask: Questions, margin: float) -> Planned:
    """The plan of ``batch``; ``JobSubmissionError``/``ResourceError`` for what Flux refuses."""
    queue = choose_queue(batch.resources.qos, facts.queues, facts.policy)
    request = translate(batch, queue, facts.policy)
    if request.bank:
        check_bank(request.bank, ask.associations())
    options = batch.resources.native_options("flux")
    if options:
        batch_kind = request.kind is JobKind.BATCH
        request = replace(request, attributes=ask.native(facts.policy, batch_kind, options))
    if ask.time_left is not None:
        check_outer_limit(request.duration, ask.time_left(), margin)
    if batch.count == 1:
        environments: Tuple[Mapping[str, str], ...] = ({},)
    else:
        environments = tuple({TASK_INDEX_VARIABLE: str(index)} for index in range(batch.count))
    names = tuple(batch.job.name_of(index) for index in range(batch.count))
    keys = job_keys(batch.job.token, batch.count)
    return Planned(batch, FluxPlan(request, environments, keys, names))


def check_bank(bank: str, associations: Optional[List[Association]]) -> None:
    """Refuse a bank flux-accounting has not for the user; without accounting every release
    ignores it."""
    if associations is None:
        return
    banks = [association.bank for association in associations]
    if bank in banks:
        return
    default = associations[0].default_bank if associations else None
    yours = f"yours: {', '.join(banks)}; default {default}" if banks else "you are in none"
    raise JobSubmissionError(
        f"flux-accounting on this instance has no bank {bank!r} for you ({yours}); ask "
        "for one of yours with --account, or none for your default bank",
        scheduler_message="cannot find user/bank or user/default bank entry",
    )


def active_cap(associations: Optional[List[Association]], bank: Optional[str]) -> Optional[int]:
    """flux-accounting's ``max_active_jobs`` for ``bank`` (``None``: the default bank)."""
    for association in associations or ():
        if association.bank == (bank or association.default_bank):
            return association.max_active_jobs
    return None


def flux_gpus(resources: Resources) -> int:
    """GPUs per slot (Flux's ``-g``): ``gpus``, ``gpus_per_task``, or ``gpus_per_node`` shared
    evenly among a node's slots."""
    asked = {
        key: value
        for key, value in (("gpus", resources.gpus), ("gpus_per_task", resources.gpus_per_task))
        if value
    }
    if resources.gpus_per_node:
        if not resources.nodes:
            raise ResourceError(
                "gpus_per_node",
                "Flux counts GPUs per slot: give nodes too, so that a node's GPUs are shared "
                "among its slots (or ask gpus_per_task)",
            )
        slots, uneven = divmod(resources.slots, resources.nodes)
        if uneven or resources.gpus_per_node % slots:
            raise ResourceError(
                "gpus_per_node",
                f"{resources.gpus_per_node} GPUs per node over {resources.slots} tasks on "
                f"{resources.nodes} nodes is no whole number per slot, which is all Flux takes; "
                "ask gpus_per_task",
            )
        asked["gpus_per_node"] = resources.gpus_per_node // slots
    if len(set(asked.values())) > 1:
        said = ", ".join(f"{key}={value}" for key, value in asked.items())
        raise ResourceError(
            "gpus_per_task",
            f"Flux's -g is one count per slot: {said} (per slot) disagree; give one of them",
        )
    return next(iter(asked.values()), 0)


def translate(batch: SubmitBatch, queue: Optional[str], policy: FluxPolicy) -> SubmitRequest:
    resources, kind = batch.resources, kind_of(batch)
    asked = resources.to_dict()
    for key, why in REFUSED_KEYS.items():
        if key in asked:
            raise ResourceError(key, f"{why}; nothing was submitted")
    for key, flag in RELEASE_KEYS.items():
        if asked.get(key) not in (None, False) and not getattr(policy, flag):
            _once("flux: %s=%s dropped: Flux %s has no %s", key, asked[key], policy, key)
    exclusive = bool(resources.exclusive) and policy.exclusive
    if exclusive and not resources.nodes:
        raise ResourceError(
            "exclusive", "Flux's exclusive is whole nodes: give nodes too (e.g. nodes=1)"
        )
    if resources.signal and resources.signal.startswith("B:"):
        raise ResourceError(
            "signal",
            "Flux sends the signal to the whole job, your script included: give it without B:",
        )
    signal = None
    if resources.signal and policy.warning_signal:
        name, seconds = signal_parts(resources.signal)
        # Flux's default, as Slurm's: 60 seconds before the limit.
        signal = (int(getattr(signals, "SIG" + name)), float(60 if seconds is None else seconds))
    for key, why in DROPPED_KEYS.items():
        # partition: below, saying where queues go; requeue=False: Flux never requeues
        if key in asked and key != "partition" and asked[key] is not False:
            log.warning("flux: %s=%s dropped: %s", key, asked[key], why)
    gpus_per_slot = flux_gpus(resources)
    if resources.partition:
        log.warning(
            "flux: partition=%r dropped: %s (a Flux queue is --qos NAME, or qos in the resources)",
            resources.partition,
            DROPPED_KEYS["partition"],
        )
    requires = resources.constraint
    if requires and not policy.constraints:
        log.warning("flux: constraint=%r dropped: Flux %s has no --requires", requires, policy)
        requires = None
    dependencies = tuple(decimal_job_id(job_id) for job_id in batch.depends_on)
    if dependencies and not policy.dependencies:
        raise JobSubmissionError(
            f"Flux adapter {policy.name} has no job dependencies (RFC 26 came later); "
            "submit without depends_on, or wait for the parent first"
        )
    duration = resources.time
    if duration is not None and math.isinf(duration):
        duration = None  # unlimited: no -t at all
    environment: Dict[str, str] = {}
    if kind is JobKind.PLAIN and resources.slots > 1:
        environment[EXIT_RANKS_VARIABLE] = str(resources.slots)
    return SubmitRequest(
        wrapper_path=batch.job.wrapper_path,
        # Flux has no arrays: each job is sent under its own name (FluxPlan.names),
        # the first one's here.
        job_name=batch.job.name_of(0),
        output=batch.output,
        cwd=batch.job.remote_dir,
        kind=kind,
        nslots=resources.slots,  # -N must not exceed the slot count
        cores_per_slot=resources.cpus_per_task or 1,
        gpus_per_slot=gpus_per_slot,
        nodes=resources.nodes,
        duration=duration,
        queue=queue,
        bank=resources.account,
        requires=requires,
        dependencies=dependencies,
        environment=environment,
        exclusive=exclusive,
        begin=resources.begin if policy.begin_time else None,
        signal=signal,
        key=batch.job.token if batch.count == 1 else None,
    )


def choose_queue(
    requested: Optional[str], info: Optional[QueueInfo], policy: FluxPolicy
) -> Optional[str]:
    if not policy.queues:
        if requested:
            # 0.26: `--queue` is an unrecognized argument and system.queue is ignored.
            log.warning("Flux adapter %s has no queues: queue %r dropped", policy.name, requested)
        return None
    if info is None:
        return requested  # the queues could not be read: Flux will judge
    if not info.names:
        if requested:
            # A named queue on an anonymous-only broker is rejected
            # ("'debug' is not a valid queue"): omit it.
            log.warning(
                "this Flux instance has only the anonymous queue: queue %r omitted", requested
            )
        return None
    valid = ", ".join(info.names)
    if requested:
        if requested not in info.names:
            raise JobSubmissionError(
                f"Flux queue {requested!r} does not exist on this instance; valid queues: {valid}",
                scheduler_message=f"Invalid queue '{requested}' specified",
            )
        return requested
    if info.default:
        log.info("no queue requested: using the default queue %r", info.default)
        return info.default
    raise JobSubmissionError(
        "this Flux instance has named queues and no default queue; request one with "
        f"--qos NAME (HPCBRIDGE_QOS, or qos in the resources; valid queues: {valid})",
        scheduler_message="no queue specified",
    )


class TimeLeft:
    """Seconds until the instance ends, from its expiration (asked at most once a minute)."""

    def __init__(self, expiration: Callable[[], Optional[float]]) -> None:
        self._expiration = expiration
        self._lock = threading.Lock()
        self._cached: Tuple[float, Optional[float]] = (-math.inf, None)

    def __call__(self) -> Optional[float]:
        with self._lock:
            fetched, expiration = self._cached
            if time.monotonic() - fetched > EXPIRATION_TTL:
                try:
                    expiration = self._expiration()
                except Exception as exc:  # noqa: BLE001 - unknown: no check
                    log.debug("flux: cannot read the instance expiration: %s", exc)
                    expiration = None
                self._cached = (time.monotonic(), expiration)
        if expiration is None:
            return None
        # The client's clock; over SSH a skew of seconds is covered by the margin.
        return expiration - time.time()


def check_outer_limit(duration: Optional[float], left: Optional[float], margin: float) -> None:
    """Refuse a job longer than the enclosing job has left (its instance ends with it)."""
    if not duration or left is None:
        return
    allowed = left - margin
    if duration <= allowed:
        return
    ends = (
        f"the target Flux instance ends in {format_fsd(max(round(left), 0))} (it runs "
        "inside a job with a time limit)"
    )
    margin_text = format_fsd(margin)
    if allowed <= 0:
        raise JobSubmissionError(
            f"{ends}: too little left for a job of {format_fsd(duration)} "
            f"with a {margin_text} margin; submit to an instance with more time left"
        )
    raise JobSubmissionError(
        f"{ends}: a job of {format_fsd(duration)} would not fit; ask for at most "
        f"{format_fsd(math.floor(allowed))} ({margin_text} margin)"
    )


def submit_argv(flux: str, policy: FluxPolicy, request: SubmitRequest) -> List[str]:
    """``flux batch`` or ``flux submit`` (``flux mini ...`` on 0.26) of ``request``."""
    command = policy.batch_command if request.kind is JobKind.BATCH else policy.submit_command
    argv = [flux, *command, f"-n{request.nslots}"]
    if request.nodes:
        argv.append(f"-N{request.nodes}")
    if request.cores_per_slot > 1:
        argv.append(f"-c{request.cores_per_slot}")
    if request.gpus_per_slot:
        argv.append(f"-g{request.gpus_per_slot}")
    if request.exclusive:
        argv.append("--exclusive")
    if request.duration:
        # Always with a unit: a bare `-t 90` means 90 *minutes* to the CLI.
        argv.append(f"-t{format_fsd(request.duration)}")
    if request.queue:
        argv.append(f"--queue={request.queue}")
    if request.bank:
        # `--setattr=system.bank`: every release (0.49 has no --bank); ignored without accounting.
        argv.append(f"--setattr=system.bank={request.bank}")
    if request.requires:
        argv.append(f"--requires={request.requires}")
    for job_id in request.dependencies:
        argv.append(f"--dependency=afterok:{job_id}")
    if request.begin:
        argv.append(f"--dependency=begin-time:{float(request.begin)}")
    if request.signal:
        # Leaf by leaf, each value JSON (as the native options' attributes).
        signum, timeleft = request.signal
        argv.append(f"--setattr=system.shell.options.signal.signum={signum}")
        argv.append(f"--setattr=system.shell.options.signal.timeleft={timeleft}")
    argv.append(f"--job-name={request.job_name}")
    argv.append(f"--output={request.output}")
    for name, value in sorted(request.environment.items()):
        argv.append(f"--env={name}={value}")
    for path, value in request.attributes:
        argv.append(f"--setattr={path}={json.dumps(value)}")
    if request.key:
        # --setattr parses JSON (123e45 would be a number): a JSON string stays the key.
        argv.append(f"--setattr={KEY_ATTRIBUTE}={json.dumps(request.key)}")
    argv.append(request.wrapper_path)
    return argv


def jobspec_params(request: SubmitRequest) -> Dict[str, Any]:
    return {
        "kind": request.kind.value,
        "script": batch_script(request.wrapper_path),
        "command": [request.wrapper_path],
        "jobname": request.job_name,
        "num_slots": request.nslots,
        "cores_per_slot": request.cores_per_slot,
        "gpus_per_slot": request.gpus_per_slot,
        "num_nodes": request.nodes,
        "duration": request.duration or 0,
        "cwd": request.cwd,
        "output": request.output,
        "queue": request.queue,
        "bank": request.bank,
        "requires": request.requires,
        "dependencies": list(request.dependencies),
        "exclusive": request.exclusive,
        "begin": request.begin,
        "signal": list(request.signal) if request.signal else None,
        "environment": dict(request.environment),
        "attributes": [list(pair) for pair in request.attributes],
        "key": request.key,
    }


# What a starting instance says before its job-ingest service exists.
NOT_READY = ("No service matching job-ingest.submit", "Function not implemented")


# Every release's words for a broker socket missing or unheard: nothing was sent.
NEVER_REACHED = ("Unable to connect to Flux",)


def not_ready(outcomes: Sequence[Outcome]) -> bool:
    """Nothing went in, only because the instance is still starting or unreachable."""
    markers = NOT_READY + NEVER_REACHED
    return bool(outcomes) and all(
        not ok and any(marker in value for marker in markers) for ok, value in outcomes
    )


def send(
    attempt: Callable[[], List[Outcome]],
    *,
    output: str,
    kind: str,
    what: str,
    ready_timeout: float,
) -> List[Submitted]:
    """``attempt()`` until the instance is ready; the jobs that went in, in order (some in:
    ``PartialSubmissionError``; none: the first refusal in Flux's own words)."""
    noted: List[bool] = []

    def noting() -> List[Outcome]:
        outcomes = attempt()
        if not noted and not_ready(outcomes) and any(m in outcomes[0][1] for m in NEVER_REACHED):
            noted.append(True)
            log.info(
                "%s did not reach the Flux instance (%s); sending it again",
                what,
                scheduler_message(outcomes[0][1]),
            )
        return outcomes

    outcomes = noting()
    if not_ready(outcomes):
        outcomes = retry(noting, budget=ready_timeout, again=not_ready, pause=0.25, what=what)
    submitted: List[Submitted] = []
    failures: List[str] = []
    for index, (ok, value) in enumerate(outcomes):
        if ok:
            submitted.append(Submitted(value, log_path(output, value), index, kind))
        else:
            failures.append(value)
    if failures and submitted:
        limited = any(limit_refused(failure) for failure in failures)
        raise PartialSubmissionError(submitted, failures, len(outcomes), limited)
    if failures:
        raise submission_error(failures[0], what=what)
    if not submitted:
        raise JobSubmissionError(f"{what} submitted nothing and said nothing")
    return submitted


def log_path(output: str, job_id: str) -> str:
    return output.replace("{{id}}", job_id)


#: Flux's words for a job refused by a cap on this user's active jobs: flux-core caps
#: none; flux-accounting's priority plugin rejects past the bank's max_active_jobs
LIMIT_REFUSED = ("user has max active jobs",)


def limit_refused(text: str) -> bool:
    return any(marker in text for marker in LIMIT_REFUSED)


def submission_error(
    text: str, argv: Optional[Sequence[str]] = None, what: str = "flux batch"
) -> JobSubmissionError:
    """Flux's refusal (``LimitRefusedError`` for a cap on active jobs)."""
    message = scheduler_message(text) or "no message"
    cls = LimitRefusedError if limit_refused(message) else JobSubmissionError
    return cls(f"{what} refused the job: {message}", argv=argv, scheduler_message=message)


#: one attempt at sending a plan's jobs (``submission.send``)
Attempt = Callable[[], List[Outcome]]

#: jobs per submission (one jobspec, many task indices): the bound of both Flux drivers
MAX_BATCH = 10000


class FluxDriverBase:
    """What both Flux drivers do alike: plan, send, and ask by command (banks, keys)."""

    def __init__(
        self,
        commands: FluxCommands,
        facts: InstanceFacts,
        expiration: Callable[[], Optional[float]],
        ready_timeout: float,
        outer_time_margin: float,
    ) -> None:
        self.commands = commands
        self.facts = facts
        self.ready_timeout = ready_timeout
        self.outer_time_margin = outer_time_margin
        self.time_left = TimeLeft(expiration)
        self.questions = Questions(
            self.time_left, self.commands.native_attributes, self.commands.associations
        )
        self._ready = False

    def plan(self, batch: SubmitBatch) -> Planned:
        return plan_batch(batch, self.facts, self.questions, self.outer_time_margin)

    def _send(
        self, planned: Planned, wait_ready: Callable[[float], None], attempt: Attempt, what: str
    ) -> List[Submitted]:
        if not self._ready:
            wait_ready(self.ready_timeout)
            self._ready = True
        output, kind = flux_plan(planned).request.output, kind_of(planned.batch).value
        return send(attempt, output=output, kind=kind, what=what, ready_timeout=self.ready_timeout)

    def _where(self) -> str:
        return f"the Flux instance {self.facts.label}"

    def max_batch(self) -> int:
        return MAX_BATCH

    def queue_limit(self, account: Optional[str] = None, *, ask: bool = True) -> Optional[int]:
        """flux-accounting's ``max_active_jobs`` of the bank, read by command; ``None``
        without accounting (flux-core caps no user's jobs).  Read even with ``ask=False``:
        Flux refuses the jobs past the cap one by one, a round and a refusal each."""
        return active_cap(self.commands.associations(), account)

    def find_submitted(
        self, planned: Planned, since: Optional[float] = None
    ) -> Optional[List[Submitted]]:
        """By the keys in the jobs' jobspecs, this user's jobs since ``since`` (else
        ``LOOK_BACK``)."""
        plan = flux_plan(planned)
        began = since if since is not None else time.time() - LOOK_BACK
        finder = KeyFinder(self.commands, self.facts.policy, began)
        found = look_up_all(finder, plan.keys, self._where())
        ids = {key: canonical_job_id(job_id) for key, job_id in found.items()}
        output, kind = plan.request.output, kind_of(planned.batch).value
        jobs = [
            Submitted(ids[key], log_path(output, ids[key]), index, kind)
            for index, key in enumerate(plan.keys)
            if key in ids
        ]
        return jobs or None
