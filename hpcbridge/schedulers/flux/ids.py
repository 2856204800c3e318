"""A Flux job id in every encoding: stored as F58 with ``ƒ``, passed to commands in decimal
(any locale), read from F58 (``ƒ`` or ``f``), decimal, 0x-hex, dothex or an int.  Pure.
"""

from __future__ import annotations

import re
from typing import Any, List, Sequence

from .jobspec import F58_ALPHABET, F58_PREFIX, f58

_ASCII_PREFIX = "f"
_F58_VALUE = {char: index for index, char in enumerate(F58_ALPHABET)}
_MAX_ID = 2**64 - 1

_DOTHEX = re.compile(
    r"^(?:job\.)?([0-9a-fA-F]{4})\.([0-9a-fA-F]{4})\.([0-9a-fA-F]{4})\.([0-9a-fA-F]{4})$"
)


class InvalidJobIdError(ValueError):
    """The text is not a Flux job id in any accepted encoding."""


def encode_f58(value: int, prefix: str = F58_PREFIX) -> str:
    if not 0 <= value <= _MAX_ID:
        raise InvalidJobIdError(f"job id {value} is out of range")
    return f58(value, prefix)


def decode_f58(text: str) -> int:
    body = text
    if body.startswith(F58_PREFIX) or body.startswith(_ASCII_PREFIX):
        body = body[1:]
    if not body:
        raise InvalidJobIdError(f"{text!r} is not an F58 job id")
    value = 0
    for char in body:
        digit = _F58_VALUE.get(char)
        if digit is None:
            raise InvalidJobIdError(f"{text!r} is not an F58 job id (bad character {char!r})")
        value = value * 58 + digit
    if value > _MAX_ID:
        raise InvalidJobIdError(f"{text!r} is out of range for a Flux job id")
    return value


def parse_job_id(job_id: Any) -> int:
    """The integer behind F58 (``ƒ`` or ``f``), decimal, 0x-hex, dothex, an int or a JobID."""
    if isinstance(job_id, bool):
        raise InvalidJobIdError(f"{job_id!r} is not a Flux job id")
    if isinstance(job_id, int):  # also flux.job.JobID, an int subclass
        if not 0 <= int(job_id) <= _MAX_ID:
            raise InvalidJobIdError(f"job id {job_id} is out of range")
        return int(job_id)
    text = str(job_id).strip()
    if not text:
        raise InvalidJobIdError("empty job id")
    if text.isascii() and text.isdigit():  # "²" is a digit to isdigit, not to int
        value = int(text)
        if value > _MAX_ID:
            raise InvalidJobIdError(f"job id {text} is out of range")
        return value
    if text[:2].lower() == "0x":
        try:
            value = int(text[2:], 16)
        except ValueError:
            raise InvalidJobIdError(f"{text!r} is not a hex job id") from None
        if value > _MAX_ID:
            raise InvalidJobIdError(f"job id {text} is out of range")
        return value
    dothex = _DOTHEX.match(text)
    if dothex:
        return int("".join(dothex.groups()), 16)
    if text[0] in (F58_PREFIX, _ASCII_PREFIX):
        return decode_f58(text)
    raise InvalidJobIdError(
        f"{text!r} is not a Flux job id (expected F58 like \u0192CFKYzj or fCFKYzj, "
        "a decimal number, 0x-hex or dothex)"
    )


def canonical_job_id(job_id: Any) -> str:
    """The stored form of any accepted encoding: F58 with ``ƒ``."""
    return encode_f58(parse_job_id(job_id))


def decimal_job_id(job_id: Any) -> str:
    """The form passed to ``flux`` commands: decimal digits."""
    return str(parse_job_id(job_id))


def is_job_id(text: Any) -> bool:
    try:
        parse_job_id(text)
    except InvalidJobIdError:
        return False
    return True


def bindings_job_ids(flux_module: Any, job_ids: Sequence[str]) -> List[Any]:
    """``JobID`` objects where the bindings have them, else ints."""
    # 0.49's JobList raises AttributeError ('int' has no 'orig') on an unknown plain int.
    numbers = [parse_job_id(job_id) for job_id in job_ids]
    if hasattr(flux_module.job, "JobID"):
        return [flux_module.job.JobID(number) for number in numbers]
    return numbers
