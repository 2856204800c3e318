"""A Flux submission as both drivers send it: the job kind (batch or plain) and why, the
request of one job, the plan of a batch (each job's key, name and variables), and the
jobspec parameters the bindings and the bulk helper build from it.  Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from .options import Attributes


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


def key_handling() -> Tuple[Mapping[str, str], Mapping[str, str]]:
    """The resource keys Flux drops and those it refuses, each with why (doctor)."""
    return DROPPED_KEYS, REFUSED_KEYS


#: keys only some releases take (the policy's flag of that name), dropped by the others
RELEASE_KEYS: Mapping[str, str] = {
    "exclusive": "exclusive",
    "begin": "begin_time",
    "signal": "warning_signal",
}


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


#: jobs per submission (one jobspec, many task indices): the bound of both Flux drivers
MAX_BATCH = 10000
