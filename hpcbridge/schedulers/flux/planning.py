"""What both drivers do before submitting: the facts they are made with, the
queue choice, the translated requests and the check against the enclosing
job's time limit."""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from ...durations import format_fsd
from ...errors import JobSubmissionError
from ..driver import TASK_INDEX_VARIABLE, PartialSubmissionError, SubmitBatch, Submitted
from .queues import QueueInfo, choose_queue, log_choice, submission_error
from .requests import BATCH, PLAIN, SubmitRequest, plan_request
from .versions import FluxPolicy

log = logging.getLogger("hpcbridge")

#: how long the instance's expiration is trusted before asking again
EXPIRATION_TTL = 60.0


@dataclass(frozen=True)
class FluxOptions:
    """How the adapter was asked to talk to Flux (constructor arguments over settings)."""

    flux_command: str = "flux"
    #: "auto", "native" or "cli"
    requested_driver: str = "auto"
    #: a version policy name forced by the settings, else "" (detect)
    adapter_version: str = ""
    #: the instance in which a bare job id target is looked up
    parent_uri: Optional[str] = None
    command_timeout: float = 60.0
    ready_timeout: float = 30.0
    probe_timeout: float = 10.0
    outer_time_margin: float = 60.0
    #: look for the bindings beside the flux command when ``import flux`` fails
    discover_bindings: bool = True


@dataclass(frozen=True)
class InstanceFacts:
    """What the adapter learned about its instance before making a driver."""

    #: ``None`` = the system instance
    uri: Optional[str]
    broker_version: Optional[str]
    policy: FluxPolicy
    policy_reason: str
    #: ``None`` when the queues could not be read (or the release has none)
    queues: Optional[QueueInfo]

    @property
    def label(self) -> str:
        return self.uri or "the system instance"


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


class Readiness:
    """Waits once for a starting instance before the first submission (submits retry too)."""

    def __init__(self, wait_ready: Callable[[float], None], timeout: float) -> None:
        self._wait_ready = wait_ready
        self._timeout = timeout
        self._done = threading.Event()

    def ensure(self) -> None:
        if self._done.is_set():
            return
        try:
            self._wait_ready(self._timeout)
        except OSError as exc:
            log.debug("flux: readiness check failed: %s", exc)
        self._done.set()


def plan_requests(
    batch: SubmitBatch,
    facts: InstanceFacts,
    options: FluxOptions,
    time_left: Optional[TimeLeft],
) -> List[SubmitRequest]:
    """One request per job of ``batch``; ``time_left=None`` skips the time check (dry run).

    Raises ``JobSubmissionError`` for a queue the instance lacks, dependencies
    a release cannot honour, or a job longer than the instance has left.
    """
    request = plan_one(batch, facts.policy, facts.queues)
    if time_left is not None:
        check_outer_limit(request.duration, time_left(), options.outer_time_margin)
    if batch.count == 1:
        return [request]
    return [
        request.with_environment(**{TASK_INDEX_VARIABLE: str(index)})
        for index in range(batch.count)
    ]


def plan_one(batch: SubmitBatch, policy: FluxPolicy, queues: Optional[QueueInfo]) -> SubmitRequest:
    """The request of ``batch``'s first job (the others differ in their task index)."""
    choice = choose_queue(batch.resources.qos, queues if policy.queues else None, policy)
    log_choice(choice)
    request, warnings = plan_request(
        batch.resources,
        wrapper_path=batch.job.wrapper_path,
        job_name=batch.job.job_name,
        output=batch.output,
        cwd=batch.job.remote_dir,
        depends_on=batch.depends_on,
        queue=choice.queue,
        policy=policy,
        kind=PLAIN if batch.nested is False else BATCH,
    )
    for warning in warnings:
        log.warning("flux: %s", warning)
    return request


def check_outer_limit(duration: Optional[float], left: Optional[float], margin: float) -> None:
    """Refuse a job that cannot fit in what the enclosing job has left.

    A nested instance (``flux batch``, or a broker inside a Slurm job) ends
    with its job; Flux may reject a longer request late or kill the job at
    the outer limit - say so now, with the numbers.
    """
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
            f"with a {margin_text} margin"
        )
    raise JobSubmissionError(
        f"{ends}: a job of {format_fsd(duration)} would not fit; ask for at most "
        f"{format_fsd(math.floor(allowed))} ({margin_text} margin)"
    )


def log_path(output: str, job_id: str) -> str:
    """Where a submitted job's output lands: Flux's ``{{id}}`` replaced by its id."""
    return output.replace("{{id}}", job_id)


def submitted_or_raise(
    results: Sequence[Tuple[bool, str]], output: str, what: str
) -> List[Submitted]:
    """The jobs that went in, one per ``(ok, id or message)``; raise when any did not.

    Some in: ``PartialSubmissionError`` (they are recorded, never sent twice);
    none: the first refusal as a ``JobSubmissionError``.
    """
    submitted = [
        Submitted(value, log_path(output, value), index)
        for index, (ok, value) in enumerate(results)
        if ok
    ]
    failures = [value for ok, value in results if not ok]
    if failures and submitted:
        raise PartialSubmissionError(submitted, failures, len(results))
    if failures:
        raise submission_error(failures[0], what=what)
    return submitted
