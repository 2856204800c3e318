"""The one list of schedulers, read by config, the CLI, the factory and doctor: plain data,
importing no scheduler's modules until asked (``import hpcbridge`` must not pull in
paramiko, flux or pyslurm)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Tuple

#: how a scheduler's driver is chosen: the bindings when they work, else the CLI
DRIVER_CHOICES: Tuple[str, ...] = ("auto", "native", "cli")
#: Slurm's, with its REST API (slurmrestd): ``HPCBRIDGE_SLURM_REST_URL``
SLURM_DRIVER_CHOICES: Tuple[str, ...] = (*DRIVER_CHOICES, "rest")
#: the container runtimes a job's script can run in (``engine/containers.py``)
CONTAINER_RUNTIMES: Tuple[str, ...] = ("ch-run", "apptainer", "singularity")


@dataclass(frozen=True)
class SchedulerEntry:
    name: str
    #: "module:Class" of the adapter
    adapter: str
    #: module with ``checks(settings, executor) -> List[Check]`` for doctor, if any
    doctor: Optional[str]
    summary: str
    #: "module:function" (a pure module) turning any typed form of a job id
    #: into the one recorded, raising ``ValueError`` for text that is no id
    #: of this scheduler; ``None``: ids are recorded as typed
    job_id_form: Optional[str] = None
    #: "module:function" (a pure module) giving the resource keys it drops and those it
    #: refuses, each with why (two mappings); ``None``: every key is sent to the scheduler
    key_handling: Optional[str] = None

    def adapter_class(self) -> Any:
        return _named(self.adapter)

    def keys_handled(self) -> Tuple[Mapping[str, str], Mapping[str, str]]:
        """The resource keys it drops and those it refuses, each with why."""
        if self.key_handling is None:
            return {}, {}
        handling: Callable[[], Tuple[Mapping[str, str], Mapping[str, str]]] = _named(
            self.key_handling
        )
        return handling()

    def recorded_job_id(self, job_id: str) -> str:
        """``job_id`` as this scheduler's records hold it (``ValueError``: not its id)."""
        if self.job_id_form is None:
            return str(job_id).strip()
        normalize: Callable[[str], str] = _named(self.job_id_form)
        return normalize(job_id)


def _named(where: str) -> Any:
    """What ``"module:name"`` names, the module imported now (not when listed here)."""
    module_name, _, name = where.partition(":")
    return getattr(importlib.import_module(module_name), name)


SCHEDULER_ENTRIES: Tuple[SchedulerEntry, ...] = (
    SchedulerEntry(
        "mock",
        "hpcbridge.schedulers.mock:MockAdapter",
        None,
        "runs jobs on this machine",
    ),
    SchedulerEntry(
        "slurm",
        "hpcbridge.schedulers.slurm.adapter:RealSlurmAdapter",
        "hpcbridge.schedulers.slurm.doctor",
        "sbatch/squeue/sacct, or pyslurm in-process",
        "hpcbridge.schedulers.slurm.ids:job_id_of",
    ),
    SchedulerEntry(
        "flux",
        "hpcbridge.schedulers.flux.adapter:FluxAdapter",
        "hpcbridge.schedulers.flux.doctor",
        "flux batch/submit, or the flux.job bindings in-process",
        "hpcbridge.schedulers.flux.ids:canonical_job_id",
        "hpcbridge.schedulers.flux.request:key_handling",
    ),
)

SCHEDULERS: Tuple[str, ...] = tuple(entry.name for entry in SCHEDULER_ENTRIES)


def scheduler_entry(name: str) -> SchedulerEntry:
    for entry in SCHEDULER_ENTRIES:
        if entry.name == name:
            return entry
    raise KeyError(name)


def check_driver_choice(scheduler: str, requested: str) -> str:
    """``requested`` lower-cased, or ``ConfigurationError`` naming the choices."""
    from ..errors import ConfigurationError

    choice = (requested or "auto").strip().lower()
    choices = SLURM_DRIVER_CHOICES if scheduler == "slurm" else DRIVER_CHOICES
    if choice not in choices:
        raise ConfigurationError(
            f"unknown {scheduler} driver {requested!r}; choose one of {', '.join(choices)}"
        )
    return choice
