"""Start times (the ``begin`` key): sbatch's and Flux's relative forms, times of day, days
and dates, read at a given moment in local time, and Slurm's ``--begin`` form."""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from ..errors import ResourceError
from . import FSD_UNITS


def validate_begin(value: Any) -> float:
    """Whole epoch seconds of ``value``: a ``datetime`` (naive: local time) or text in one
    of ``BEGIN_FORMS`` (``parse_begin``), read now."""
    if isinstance(value, datetime):
        return float(math.ceil(value.timestamp()))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ResourceError(
            "begin",
            f"a bare number ({value!r}) is ambiguous; give 'now+{value}' (seconds), "
            f"'+{value}m' or '2026-12-05T10:00'",
        )
    if not isinstance(value, str):
        raise ResourceError("begin", f"expected text or a datetime, got {value!r}")
    try:
        return float(math.ceil(parse_begin(value, datetime.now())))
    except BeginError as exc:
        raise ResourceError("begin", str(exc)) from None


class BeginError(ValueError):
    """A start time (``begin``) in no form ``parse_begin`` reads."""


#: what ``begin`` takes, as an error names it
BEGIN_FORMS = (
    "now+N[seconds|minutes|hours|days|weeks] (sbatch: seconds when no unit is given), "
    "+N[s|m|h|d] (flux: seconds when no unit), HH:MM[:SS] (the next one: tomorrow once "
    "past), midnight, noon, today or tomorrow (each with a time if you like: "
    "'tomorrow 08:30'), YYYY-MM-DD[THH:MM[:SS]]; in this machine's local time "
    "(sbatch's teatime, AM/PM and MMDDYY are not taken)"
)

# sbatch's units after now+ (its whole words), and Flux Standard Duration's letters
_BEGIN_UNITS = {
    "": 1,
    "second": 1,
    "seconds": 1,
    "minute": 60,
    "minutes": 60,
    "hour": 3600,
    "hours": 3600,
    "day": 86400,
    "days": 86400,
    "week": 604800,
    "weeks": 604800,
    **FSD_UNITS,
}
_BEGIN_NOW = re.compile(r"now(?:\s*\+\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[a-z]*))?", re.ASCII)
_BEGIN_FSD = re.compile(r"\+\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|m|h|d|)", re.ASCII)
_BEGIN_CLOCK = r"(?:(?P<h>\d{1,2}):(?P<m>\d{2})(?::(?P<s>\d{2}))?|(?P<word>midnight|noon))"
# a day, then perhaps a time of day; or a time of day, then perhaps a day
_BEGIN_DAY_FIRST = re.compile(rf"(?P<day>today|tomorrow)(?:(?:t|\s+){_BEGIN_CLOCK})?", re.ASCII)
_BEGIN_TIME_FIRST = re.compile(rf"{_BEGIN_CLOCK}(?:\s+(?P<day>today|tomorrow))?", re.ASCII)
_BEGIN_DATE = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})(?:(?:t|\s+)(?P<h>\d{2}):(?P<m>\d{2})"
    r"(?::(?P<s>\d{2}))?(?P<zone>z|(?P<sign>[+-])(?P<zh>\d{2}):?(?P<zm>\d{2}))?)?",
    re.ASCII,
)


def parse_begin(text: str, now: datetime) -> float:
    """Epoch seconds of a start time in one of ``BEGIN_FORMS`` (case and spaces aside),
    read at ``now`` (naive: local time); raises ``BeginError`` naming the forms."""
    spoken = " ".join(text.split()).lower()
    try:
        moment = _begin_moment(spoken, now)
        if moment is not None and moment >= 0:
            datetime.fromtimestamp(moment)  # within what a date can say
            return moment
    except (ValueError, OverflowError, OSError):
        pass
    raise BeginError(f"cannot read {text!r} as a start time; give one of: {BEGIN_FORMS}")


def _begin_moment(text: str, now: datetime) -> Optional[float]:
    """The epoch of ``text`` (lower case, single spaces), or ``None``."""
    relative = _BEGIN_NOW.fullmatch(text) or _BEGIN_FSD.fullmatch(text)
    if relative:
        if relative.group("n") is None:  # now
            return now.timestamp()
        unit = relative.group("unit")
        if unit not in _BEGIN_UNITS:
            return None
        return now.timestamp() + float(relative.group("n")) * _BEGIN_UNITS[unit]
    dated = _BEGIN_DATE.fullmatch(text)
    if dated:
        number = {
            key: int(value or 0)
            for key, value in dated.groupdict().items()
            if key not in ("zone", "sign")
        }
        zone = None
        if dated.group("zone"):  # an offset of its own: not local time
            sign = -1 if dated.group("sign") == "-" else 1
            zone = timezone(sign * timedelta(hours=number["zh"], minutes=number["zm"]))
        moment = datetime(
            number["y"],
            number["mo"],
            number["d"],
            number["h"],
            number["m"],
            number["s"],
            tzinfo=zone,
        )
        return moment.timestamp()
    timed = _BEGIN_DAY_FIRST.fullmatch(text) or _BEGIN_TIME_FIRST.fullmatch(text)
    if not timed:
        return None
    parts = timed.groupdict()
    day = parts["day"]
    word = parts["word"]
    if parts["h"] is not None:
        clock = (int(parts["h"]), int(parts["m"]), int(parts["s"] or 0))
    elif word:
        clock = (12, 0, 0) if word == "noon" else (0, 0, 0)
    else:
        clock = (0, 0, 0)  # a day alone: its midnight
    if day:
        date = now.date() + timedelta(days=1 if day == "tomorrow" else 0)
    elif clock[:2] > (now.hour, now.minute):
        date = now.date()
    else:  # sbatch: a time of day not later than this minute is tomorrow's
        date = now.date() + timedelta(days=1)
    return datetime(date.year, date.month, date.day, *clock).timestamp()


def format_begin(epoch: float) -> str:
    """A start time as Slurm's ``--begin`` takes it: local ``YYYY-MM-DDTHH:MM:SS``."""
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%dT%H:%M:%S")
