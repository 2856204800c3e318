"""The rules of a request's counts, memory sizes, flags and generic resources: each value
checked, and written the way Slurm takes it."""

from __future__ import annotations

import re
from typing import Any, Optional

from ..errors import ResourceError

# Slurm's --mem: an integer with an optional unit K, M (default), G or T.
_MEM = re.compile(r"^(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?)(?:I?B)?$", re.IGNORECASE)
_MEM_STEP = {"K": 1, "M": 1024, "G": 1024**2, "T": 1024**3}  # in KiB


def validate_count(key: str, value: Any, minimum: int) -> int:
    number: Optional[int] = None
    if isinstance(value, int) and not isinstance(value, bool):
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


def validate_mem(value: Any, key: str = "mem") -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ResourceError(key, f"expected e.g. '4G' or '500M', got {value!r}")
    match = _MEM.match(str(value).strip())
    if not match:
        raise ResourceError(key, f"malformed memory {value!r}; expected e.g. '4G', '500M', '1T'")
    unit = (match.group("unit") or "M").upper()
    number = float(match.group("number"))
    if number <= 0:
        raise ResourceError(key, f"must be positive, got {value!r}")
    if number.is_integer():
        return f"{int(number)}{unit}"
    # Slurm takes whole numbers only: 1.5G is written as 1536M.
    kib = int(number * _MEM_STEP[unit])
    if kib < 1:  # 0 would be Slurm's "all the node's memory"
        raise ResourceError(key, f"{value!r} is below 1K, the least Slurm takes: give 1K or more")
    for smaller in ("T", "G", "M", "K"):
        if kib % _MEM_STEP[smaller] == 0:
            return f"{kib // _MEM_STEP[smaller]}{smaller}"
    return f"{kib}K"  # pragma: no cover - K divides everything


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def validate_flag(key: str, value: Any) -> bool:
    """``True``/``False``, or the words a setting gives (``yes``, ``0``...)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, (str, int)) else None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ResourceError(key, f"expected true or false (yes/no, 1/0), got {value!r}")


# Slurm's --gres: name[:type][:count], comma-separated (gpu:a100:2,shard:1).
_GRES = re.compile(r"^[A-Za-z][\w.-]*(?::[\w.-]+){0,2}(?:,[A-Za-z][\w.-]*(?::[\w.-]+){0,2})*$")


def validate_gres(value: Any) -> str:
    if not isinstance(value, str) or not _GRES.match(value.strip()):
        raise ResourceError(
            "gres",
            f"expected name[:type][:count], comma-separated (e.g. 'gpu:a100:2'), got {value!r}",
        )
    return value.strip()
