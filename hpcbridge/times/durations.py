"""Wall times: Slurm ``--time`` forms, Flux FSD, ``timedelta``; float seconds, ``math.inf``
unlimited; a bare number is refused (minutes to Slurm, seconds to the Flux API)."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Union

DurationLike = Union[str, timedelta]

UNLIMITED = math.inf

_UNLIMITED_WORDS = {"unlimited", "infinite", "inf", "infinity"}

# Flux Standard Duration, a unit required: "90" is read the Slurm way (minutes).
# An exponent as strtod reads it (Flux's FSD does): 1e-06s, as_request writes tiny times so.
_FSD = re.compile(r"^(?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)(?P<unit>ms|s|m|h|d)$")
FSD_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}

# Slurm --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.
_SLURM_DAYS = re.compile(r"^(?P<days>\d+)-(?P<rest>\d+(?::\d+){0,2})$")
_SLURM_PLAIN = re.compile(r"^\d+(?::\d+){0,2}$")


class DurationError(ValueError):
    """A duration string or value cannot be understood."""


def parse_duration(value: object) -> float:
    """Seconds for ``value``; ``math.inf`` for UNLIMITED.

    >>> parse_duration("2:00:00"), parse_duration("1-0"), parse_duration("90s")
    (7200.0, 86400.0, 90.0)
    """
    if isinstance(value, (bool, int, float)):
        raise DurationError(
            f"a bare number ({value!r}) is ambiguous: Slurm reads it as minutes, the Flux "
            "API as seconds; write '30' or '0:30:00' (minutes, Slurm style) or '1800s'"
        )
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
        if seconds <= 0:
            raise DurationError(f"duration must be positive, got {value!r}")
        return seconds
    if not isinstance(value, str):
        raise DurationError(f"expected a string or timedelta, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise DurationError("empty duration")
    if text.lower() in _UNLIMITED_WORDS:
        return UNLIMITED
    seconds = _parse_fsd(text) if _FSD.match(text) else _parse_slurm(text)
    if seconds <= 0:
        raise DurationError(f"duration must be positive, got {value!r}")
    return seconds


def _parse_fsd(text: str) -> float:
    match = _FSD.match(text)
    assert match is not None
    seconds = float(match.group("number")) * FSD_UNITS[match.group("unit")]
    if seconds > _LONGEST:
        raise DurationError(f"{text!r} is too long; write UNLIMITED for no limit")
    return seconds


def _parse_slurm(text: str) -> float:
    days_match = _SLURM_DAYS.match(text)
    if not days_match and not _SLURM_PLAIN.match(text):
        raise DurationError(
            f"cannot read {text!r} as a duration; use a Slurm form (M, M:S, H:M:S, D-H, D-H:M, "
            "D-H:M:S, UNLIMITED) or a number with a unit (90s, 15m, 1.5h, 2d)"
        )
    days = int(days_match.group("days")) if days_match else 0
    parts = [int(p) for p in (days_match.group("rest") if days_match else text).split(":")]
    if days_match:  # D-H, D-H:M, D-H:M:S
        hours, minutes, seconds = (parts + [0, 0])[:3]
        _check_below(hours, 24, "hours", text)
    else:  # M, M:S (minutes unbounded), H:M:S
        hours, minutes, seconds = parts if len(parts) == 3 else [0, *parts, 0][:3]
    if days_match or len(parts) == 3:
        _check_below(minutes, 60, "minutes", text)
    _check_below(seconds, 60, "seconds", text)
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total > _LONGEST:  # float() of a far longer one overflows
        raise DurationError(f"{text!r} is too long; write UNLIMITED for no limit")
    return float(total)


#: the longest duration read (31 million years): no scheduler takes more
_LONGEST = 10**15


def _check_below(number: int, limit: int, what: str, text: str) -> None:
    if number >= limit:
        raise DurationError(f"{what} must be below {limit} in {text!r}")


def format_slurm_time(seconds: float) -> str:
    """Slurm ``--time`` text: ``H:MM:SS`` or ``D-HH:MM:SS``; whole seconds, rounded up."""
    if math.isinf(seconds):
        return "UNLIMITED"
    total = int(math.ceil(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours}:{minutes:02d}:{secs:02d}"


def format_fsd(seconds: float) -> str:
    """Flux Standard Duration with an explicit unit, e.g. ``7200s``."""
    if math.isinf(seconds):
        return "inf"
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"
