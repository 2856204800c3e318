"""The scheduler-neutral resource request and its validation.

One dict with the keys below (Slurm's and Flux's common ground, plus ``mem``
and ``partition`` that only Slurm schedules); every scheduler translates it
in its own command builders.  Validation happens here,
before anything is staged or submitted.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any, Dict, Mapping, Optional

from .durations import DurationError, parse_duration
from .errors import ResourceError

RESOURCE_KEYS = (
    "partition",
    "qos",
    "account",
    "constraint",
    "time",
    "nodes",
    "ntasks",
    "cpus_per_task",
    "mem",
    "gpus",
    "job_name",
    "output",
)

_POSITIVE_COUNTS = ("nodes", "ntasks", "cpus_per_task")
_TEXT_KEYS = ("partition", "qos", "account", "constraint", "job_name", "output")

# Slurm's --mem: an integer with an optional unit K, M (default), G or T.
_MEM = re.compile(r"^(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?)(?:I?B)?$", re.IGNORECASE)
_MEM_STEP = {"K": 1, "M": 1024, "G": 1024**2, "T": 1024**3}  # in KiB


@dataclass(frozen=True)
class Resources:
    """A validated resource request; ``None`` means "not asked for"."""

    partition: Optional[str] = None
    qos: Optional[str] = None
    account: Optional[str] = None
    constraint: Optional[str] = None
    time: Optional[float] = None  # seconds; math.inf = unlimited
    nodes: Optional[int] = None
    ntasks: Optional[int] = None
    cpus_per_task: Optional[int] = None
    mem: Optional[str] = None  # normalised Slurm form, e.g. "4G"
    gpus: Optional[int] = None
    job_name: Optional[str] = None
    output: Optional[str] = None

    @classmethod
    def from_mapping(
        cls,
        requested: Optional[Mapping[str, Any]] = None,
        defaults: Optional[Mapping[str, Any]] = None,
        origins: Optional[Mapping[str, str]] = None,
    ) -> Resources:
        """Validate ``requested`` over ``defaults`` (settings); raise :class:`ResourceError`.

        ``origins``: the variable each default came from, named by the error of a
        default that does not validate (``HPCBRIDGE_TIME``)."""
        if isinstance(requested, Resources):
            requested = requested.to_dict()
        merged: Dict[str, Any] = {}
        from_defaults = set()
        for source in (defaults or {}, requested or {}):
            for key, value in source.items():
                _check_known(key)
                if value is not None and value != "":
                    merged[key] = value
                    if source is defaults:
                        from_defaults.add(key)
                    else:
                        from_defaults.discard(key)
        validated = {}
        for key, value in merged.items():
            try:
                validated[key] = _validate(key, value)
            except ResourceError as exc:
                origin = (origins or {}).get(key) if key in from_defaults else None
                raise exc.with_origin(f"{origin}={value!r}") if origin else exc from None
        return cls(**validated)

    def to_dict(self) -> Dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}

    def as_request(self) -> Dict[str, Any]:
        """The keys asked for, in a form ``from_mapping`` takes back unchanged (the time
        as text: ``120.0s``, ``UNLIMITED``) - what a sweep stores of a step."""
        request = self.to_dict()
        if self.time is not None:
            request["time"] = "UNLIMITED" if math.isinf(self.time) else f"{self.time!r}s"
        return request

    @property
    def slots(self) -> int:
        """How many task slots the request amounts to (at least one per node)."""
        return max(self.ntasks or 1, self.nodes or 1)


# Names other tools use for our keys, for a better "did you mean".
_OTHER_NAMES = {
    "cpus": "cpus_per_task",
    "cores": "cpus_per_task",
    "walltime": "time",
    "time_limit": "time",
    "duration": "time",
    "memory": "mem",
    "name": "job_name",
    "queue": "qos",
    "bank": "account",
    "requires": "constraint",
    "tasks": "ntasks",
    "procs": "ntasks",
    "num_nodes": "nodes",
}


def _check_known(key: str) -> None:
    if key in RESOURCE_KEYS:
        return
    spelled = key.replace("-", "_").lower()
    close = [_OTHER_NAMES[spelled]] if spelled in _OTHER_NAMES else []
    close = close or difflib.get_close_matches(spelled, RESOURCE_KEYS, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ResourceError(key, f"unknown resource key{hint} (known: {', '.join(RESOURCE_KEYS)})")


def _validate(key: str, value: Any) -> Any:
    if key == "time":
        return _validate_time(value)
    if key in _POSITIVE_COUNTS:
        return _validate_count(key, value, minimum=1)
    if key == "gpus":
        return _validate_count(key, value, minimum=0)
    if key == "mem":
        return _validate_mem(value)
    assert key in _TEXT_KEYS
    if not isinstance(value, str):
        raise ResourceError(key, f"expected text, got {type(value).__name__} {value!r}")
    if not value.strip():
        raise ResourceError(key, "must not be blank")
    if "\x00" in value:
        raise ResourceError(key, "must not contain a NUL byte")
    return value


def _validate_time(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ResourceError(
            "time",
            f"a bare number ({value!r}) is ambiguous (minutes to Slurm, seconds to the Flux "
            "API); give a string such as '30' (minutes), '2:00:00' or '90s', or a timedelta",
        )
    if not isinstance(value, (str, timedelta)):
        raise ResourceError("time", f"expected a string or timedelta, got {value!r}")
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise ResourceError("time", str(exc)) from None


def _validate_count(key: str, value: Any, minimum: int) -> int:
    number: Optional[int] = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif (
        isinstance(value, float)
        and value.is_integer()
        or isinstance(value, str)
        and re.fullmatch(r"\s*[+-]?\d+\s*", value)
    ):
        number = int(value)
    if number is None:
        raise ResourceError(key, f"expected a whole number, got {value!r}")
    if number < minimum:
        bound = "positive" if minimum == 1 else "zero or more"
        raise ResourceError(key, f"must be {bound}, got {number}")
    return number


def _validate_mem(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ResourceError("mem", f"expected e.g. '4G' or '500M', got {value!r}")
    match = _MEM.match(str(value).strip())
    if not match:
        raise ResourceError("mem", f"malformed memory {value!r}; expected e.g. '4G', '500M', '1T'")
    unit = (match.group("unit") or "M").upper()
    number = float(match.group("number"))
    if number <= 0:
        raise ResourceError("mem", f"must be positive, got {value!r}")
    if number.is_integer():
        return f"{int(number)}{unit}"
    # Slurm takes whole numbers only: 1.5G is written as 1536M.
    kib = int(number * _MEM_STEP[unit])
    for smaller in ("T", "G", "M", "K"):
        if kib % _MEM_STEP[smaller] == 0:
            return f"{kib // _MEM_STEP[smaller]}{smaller}"
    return f"{kib}K"  # pragma: no cover - K divides everything
