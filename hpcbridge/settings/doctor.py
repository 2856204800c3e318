"""``hpcbridge doctor``: what is usable here, and a one-line reason when not; a failed check
may block the selected transport or scheduler (``Check.blocks``: exit 6 or 7)."""

from __future__ import annotations

import importlib
import platform
import shutil
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import __version__
from ..resources import RESOURCE_KEYS
from ..transports.base import Executor
from .config import Settings
from .schedulers import SCHEDULER_ENTRIES, SchedulerEntry
from .site import describe_site_settings


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    #: what cannot be used when this check fails: "transport", a scheduler's name,
    #: or ``None`` (worth knowing, not in the way: a fallback covers it)
    blocks: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


#: ``Check.blocks`` of a check the selected transport needs
TRANSPORT = "transport"


def unusable(checks: List[Check], settings: Settings) -> Optional[Check]:
    """The first failed check that makes the selected transport or scheduler unusable."""
    for check in checks:
        if not check.ok and check.blocks in (TRANSPORT, settings.scheduler):
            return check
    return None


def run_checks(settings: Settings) -> List[Check]:
    checks = [
        Check("hpcbridge", True, f"{__version__} on Python {platform.python_version()}"),
        Check(
            "settings",
            True,
            f"scheduler={settings.scheduler} ({settings.sources.get('scheduler', 'default')}), "
            f"transport={settings.transport} ({settings.sources.get('transport', 'default')})",
        ),
        _polling_check(settings),
        _store_check(settings),
        container_check(settings),
    ]
    # A scheduler with no checks of its own (the mock) needs nothing from this machine.
    checks.extend(
        Check(f"{entry.name} scheduler", True, f"always available ({entry.summary})")
        for entry in SCHEDULER_ENTRIES
        if entry.doctor is None
    )
    # The mock runs every job here as asked: it has no keys to send or drop.
    keys = [resource_keys_check(entry) for entry in SCHEDULER_ENTRIES if entry.name != "mock"]
    checks.extend(check for check in keys if check is not None)
    executor = None
    if settings.transport == "ssh":
        executor, transport_check = _ssh_check(settings)
        checks.append(transport_check)
        if not transport_check.ok:
            # The schedulers are on the other side: nothing more can be known from here.
            checks.append(Check("schedulers", False, "not checked: the ssh transport failed"))
            return checks
    for entry in SCHEDULER_ENTRIES:
        if entry.doctor is not None:
            checks.extend(_scheduler_checks(entry.name, entry.doctor, settings, executor))
    return checks


def resource_keys_check(entry: SchedulerEntry) -> Optional[Check]:
    """Which resource keys the scheduler gets, which it drops and which it refuses;
    ``None`` where its modules cannot load here (its own checks say why)."""
    try:
        dropped, refused = entry.keys_handled()
    except ImportError:
        return None
    sent = [key for key in RESOURCE_KEYS if key not in dropped and key not in refused]
    parts = [f"sends {', '.join(sent)}"]
    parts += [f"drops {key} ({why})" for key, why in dropped.items()]
    parts += [f"refuses {key} ({why})" for key, why in refused.items()]
    return Check(f"{entry.name} resource keys", True, "; ".join(parts))


def _polling_check(settings: Settings) -> Check:
    """The floor under every poll interval, where it comes from, and the site's file."""
    source = settings.sources.get("min_poll_interval", "default")
    return Check(
        "polling",
        True,
        f"Slurm and Flux asked at most once per {settings.min_poll_interval:g} s ({source}); "
        f"site settings: {describe_site_settings()}",
    )


def container_check(settings: Settings) -> Check:
    """The runtime a step's ``container`` runs with, and whether it is here (jobs run
    where the scheduler puts them: this says only what this machine has)."""
    runtime = settings.container_runtime
    found = shutil.which(runtime)
    source = settings.sources.get("container_runtime", "default")
    image = settings.resource_defaults.get("container")
    asked = f"; every job in {image} (HPCBRIDGE_CONTAINER)" if image else ""
    if found:
        return Check("container runtime", True, f"{runtime} ({source}): {found}{asked}")
    where = "on PATH here" if settings.transport == "local" else "checked here, not where jobs run"
    return Check(
        "container runtime",
        not image or settings.transport != "local",
        f"{runtime} ({source}) is not {where}; a job with a container needs it where it runs"
        f"{asked}",
    )


def _store_check(settings: Settings) -> Check:
    try:
        from ..store.jobs import JobStore

        store = JobStore(settings.database_path)
        count = store.count()
        held = f"{count} job" if count == 1 else f"{count} jobs"
        return Check("job store", True, f"{store.location.describe()} ({held})")
    except Exception as exc:  # doctor reports, it does not fail
        return Check("job store", False, f"{settings.database_path}: {exc}")


def _ssh_check(settings: Settings) -> Tuple[Optional[Executor], Check]:
    try:
        from ..factory import build_executor
        from ..transports.ssh.openssh import master_line

        executor = build_executor(settings)
        result = executor.run(["true"], timeout=30)
        if result.ok:
            reached = f"{executor.host} reachable{master_line(executor)}"
            return executor, Check("ssh transport", True, reached)
        detail = f"{executor.host}: {result.message()}"
        return executor, Check("ssh transport", False, detail, TRANSPORT)
    except Exception as exc:
        return None, Check("ssh transport", False, f"{settings.ssh_host}: {exc}", TRANSPORT)


def _scheduler_checks(
    name: str, module_name: str, settings: Settings, executor: Optional[Executor]
) -> List[Check]:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # hpcbridge installed without its dependencies
        fix = f"pip install {exc.name}" if exc.name else "reinstall hpcbridge with pip"
        return [Check(name, False, f"its checks cannot load here: {exc}; fix: {fix}", name)]
    checks: Callable[..., List[Check]] = module.checks
    try:
        return checks(settings, executor)
    except Exception as exc:
        return [Check(name, False, f"check failed: {exc}", name)]
