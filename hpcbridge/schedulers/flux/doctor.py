"""``hpcbridge doctor`` for Flux: commands, driver and why, versions, queues, time left -
and, where the bindings cannot be used, the command that fixes it."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ...errors import SchedulerAdapterError
from ...settings.config import Settings
from ...settings.doctor import Check
from ...transports.base import Executor
from ...transports.local import LocalExecutor
from .checks import Asked, missing_check, session_report, verdicts
from .commands import version_argv
from .instance import FluxOptions, UriSetting
from .planning import choose_kind
from .session import FluxSession, open_session
from .uri import choose_uri_setting


def checks(settings: Settings, executor: Optional[Executor]) -> List[Check]:
    """What ``submit`` would use for Flux from here (the bindings even without a ``flux``)."""
    if executor is None:
        executor = LocalExecutor(settings.command_timeout, env=settings.command_env)
    where = "" if executor.is_local else f" on {executor.host}"
    flux = settings.flux_command
    try:
        result = executor.run(version_argv(flux), timeout=30)
    except SchedulerAdapterError as exc:
        return [Check("flux", False, f"cannot run {flux}{where}: {exc}", "flux")]
    missing = missing_check(flux, where, settings) if not result.ok else None
    if missing is not None and not executor.is_local:
        return [missing]  # over SSH the commands are the only way
    options = FluxOptions(
        flux_command=flux,
        requested_driver=settings.flux_driver,
        adapter_version=settings.flux_adapter_version or "",
        command_timeout=settings.command_timeout,
    )
    setting = choose_uri_setting(settings, executor.is_local, None)
    info = adapter_info(
        lambda: open_session(setting, executor, options),
        transport=executor.kind,
        flux_command=flux,
        uri_setting=setting,
    )
    kind = choose_kind(None, settings, setting)
    return verdicts(info, None if missing else result.stdout, missing, f"{flux}{where}", kind)


def adapter_info(
    session: Callable[[], FluxSession],
    *,
    transport: str,
    flux_command: str,
    uri_setting: UriSetting,
) -> Dict[str, Any]:
    """What an adapter uses and why, as plain data; never raises."""
    info: Dict[str, Any] = {
        "scheduler": "flux",
        "transport": transport,
        "flux_command": flux_command,
        "uri_setting": uri_setting.value,
        "uri_source": uri_setting.source,
        "warnings": [],
    }
    try:
        built = session()
    except Exception as exc:  # noqa: BLE001 - doctor reports, it does not fail
        info.update(driver=None, error=str(exc))
        return info
    info.update(session_info(built))
    return info


def session_info(session: FluxSession) -> Dict[str, Any]:
    """What the session found, with what doctor asks the instance beside it."""
    try:
        commands_version, error = session.commands.versions().get("commands"), ""
    except Exception as exc:  # noqa: BLE001
        commands_version, error = None, f"flux version failed: {exc}"
    time_left, banks = session.driver.time_left(), session.commands.associations()
    return session_report(session, Asked(commands_version, error, time_left, banks))
