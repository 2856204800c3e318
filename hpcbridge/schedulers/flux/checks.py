"""What ``hpcbridge doctor`` says of Flux, from what an adapter found (``doctor.adapter_info``):
the checks, and the next step where the bindings or the commands do not fit the broker.  Pure.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from ...settings.config import Settings
from ...settings.doctor import Check
from .instance import Association, parse_flux_version_output
from .request import JobChoice

#: releases that must match the broker's, and what they are called
SAME_RELEASE = (
    ("bindings_version", "the Python bindings"),
    ("commands_version", "the flux commands"),
)


def missing_check(flux: str, where: str, settings: Settings) -> Check:
    detail = f"{flux} not found{where} (set HPCBRIDGE_FLUX_COMMAND to its path)"
    if settings.scheduler != "flux":
        detail += "; flux is not the selected scheduler"
    return Check("flux", False, detail, "flux")


def checks_from(info: Dict[str, Any]) -> List[Check]:
    if not info.get("driver"):
        return [Check("flux driver", False, str(info.get("error", "unusable")), "flux")]
    found = [
        Check("flux driver", True, f"{info['driver']} ({info.get('driver_reason', '')})"),
        Check("flux driver can", True, str(info.get("capabilities", ""))),
        Check("flux instance", bool(info.get("broker_version")), _instance(info), "flux"),
        Check(
            "flux adapter version",
            info.get("adapter_version") is not None,
            f"{info.get('adapter_version')} ({info.get('adapter_version_reason', '')})",
        ),
    ]
    if info.get("bindings_version"):
        found.append(Check("flux bindings", True, str(info["bindings_version"])))
    elif info.get("bindings_error"):
        error = str(info["bindings_error"])
        advice = bindings_advice(error, info.get("broker_version"))
        found.append(Check("flux bindings", False, f"{error}; fix: {advice}" if advice else error))
    queues = info.get("queues")
    if queues is not None:
        names = queues.get("names") or []
        text = "anonymous queue only" if not names else ", ".join(names)
        if queues.get("default"):
            text += f" (default {queues['default']})"
        found.append(Check("flux queues", True, text))
    banks = info.get("banks")
    found.append(Check("flux accounting", True, _banks(banks) if banks is not None else "none"))
    if info.get("time_left") is not None:
        found.append(Check("flux time left", True, f"{info['time_left']:.0f} s (enclosing job)"))
    for warning in info.get("warnings", []):
        found.append(Check("flux warning", False, str(warning)))
    return found


def _banks(banks: List[Dict[str, Any]]) -> str:
    if not banks:
        return "active, and you are in no bank: every job will be refused"

    def one(row: Dict[str, Any]) -> str:
        limits = [
            f"{name}={row[name]}" for name in ("max_active_jobs", "max_running_jobs") if row[name]
        ]
        mark = " (default)" if row["default"] else ""
        return row["bank"] + mark + (f" [{', '.join(limits)}]" if limits else "")

    return "your banks: " + "; ".join(one(row) for row in banks)


def _instance(info: Dict[str, Any]) -> str:
    target = info.get("uri") or "the system instance"
    version = info.get("broker_version")
    source = info.get("uri_source", "")
    if version:
        return f"{target} ({source}): broker {version}"
    return f"{target} ({source}): broker not reachable"


#: modules the bindings import, and the PyPI package that provides each
_PACKAGE_OF = {
    "_cffi_backend": "cffi",
    "cffi": "cffi",
    "ply": "ply",
    "yaml": "pyyaml",
    "jsonschema": "jsonschema",
}


#: the modules ``import flux, flux.job`` loads (0.88 adds ply), all named in one run
_IMPORTED_BY_BINDINGS = ("_cffi_backend", "yaml", "ply")


_MISSING = re.compile(r"No module named '([\w.]+)'")


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def flux_python_line(broker_version: Optional[str]) -> str:
    if broker_version:
        return f"pip install flux-python=={broker_version}"
    return "pip install flux-python==<the broker's version, from 'flux version'>"


def bindings_advice(
    error: str, broker_version: Optional[str], importable: Callable[[str], bool] = _importable
) -> str:
    """The next step for bindings that failed to import with ``error``."""
    missing = _MISSING.findall(error)
    # The last name is the deepest ("...'flux'; with <dir>: ...'ply'": found beside flux).
    name = missing[-1] if missing else ""
    top = name.split(".")[0]
    if top in _PACKAGE_OF:
        also = [_PACKAGE_OF[m] for m in _IMPORTED_BY_BINDINGS if m != top and not importable(m)]
        packages = list(dict.fromkeys([_PACKAGE_OF[top], *also]))
        return (
            f"pip install {' '.join(packages)} (the bindings installed beside flux need "
            f"{'them' if len(packages) > 1 else 'it'}; or {flux_python_line(broker_version)})"
        )
    if top in ("flux", "_flux"):
        return flux_python_line(broker_version)
    if "libflux" in error or "cannot open shared object" in error:
        return (
            f"{flux_python_line(broker_version)}, or add flux-core's lib directory to "
            "LD_LIBRARY_PATH"
        )
    if "CLI driver was asked for" in error or "transport is" in error:
        return ""  # not a failure: the CLI is the way here
    return f"{flux_python_line(broker_version)} into this Python"


def release_advice(label: str, other: str, broker: str) -> str:
    fix = (
        flux_python_line(broker)
        if label == "the Python bindings"
        else (f"set HPCBRIDGE_FLUX_COMMAND to the flux of release {broker}")
    )
    return (
        f"{label} are {other} but the broker is {broker}: mixed releases fail with "
        f"'Protocol error' or 'invalid payload', or hang; {fix}"
    )


@dataclass(frozen=True)
class Asked:
    """What doctor asked the instance beside the session's own facts."""

    commands_version: Optional[str]
    #: why ``flux version`` failed, else ""
    version_error: str
    time_left: Optional[float]
    associations: Optional[List[Association]]


def session_report(session: Any, asked: Asked) -> Dict[str, Any]:
    """What a ``session.FluxSession`` uses and why, with what was ``asked``, as plain data."""
    facts = session.facts
    info: Dict[str, Any] = {
        "driver": session.driver.name,
        "driver_reason": session.choice.reason,
        "capabilities": session.driver.capabilities.summary(),
        "uri": facts.uri,
        "adapter_version": facts.policy.name,
        "adapter_version_reason": facts.policy_reason,
        "broker_version": facts.broker_version,
        "queues": None,
        "warnings": [asked.version_error] if asked.version_error else [],
    }
    if session.bindings.module is not None:
        info["bindings_version"] = session.bindings.version
    elif session.bindings.error:
        info["bindings_error"] = session.bindings.error
    if not asked.version_error:
        info["commands_version"] = asked.commands_version
    for key, label in SAME_RELEASE:
        other, broker = info.get(key), facts.broker_version
        if broker and other and other != broker:
            info["warnings"].append(release_advice(label, str(other), broker))
    if facts.queues is not None:
        names, default, source = facts.queues.names, facts.queues.default, facts.queues.source
        info["queues"] = {"names": list(names), "default": default, "source": source}
    info["time_left"] = asked.time_left
    if asked.associations is not None:
        info["banks"] = [
            {
                "bank": association.bank,
                "default": association.bank == association.default_bank,
                "max_active_jobs": association.max_active_jobs,
                "max_running_jobs": association.max_running_jobs,
            }
            for association in asked.associations
        ]
    return info


def verdicts(
    info: Dict[str, Any],
    version_output: Optional[str],
    missing: Optional[Check],
    where: str,
    kind: JobChoice,
) -> List[Check]:
    """Doctor's Flux checks from what the adapter found (``info``) and ``flux version``'s
    output (``None``: no flux command, ``missing`` says so)."""
    if missing is not None and info.get("driver") != "native":
        return [missing]
    if missing is None:
        versions = parse_flux_version_output(version_output or "")
        commands = Check("flux commands", True, f"{where}: {versions.get('commands', '?')}")
    else:  # the bindings work without it: worth knowing, not in the way
        commands = Check("flux commands", False, f"{missing.detail}; the bindings are used")
        info["warnings"] = [w for w in info["warnings"] if not w.startswith("flux version")]
    kind_check = Check("flux job kind", True, f"{kind.kind.value} jobs by default: {kind.reason}")
    return [commands, kind_check, *checks_from(info)]
