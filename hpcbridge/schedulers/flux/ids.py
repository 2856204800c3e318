"""Flux job ids: parse every encoding Flux prints, store one canonical form.

A Flux job id is a 64-bit integer that Flux shows in several encodings:

- F58 (the default display): ``ƒCFKYzj``.  Flux prints the UTF-8 ``ƒ``
  (U+0192) in a UTF-8 locale and an ASCII ``f`` otherwise - e.g. over SSH,
  where the remote shell often runs with ``LANG`` unset - so both prefixes
  are accepted;
- decimal (``{id.dec}``, and ``"id"`` in ``flux jobs --json``): ``7381975040``;
- hex (``{id.hex}``): ``0x1af000000``;
- dothex (``{id.dothex}``): ``0000.0001.af00.0000``, and the KVS form
  ``job.0000.0001.af00.0000`` (``{id.kvs}``).

(The mnemonic ``{id.words}`` form needs Flux's word list and is not accepted.)

**Canonical form: F58 with the UTF-8 ``ƒ``**, exactly as ``flux submit``,
``flux jobs`` and the job shell's ``{{id}}`` output template print it in a
UTF-8 locale (the job shell writes ``flux-ƒ….out`` even when the submitting
client ran in the C locale).  Users copy ids from those places, and the log
file name of a job contains this very string.  Records are keyed by it, so a
caller may hand in any encoding and still find the job.  To *commands* ids
are passed in decimal: plain ASCII, understood by every release and locale.
"""

from __future__ import annotations

import re
from typing import Any, List, Sequence

F58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
F58_PREFIX = "\u0192"  # ƒ
_ASCII_PREFIX = "f"
_F58_VALUE = {char: index for index, char in enumerate(F58_ALPHABET)}
_MAX_ID = 2**64 - 1

_DOTHEX = re.compile(
    r"^(?:job\.)?([0-9a-fA-F]{4})\.([0-9a-fA-F]{4})\.([0-9a-fA-F]{4})\.([0-9a-fA-F]{4})$"
)


class InvalidJobIdError(ValueError):
    """The text is not a Flux job id in any accepted encoding."""


def encode_f58(value: int, prefix: str = F58_PREFIX) -> str:
    """F58 text of an integer id, e.g. ``7381975040`` -> ``ƒCFKYzj``."""
    if not 0 <= value <= _MAX_ID:
        raise InvalidJobIdError(f"job id {value} is out of range")
    if value == 0:
        return prefix + F58_ALPHABET[0]
    digits = []
    while value:
        value, remainder = divmod(value, 58)
        digits.append(F58_ALPHABET[remainder])
    return prefix + "".join(reversed(digits))


def decode_f58(text: str) -> int:
    """Integer of an F58 id with or without its ``ƒ``/``f`` prefix."""
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
    """The integer behind any accepted encoding (or an ``int``/``JobID``).

    Raises :class:`InvalidJobIdError` for anything else.
    """
    if isinstance(job_id, bool):
        raise InvalidJobIdError(f"{job_id!r} is not a Flux job id")
    if isinstance(job_id, int):  # also flux.job.JobID, an int subclass
        if not 0 <= int(job_id) <= _MAX_ID:
            raise InvalidJobIdError(f"job id {job_id} is out of range")
        return int(job_id)
    text = str(job_id).strip()
    if not text:
        raise InvalidJobIdError("empty job id")
    if text.isdigit():
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
    """``JobID`` objects where the bindings have them (0.49+), else ints.

    0.49's ``JobList`` reports an unknown id as ``JobID {id.orig} unknown``
    and raises ``AttributeError: 'int' object has no attribute 'orig'``
    when it was given a plain int.
    """
    numbers = [parse_job_id(job_id) for job_id in job_ids]
    if hasattr(flux_module.job, "JobID"):
        return [flux_module.job.JobID(number) for number in numbers]
    return numbers
