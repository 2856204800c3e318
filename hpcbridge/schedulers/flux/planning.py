"""A batch planned for Flux: resources translated into a ``SubmitRequest`` and refused - in
Flux's terms, saying what to ask instead - before anything is staged (queues, banks, GPUs,
the enclosing job's time left, what a release lacks); its sending handed to the engine's
runner (``send_plan``) and its outcomes read.  Pure.
"""

from __future__ import annotations

import logging
import math
import signal as signals
from dataclasses import dataclass, replace
from typing import AbstractSet, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ...engine.driver import (
    TASK_INDEX_VARIABLE,
    Again,
    PartialSubmissionError,
    Planned,
    SubmitBatch,
    Submitted,
)
from ...engine.jobscript import EXIT_RANKS_VARIABLE
from ...errors import JobSubmissionError, ResourceError
from ...resources import Resources, format_fsd, signal_parts
from ...settings.config import Settings
from .answers import (
    NEVER_REACHED,
    NOT_READY,
    Outcome,
    limit_refused,
    scheduler_message,
    submission_error,
)
from .ids import decimal_job_id
from .instance import Association, FluxPolicy, InstanceFacts, QueueInfo, UriSetting
from .options import Attributes
from .request import (
    DROPPED_KEYS,
    REFUSED_KEYS,
    RELEASE_KEYS,
    FluxPlan,
    JobChoice,
    JobKind,
    SubmitRequest,
)

log = logging.getLogger("hpcbridge")

#: the engine runner's ``send_keyed`` bound to a driver's ``Keyed`` (``driver_base``)
Sender = Callable[..., List[Outcome]]

_said: set = set()


def _once(message: str, *args: Any) -> None:
    """A warning said once per process (a release that lacks a key)."""
    text = message % args
    if text not in _said:
        _said.add(text)
        log.warning(text)


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
    resources, kind = batch.resources, kind_of(batch.options)
    check_keys(resources, policy)
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
        gpus_per_slot=flux_gpus(resources),
        nodes=resources.nodes,
        duration=duration,
        queue=queue,
        bank=resources.account,
        requires=constraint(resources, policy),
        dependencies=dependencies(batch, policy),
        environment=environment,
        exclusive=bool(resources.exclusive) and policy.exclusive,
        begin=resources.begin if policy.begin_time else None,
        signal=warning_signal(resources, policy),
        key=batch.job.token if batch.count == 1 else None,
    )


def check_keys(resources: Resources, policy: FluxPolicy) -> None:
    """Refuse the keys Flux cannot honour; say which it drops (``log``)."""
    asked = resources.to_dict()
    for key, why in REFUSED_KEYS.items():
        if key in asked:
            raise ResourceError(key, f"{why}; nothing was submitted")
    for key, flag in RELEASE_KEYS.items():
        if asked.get(key) not in (None, False) and not getattr(policy, flag):
            _once("flux: %s=%s dropped: Flux %s has no %s", key, asked[key], policy, key)
    if resources.exclusive and policy.exclusive and not resources.nodes:
        raise ResourceError(
            "exclusive", "Flux's exclusive is whole nodes: give nodes too (e.g. nodes=1)"
        )
    for key, why in DROPPED_KEYS.items():
        # partition: below, saying where queues go; requeue=False: Flux never requeues
        if key in asked and key != "partition" and asked[key] is not False:
            log.warning("flux: %s=%s dropped: %s", key, asked[key], why)
    if resources.partition:
        log.warning(
            "flux: partition=%r dropped: %s (a Flux queue is --qos NAME, or qos in the resources)",
            resources.partition,
            DROPPED_KEYS["partition"],
        )


def warning_signal(resources: Resources, policy: FluxPolicy) -> Optional[Tuple[int, float]]:
    """The signal number and the seconds before the limit, where the release sends it."""
    if resources.signal and resources.signal.startswith("B:"):
        raise ResourceError(
            "signal",
            "Flux sends the signal to the whole job, your script included: give it without B:",
        )
    if not (resources.signal and policy.warning_signal):
        return None
    name, seconds = signal_parts(resources.signal)
    # Flux's default, as Slurm's: 60 seconds before the limit.
    return int(getattr(signals, "SIG" + name)), float(60 if seconds is None else seconds)


def constraint(resources: Resources, policy: FluxPolicy) -> Optional[str]:
    if resources.constraint and not policy.constraints:
        log.warning(
            "flux: constraint=%r dropped: Flux %s has no --requires", resources.constraint, policy
        )
        return None
    return resources.constraint


def dependencies(batch: SubmitBatch, policy: FluxPolicy) -> Tuple[str, ...]:
    found = tuple(decimal_job_id(job_id) for job_id in batch.depends_on)
    if found and not policy.dependencies:
        raise JobSubmissionError(
            f"Flux adapter {policy.name} has no job dependencies (RFC 26 came later); "
            "submit without depends_on, or wait for the parent first"
        )
    return found


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


def job_keys(token: str, count: int) -> Tuple[str, ...]:
    """The key of each job of a batch: the wrapper's token, ``.<task index>`` when many."""
    return (token,) if count == 1 else tuple(f"{token}.{index}" for index in range(count))


@dataclass(frozen=True)
class JobKinds:
    """Flux's own keyword, ``nested``, read into the job kind its drivers read (``choose_kind``)."""

    settings: Settings
    uri_setting: UriSetting
    names: AbstractSet[str] = frozenset({"nested"})

    def read(self, given: Mapping[str, Any]) -> JobChoice:
        return choose_kind(given.get("nested"), self.settings, self.uri_setting)


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


def kind_of(options: object) -> JobKind:
    """The kind a submission's options (``JobKinds.read``) ask for; none read: a batch job."""
    return options.kind if isinstance(options, JobChoice) else JobKind.BATCH


def launcher_for(flux_command: str, policy: FluxPolicy, options: object) -> str:
    """``flux run`` (``flux mini run`` on 0.26) in a batch job; none in a plain job."""
    if kind_of(options) is JobKind.PLAIN:
        return ""
    # Expanded unquoted by the script (`$HPCBRIDGE_LAUNCHER -n 2 app`): plain words.
    return " ".join([flux_command, *policy.run_command])


def flux_plan(planned: Planned) -> FluxPlan:
    if not isinstance(planned.detail, FluxPlan):
        raise TypeError("a Flux driver was handed another driver's plan")
    return planned.detail


def send_plan(
    planned: Planned, send: Callable[[FluxPlan], List[Outcome]], what: str, sender: Sender
) -> List[Submitted]:
    """The jobs of ``planned`` that went in (``submitted``), sent by ``send`` through the
    engine's runner (``sender``): again while the instance starts (``reached``), the jobs
    of lost answers found by key."""
    plan = flux_plan(planned)
    outcomes = sender(what, send, plan, plan.keys, lambda sent: reached(sent, what))
    return submitted(outcomes, plan.request.output, kind_of(planned.batch.options).value, what)


def reached(outcomes: List[Outcome], what: str) -> List[Outcome]:
    """The outcomes of a sending that reached the instance; ``Again`` (the runner sends it
    again) while it is starting or unreachable: all refused so, nothing having gone in."""
    markers = NOT_READY + NEVER_REACHED
    if outcomes and all(not ok and any(m in text for m in markers) for ok, text in outcomes):
        raise Again(scheduler_message(outcomes[0][1]), submission_error(outcomes[0][1], what=what))
    return outcomes


def submitted(outcomes: Sequence[Outcome], output: str, kind: str, what: str) -> List[Submitted]:
    """The jobs that went in, in order (some in: ``PartialSubmissionError``; none: the first
    refusal in Flux's own words)."""
    jobs: List[Submitted] = []
    failures: List[str] = []
    for index, (ok, value) in enumerate(outcomes):
        if ok:
            jobs.append(Submitted(value, log_path(output, value), index, kind))
        else:
            failures.append(value)
    if failures and jobs:
        limited = any(limit_refused(failure) for failure in failures)
        raise PartialSubmissionError(jobs, failures, len(outcomes), limited)
    if failures:
        raise submission_error(failures[0], what=what)
    if not jobs:
        raise JobSubmissionError(f"{what} submitted nothing and said nothing")
    return jobs


def log_path(output: str, job_id: str) -> str:
    return output.replace("{{id}}", job_id)


def expiration_of(resource_r: Any) -> Optional[float]:
    """``execution.expiration`` of an R object (the bindings' answer); ``None`` when
    unlimited (0) or not told."""
    try:
        expiration = float(resource_r["execution"].get("expiration") or 0.0)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return expiration if expiration > 0 else None
