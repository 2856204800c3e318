"""``get_scheduler_adapter``: an adapter from the settings (environment + overrides)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional

from .settings.config import Settings
from .settings.schedulers import scheduler_entry
from .store.jobs import JobStore
from .transports.base import Executor
from .transports.local import LocalExecutor

if TYPE_CHECKING:
    from .engine.adapter import SchedulerAdapter


def build_executor(settings: Settings) -> Executor:
    """The transport the settings ask for."""
    if settings.transport == "ssh" and settings.ssh_backend == "openssh":
        from .transports.ssh.openssh import OpenSSHExecutor

        return OpenSSHExecutor.from_settings(settings)
    if settings.transport == "ssh":
        from .transports.ssh.executor import SSHExecutor

        return SSHExecutor.from_settings(settings)
    return LocalExecutor(default_timeout=settings.command_timeout, env=settings.command_env)


def get_scheduler_adapter(
    *,
    executor: Optional[Executor] = None,
    store: Optional[JobStore] = None,
    env: Optional[Mapping[str, str]] = None,
    **overrides: Any,
) -> SchedulerAdapter:
    """The adapter for ``HPCBRIDGE_SCHEDULER`` and its transport; keyword overrides take
    any setting name (``scheduler="slurm"``, ``ssh_host=...``), and with ``env`` given the
    settings come from it alone, not from this process's environment."""
    return adapter_from_settings(Settings.from_env(env, **overrides), executor, store)


def adapter_from_settings(
    settings: Settings, executor: Optional[Executor] = None, store: Optional[JobStore] = None
) -> SchedulerAdapter:
    executor = executor if executor is not None else build_executor(settings)
    adapter_class = scheduler_entry(settings.scheduler).adapter_class()
    adapter: SchedulerAdapter = adapter_class(executor=executor, settings=settings, store=store)
    return adapter
