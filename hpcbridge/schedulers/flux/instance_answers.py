"""What ``flux`` commands answer about the instance, read: its release, the user's banks and
their limits, its R (cores, expiration), a target's URI, what the jobs were charged, and
whether a broker answers at all.  Pure, tested against output recorded from real releases.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Dict, List, Optional, Tuple

from ...engine.driver import Reply
from ...model import Charge
from .answers import NEVER_REACHED, scheduler_message
from .ids import InvalidJobIdError, canonical_job_id
from .instance import NO_LIMIT, Association

log = logging.getLogger("hpcbridge")


def parse_charges(stdout: str) -> Dict[str, Charge]:
    """Each job's cores (its R: what it held, ``--exclusive``'s whole nodes included) x its
    run time, from ``charges_argv``'s answer; by canonical id (GPUs not told: ``None``).  A
    job that never ran has a run time of 0; a line that does not parse is left out."""
    charges: Dict[str, Charge] = {}
    for line in stdout.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 3:
            continue
        try:
            job_id = canonical_job_id(fields[0])
            cores, runtime = float(fields[1]), max(float(fields[2]), 0.0)
        except (ValueError, InvalidJobIdError):
            continue
        charges[job_id] = Charge(cores * runtime, None)
    return charges


def parse_account_user(stdout: str) -> List[Association]:
    """``flux account view-user``: JSON in 0.60 (a list of rows), a table of 16-wide
    columns in 0.23 (whose headers may run into each other: ``max_running_jobsmax_...``)."""
    text = stdout.strip()
    if text.startswith("["):
        rows = [dict(row) for row in json.loads(text)]
    else:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2:
            raise ValueError(f"no rows in {text[:200]!r}")

        def cells(line: str) -> List[str]:
            return [line[at : at + 16].strip() for at in range(0, len(line), 16)]

        names = cells(lines[0])
        rows = [dict(zip(names, cells(line))) for line in lines[1:]]
    return [
        Association(
            str(row["bank"]),
            str(row.get("default_bank") or row["bank"]),
            _limit(row.get("max_active_jobs")),
            _limit(row.get("max_running_jobs")),
        )
        for row in rows
        if str(row.get("active", "1")) != "0"
    ]


def _limit(value: Any) -> Optional[int]:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None  # "unlimited", missing
    return None if number <= 0 or number >= NO_LIMIT else number


def parse_expiration(resource_r: str) -> Optional[float]:
    """``execution.expiration`` of an R document; ``None`` when unlimited (0)."""
    data = json.loads(resource_r)
    try:
        expiration = float(((data or {}).get("execution") or {}).get("expiration") or 0.0)
    except (AttributeError, TypeError) as exc:  # JSON of another shape
        raise ValueError(f"not an R document: {exc}") from None
    return expiration if expiration > 0 else None


def parse_cores(resource_r: str) -> int:
    """How many cores an R document holds: each ``execution.R_lite`` entry's ranks times
    its cores (``{"rank": "0-1", "children": {"core": "0-7"}}`` is 16)."""
    data = json.loads(resource_r)
    try:
        entries = ((data or {}).get("execution") or {}).get("R_lite") or []
        return sum(
            _idset_size(str(entry.get("rank", "")))
            * _idset_size(str((entry.get("children") or {}).get("core", "")))
            for entry in entries
        )
    except (AttributeError, TypeError) as exc:  # JSON of another shape
        raise ValueError(f"not an R document: {exc}") from None


def parse_capacity(listed: str) -> Tuple[int, int]:
    """The cores of the ranks up (free or allocated) and of all of them, from ``flux resource
    list`` (``resource_list_argv``): a rank whose broker is gone (or drained, excluded) is
    ``down``, while the instance's R (``parse_cores``) still holds it."""
    up = total = 0
    for line in listed.splitlines():
        state, _, cores = line.strip().partition(" ")
        if not state:
            continue
        if not cores.strip().isdigit():
            raise ValueError(f"not a state and a core count: {line!r}")
        total += int(cores)
        up += int(cores) if state in ("free", "allocated") else 0
    return up, total


def _idset_size(text: str) -> int:
    size = 0
    for part in filter(None, text.strip("[]").split(",")):
        low, _, high = part.partition("-")
        size += int(high or low) - int(low) + 1
    return size


def parse_uri_output(stdout: str) -> Optional[str]:
    lines = stdout.strip().splitlines()
    return lines[-1].strip() if lines and lines[-1].strip() else None


# `flux getattr` with no broker says "flux_open: <errno text>"; submit and the
# bindings say "Unable to connect to Flux"
NO_BROKER = (*NEVER_REACHED, "flux_open:")


def no_broker(message: str) -> bool:
    return any(marker in message for marker in NO_BROKER)


def no_system_instance(why: str) -> str:
    return (
        f"no Flux instance to submit to: no URI was given and the system instance does not "
        f"answer ({scheduler_message(why)}); inside a Flux allocation FLUX_URI is set for "
        "you, from elsewhere set HPCBRIDGE_FLUX_URI (or --flux-uri) to the instance: its "
        "URI, a Flux job id, or slurm:<id> / lsf:<id> of the allocation that runs it"
    )


def with_broker(found: Dict[str, str], attr: Reply) -> Dict[str, str]:
    """``flux version``'s fields with the broker's release from ``flux getattr version``
    (``broker_error``: why it did not say)."""
    if attr.ok and attr.stdout.strip():
        return {**found, "broker": attr.stdout.strip()}
    return {**found, "broker_error": attr.message()}


def associations(result: Reply) -> Optional[List[Association]]:
    """``flux account view-user``'s rows; ``None`` without accounting (or unreadable)."""
    if not result.ok:
        log.debug("flux: no accounting here: %s", result.message())
        return None
    try:
        return parse_account_user(result.stdout)
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("flux account view-user said what cannot be read: %s", exc)
        return None


def active_cap(associations: Optional[List[Association]], bank: Optional[str]) -> Optional[int]:
    """flux-accounting's ``max_active_jobs`` for ``bank`` (``None``: the default bank)."""
    for association in associations or ():
        if association.bank == (bank or association.default_bank):
            return association.max_active_jobs
    return None


# A target still starting (URI not published, a Slurm job pending or its `flux start` not up)
# is waited for; "not running" / "not found" are final.
URI_NOT_YET = ("URI not found", "doesn't seem to have a FLUX_URI", "empty nodelist")


def uri_not_yet(result: Reply) -> bool:
    """``flux uri --remote``'s answer for a target still starting: ask again."""
    published = result.ok and parse_uri_output(result.stdout)
    return not published and any(marker in result.message() for marker in URI_NOT_YET)


def first_slurm_node(hostlist: str) -> Optional[str]:
    """The first host of a Slurm hostlist (``node[003-005,7],gpu1`` -> ``node003``), or
    ``None`` for an empty one (a pending job's)."""
    words = hostlist.split()
    # the first item: up to the first comma outside brackets (no "]" before the next "[")
    first = re.split(r",(?![^[]*\])", words[0])[0] if words else ""
    # each bracket keeps the first number of its first range, zeros as written
    host = re.sub(r"\[([^],\-]*)[^]]*\]", r"\1", first)
    return host or None


def resolved_uri(result: Reply, target: str) -> str:
    """The URI ``flux uri --remote TARGET`` printed; ``LookupError`` where it did not."""
    uri = parse_uri_output(result.stdout) if result.ok else None
    if not uri:
        raise LookupError(f"flux uri --remote {target}: {result.message()}")
    return uri
