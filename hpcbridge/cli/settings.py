"""The settings a command runs with (the environment's, its flags over them), and the
job store and adapter they name."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Dict, Optional

from .. import factory
from ..settings.config import Settings
from ..store.jobs import JobStore

if TYPE_CHECKING:  # the adapters load when a command needs them: --help stays quick
    from ..engine.adapter import SchedulerAdapter


def settings_from(args: argparse.Namespace, scheduler: Optional[str] = None) -> Settings:
    """The environment's settings with the command's flags over them."""
    overrides: Dict[str, Any] = {}
    for name in ("transport", "flux_uri"):
        if getattr(args, name, None):
            overrides[name] = getattr(args, name)
    chosen = getattr(args, "scheduler", None) or scheduler
    if chosen:
        overrides["scheduler"] = chosen
    flags = {name: "--" + name.replace("_", "-") for name in overrides}
    return Settings.from_env(given_as=flags, **overrides)


def adapter_for(args: argparse.Namespace, settings: Optional[Settings] = None) -> SchedulerAdapter:
    """The adapter for the settings (default: the command's)."""
    return factory.adapter_from_settings(settings or settings_from(args))


def store_for(settings: Settings) -> JobStore:
    return JobStore(settings.database_path)
