"""Packs on the command line: each task's end once a pack is done, and a named pack's
name where ``wait`` and ``cancel`` take ids - fed on from the store when its first
client died, or stopped with its allocations released.

A pack is reached where it was recorded (its outer scheduler, transport and host), like
a sweep; anything that names no recorded pack is left to the sweeps and the job ids.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING, Dict, List, Sequence, Tuple

from ..config import Settings
from ..model import JobState, JobStatus
from .exits import EXIT_JOB_NOT_COMPLETED, EXIT_OK
from .output import print_json
from .places import Place, adapter_at
from .targets import settings_from, store_for

if TYPE_CHECKING:
    from ..store.packs import PackRecord


def report(finals: Sequence[JobStatus], as_json: bool) -> int:
    """Each task's end (its Flux id and state, or JSON), in the tasks' order; the exit
    code: 0 when every task COMPLETED."""
    if as_json:
        print_json([status.to_json() for status in finals])
    else:
        for status in finals:
            print(f"{status.job_id} {status.state.value}", flush=True)
    ended_well = all(status.state is JobState.COMPLETED for status in finals)
    return EXIT_OK if ended_well else EXIT_JOB_NOT_COMPLETED


def split(arguments: Sequence[str], settings: Settings) -> Tuple[List[PackRecord], List[str]]:
    """The recorded packs named among ``arguments``, and the other arguments."""
    from ..engine.sweeping import NAME
    from ..store.packs import PackBook

    book = PackBook(store_for(settings))
    found: List[PackRecord] = []
    others: List[str] = []
    for argument in arguments:
        record = book.get(argument.strip()) if NAME.fullmatch(argument.strip()) else None
        if record is not None:
            found.append(record)
        else:
            others.append(argument)
    return found, others


def wait(record: PackRecord, args: argparse.Namespace) -> int:
    """Go on with the pack (``allocations.resume_packed``) and report each task's end."""
    from ..pack_feeder import resume_packed

    place = Place(record.scheduler, record.host, record.flux_uri, record.transport, record.reach)
    outer = adapter_at(place, settings_from(args))
    try:
        finals = resume_packed(
            outer, record.name, poll_interval=args.poll_interval, timeout=args.timeout
        )
    finally:
        outer.close()
    return report(finals, args.json)


def cancel(record: PackRecord, settings: Settings) -> str:
    """Stop the pack and release its allocations (``allocations.cancel_packed``)."""
    from ..pack_feeder import cancel_packed

    place = Place(record.scheduler, record.host, record.flux_uri, record.transport, record.reach)
    outer = adapter_at(place, settings)
    try:
        return cancel_packed(outer, record.name)
    finally:
        outer.close()


def row(record: PackRecord, counts: Dict[str, int]) -> Tuple[str, ...]:
    """A named pack as one line of ``jobs``: its tasks' counts in place of a state."""
    shown = ", ".join(f"{count} {state}" for state, count in sorted(counts.items()))
    created = datetime.fromisoformat(record.created).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    what = f"pack of {record.total} ({record.spec})"
    return (record.name, record.scheduler, what, shown, "", created, "")


def summary(record: PackRecord, counts: Dict[str, int]) -> Dict[str, object]:
    """A named pack as one entry of ``jobs --json``."""
    return {
        "pack": record.name,
        "scheduler": record.scheduler,
        "host": record.host,
        "spec": record.spec,
        "total": record.total,
        "created": record.created,
        "counts": counts,
    }
