"""hpcbridge: submit a batch script to Slurm or Flux (or run it locally) and follow it.
Everything public is re-exported here, without importing paramiko, flux or pyslurm."""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import (
        ConfigurationError,
        HostKeyError,
        JobNotFoundError,
        JobSubmissionError,
        JobTimeoutError,
        LimitRefusedError,
        ResourceError,
        SchedulerAdapterError,
        SchedulerUnavailableError,
        SlurmAdapterError,
        SubmissionUncertainError,
        SweepCancelledError,
        TransportError,
    )
    from .model import TERMINAL_STATES, JobState, JobStatus
    from .resources import RESOURCE_KEYS, Resources
    from .settings.config import Settings
    from .transports.base import CommandResult, Executor
    from .transports.local import LocalExecutor

__all__ = [
    "RESOURCE_KEYS",
    "TERMINAL_STATES",
    "CommandResult",
    "ConfigurationError",
    "Executor",
    "FluxAdapter",
    "HostKeyError",
    "JobNotFoundError",
    "JobState",
    "JobStatus",
    "JobStore",
    "JobSubmissionError",
    "JobTimeoutError",
    "LimitRefusedError",
    "LocalExecutor",
    "MockAdapter",
    "PartialSubmissionError",
    "RealSlurmAdapter",
    "ResourceError",
    "Resources",
    "SSHExecutor",
    "SchedulerAdapter",
    "SchedulerAdapterError",
    "SchedulerUnavailableError",
    "Settings",
    "SlurmAdapterError",
    "Sweep",
    "SubmissionUncertainError",
    "SweepCancelledError",
    "TransportError",
    "__version__",
    "get_scheduler_adapter",
]

# resolved on first use: importing the package (or one module of it) stays cheap
_LAZY = {
    **{
        name: ("hpcbridge.errors", name)
        for name in (
            "ConfigurationError",
            "HostKeyError",
            "JobNotFoundError",
            "JobSubmissionError",
            "JobTimeoutError",
            "LimitRefusedError",
            "ResourceError",
            "SchedulerAdapterError",
            "SchedulerUnavailableError",
            "SlurmAdapterError",
            "SubmissionUncertainError",
            "SweepCancelledError",
            "TransportError",
        )
    },
    **{name: ("hpcbridge.model", name) for name in ("TERMINAL_STATES", "JobState", "JobStatus")},
    **{name: ("hpcbridge.resources", name) for name in ("RESOURCE_KEYS", "Resources")},
    "Settings": ("hpcbridge.settings.config", "Settings"),
    "CommandResult": ("hpcbridge.transports.base", "CommandResult"),
    "Executor": ("hpcbridge.transports.base", "Executor"),
    "LocalExecutor": ("hpcbridge.transports.local", "LocalExecutor"),
    "SchedulerAdapter": ("hpcbridge.engine.adapter", "SchedulerAdapter"),
    "MockAdapter": ("hpcbridge.schedulers.mock", "MockAdapter"),
    "PartialSubmissionError": ("hpcbridge.engine.driver", "PartialSubmissionError"),
    "RealSlurmAdapter": ("hpcbridge.schedulers.slurm.adapter", "RealSlurmAdapter"),
    "FluxAdapter": ("hpcbridge.schedulers.flux.adapter", "FluxAdapter"),
    "SSHExecutor": ("hpcbridge.transports.ssh", "SSHExecutor"),
    "JobStore": ("hpcbridge.store", "JobStore"),
    "Sweep": ("hpcbridge.engine.sweeping", "Sweep"),
    "get_scheduler_adapter": ("hpcbridge.factory", "get_scheduler_adapter"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module_name, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module_name), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'hpcbridge' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
