"""``hpcbridge doctor`` for Flux: commands, driver and why, versions, queues."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ...config import Settings
from ...doctor import Check
from ...errors import SchedulerAdapterError
from ...transports.base import Executor
from ...transports.local import LocalExecutor
from . import commands
from .adapter import FluxAdapter
from .versions import parse_flux_version_output


def checks(settings: Settings, executor: Optional[Executor]) -> List[Check]:
    """What is usable for Flux from here; never raises."""
    if executor is None:
        executor = LocalExecutor(settings.command_timeout, env=settings.command_env)
    where = "" if executor.kind == "local" else f" on {executor.host}"
    flux = settings.flux_command
    try:
        result = executor.run(commands.version_argv(flux), timeout=30)
    except SchedulerAdapterError as exc:
        return [Check("flux", False, f"cannot run {flux}{where}: {exc}")]
    if not result.ok:
        detail = f"{flux} not found{where} (set HPCBRIDGE_FLUX_COMMAND to its path)"
        if settings.scheduler != "flux":
            detail += "; flux is not the selected scheduler"
        return [Check("flux", False, detail)]
    versions = parse_flux_version_output(result.stdout)
    found = [Check("flux commands", True, f"{flux}{where}: {versions.get('commands', '?')}")]
    try:
        adapter = FluxAdapter(executor=executor, settings=settings)
        info = adapter.doctor_info()
    except Exception as exc:  # doctor reports, it does not fail
        return [*found, Check("flux driver", False, str(exc))]
    found.extend(_from_info(info))
    return found


def _from_info(info: Dict[str, Any]) -> List[Check]:
    if not info.get("driver"):
        return [Check("flux driver", False, str(info.get("error", "unusable")))]
    target = info.get("uri") or "the system instance"
    found = [
        Check("flux driver", True, f"{info['driver']} ({info.get('driver_reason', '')})"),
        Check("flux instance", bool(info.get("broker_version")), _instance(info, target)),
        Check(
            "flux adapter version",
            info.get("adapter_version") is not None,
            f"{info.get('adapter_version')} ({info.get('adapter_version_reason', '')})",
        ),
    ]
    if info.get("bindings_version"):
        found.append(Check("flux bindings", True, str(info["bindings_version"])))
    elif info.get("bindings_error"):
        found.append(Check("flux bindings", False, str(info["bindings_error"])))
    queues = info.get("queues")
    if queues is not None:
        names = queues.get("names") or []
        text = "anonymous queue only" if not names else ", ".join(names)
        if queues.get("default"):
            text += f" (default {queues['default']})"
        found.append(Check("flux queues", True, text))
    if info.get("time_left") is not None:
        found.append(Check("flux time left", True, f"{info['time_left']:.0f} s (enclosing job)"))
    for warning in info.get("warnings", []):
        found.append(Check("flux warning", False, str(warning)))
    return found


def _instance(info: Dict[str, Any], target: str) -> str:
    version = info.get("broker_version")
    source = info.get("uri_source", "")
    if version:
        return f"{target} ({source}): broker {version}"
    return f"{target} ({source}): broker not reachable"
