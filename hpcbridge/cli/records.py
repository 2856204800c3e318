"""The recorded jobs as they are now: ``jobs`` (a sweep's or named pack's as one line of
counts, or one by one) and ``status NAME``.  Each place's scheduler is asked once for its
unfinished jobs (not with ``--cached``: ``routing/refreshing.py``)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import JobNotFoundError
from ..model import RELEASED
from ..routing.refreshing import NOT_ASKED, Listed, cached, listed_jobs, refreshed
from ..settings.config import Settings
from ..store.leases import feeder_alive
from ..store.packs import ENDED, OUTSIDE_PACKS, SENT, PackBook, PackRecord, PackTask
from . import sweeps
from .exits import EXIT_OK
from .output import format_seconds, print_json, print_table
from .parser import TABLE_JOBS
from .settings import store_for


def stale_json(item: Listed) -> Dict[str, Any]:
    return {"stale": item.stale, "stale_reason": item.stale_reason}


class Notes:
    """Why states are cached, numbered once per reason and printed under the table: a long
    reason would otherwise widen the STATE column of every row."""

    def __init__(self) -> None:
        self.numbers: Dict[str, int] = {}

    def cell(self, item: Listed) -> str:
        if not item.stale:  # a pack's allocation released once its work was done: said
            released = item.record.native_state == RELEASED
            return f"{item.record.state} (released)" if released else item.record.state
        if item.stale_reason == NOT_ASKED:
            return f"{item.record.state} (cached)"
        number = self.numbers.setdefault(item.stale_reason or "", len(self.numbers) + 1)
        return f"{item.record.state} (cached [{number}])"

    def print_under(self, table: Sequence[Sequence[str]]) -> None:
        """The table, then the reasons its cells name."""
        print_table(table)
        for why, number in self.numbers.items():
            print(f"[{number}] cached: {why}")


def _job_json(item: Listed) -> Dict[str, Any]:
    record = item.record
    return {
        **record.status().to_json(),
        "scheduler": record.scheduler,
        "kind": record.kind,
        "host": record.host,
        "job_name": record.job_name,
        "remote_dir": record.remote_dir,
        "submit_time": record.submit_time.isoformat() if record.submit_time else None,
        **stale_json(item),
    }


def _job_row(item: Listed, notes: Notes) -> Tuple[str, ...]:
    record = item.record
    elapsed = ""
    if record.start_time:
        end = record.end_time or datetime.now(timezone.utc)
        elapsed = format_seconds((end - record.start_time).total_seconds())
    submitted = ""
    if record.submit_time:
        submitted = record.submit_time.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    return (
        record.job_id,
        f"{record.scheduler} ({record.kind})" if record.kind else record.scheduler,
        (record.job_name or "")[:24],
        notes.cell(item),
        "" if record.exit_code is None else str(record.exit_code),
        submitted,
        elapsed,
    )


def cmd_jobs(args: argparse.Namespace) -> int:
    """The jobs outside sweeps and named packs, and each of those as one line of counts;
    with a sweep's name, that sweep's jobs one by one."""
    settings = Settings.from_env()
    if args.sweep:
        return _sweep_jobs(args, settings)
    book = sweeps.book_for(settings)
    pack_book = PackBook(book.store)
    shown = [record for record in map(book.get, book.names()) if record is not None]
    packs = [record for record in map(pack_book.get, pack_book.names()) if record is not None]
    if not args.cached:  # the sweeps' unfinished jobs asked too: their counts are live
        for record in shown:
            refreshed(book.records(record.name, unfinished_only=True), settings)
    from ..store.sweeps import OUTSIDE_SWEEPS

    outside = [OUTSIDE_SWEEPS] if shown else []
    outside += [OUTSIDE_PACKS] if packs else []
    where = " AND ".join(outside)
    limit = args.limit or (None if args.json or args.all else TABLE_JOBS)
    listed = listed_jobs(book.store, settings, args.cached, args.state, limit, where)
    if not args.cached:  # an interrupted pack's jobs whose allocation is gone: settled
        for pack in packs:
            if pack_book.state(pack.name) == "interrupted":
                _settle_pack(pack, settings)
    named: List[Tuple[str, Any, Dict[str, int], Optional[str]]] = [
        *(("sweep", record, book.counts(record), None) for record in shown),
        *(
            ("pack", record, pack_book.counts(record.name), pack_book.state(record.name))
            for record in packs
        ),
    ]
    if args.state:
        named = [item for item in named if args.state in item[2]]
    if args.json:
        return _print_jobs(args, listed, [sweeps.summary(*item) for item in named], [])
    rows = [sweeps.row(*item) for item in named]
    _print_jobs(args, listed, [], rows)
    if limit and not args.limit and len(listed) == limit:
        recorded = book.store.count(state=args.state, where=where)
        if recorded > limit:  # said apart from the table: a pipe reads the table alone
            print(
                f"hpcbridge: the newest {limit} of {recorded} jobs; --limit N or --all for "
                "more, --json for every one",
                file=sys.stderr,
            )
    return EXIT_OK


def _sweep_jobs(args: argparse.Namespace, settings: Settings) -> int:
    """``jobs NAME``: a sweep's jobs, or a named pack's tasks, one by one."""
    book = sweeps.book_for(settings)
    pack = PackBook(book.store).get(args.sweep)
    if pack is not None:
        return _pack_jobs(args, settings, pack)
    if book.get(args.sweep) is None:
        raise JobNotFoundError(
            f"no sweep or pack named {args.sweep!r} is recorded in {book.store.path} "
            "(hpcbridge jobs lists them)"
        )
    records = book.records(args.sweep)
    listed = cached(records) if args.cached else refreshed(records, settings)
    if args.state:
        listed = [item for item in listed if item.record.state == args.state]
    if args.limit:
        listed = listed[-args.limit :]
    return _print_jobs(args, listed, [], [])


def _settle_pack(pack: PackRecord, settings: Settings) -> None:
    """The jobs a named pack sent whose allocation is gone, settled (``settle_orphans``)."""
    store = store_for(settings)
    tasks = PackBook(store).tasks(pack.name)
    ids = [str(task.job_id) for task in tasks if task.state == SENT and task.job_id]
    records = store.get_many("flux", pack.host, ids)
    sweeps.settle_orphans(settings, list(records.values()))


def pack_tasks(
    pack: PackRecord, settings: Settings, cached_only: bool
) -> List[Tuple[PackTask, Optional[Listed]]]:
    """A named pack's tasks in order, each with its job as it is now (``None``: never
    sent, or not yet); jobs whose allocation is gone are settled first, never asked."""
    book = PackBook(store_for(settings))
    tasks = book.tasks(pack.name)
    jobs = {task.index: _job_of(task) for task in tasks}
    ids = [job_id for job_id in jobs.values() if job_id]
    records = book.store.get_many("flux", pack.host, ids)
    if not cached_only and sweeps.settle_orphans(settings, list(records.values())):
        records = book.store.get_many("flux", pack.host, ids)
    ordered = [records[job_id] for job_id in ids if job_id in records]
    listed = cached(ordered) if cached_only else refreshed(ordered, settings)
    by_id = {item.record.job_id: item for item in listed}
    return [(task, by_id.get(jobs[task.index] or "")) for task in tasks]


def _job_of(task: PackTask) -> Optional[str]:
    """The id of a pack task's job now: in an allocation, or the one it ended as (a
    task waiting, or stopped unsent, has none - an id it keeps is of a job lost)."""
    if task.state == SENT:
        return task.job_id
    if task.state == ENDED and task.final is not None:
        return task.final.job_id or None
    return None


def _pack_jobs(args: argparse.Namespace, settings: Settings, pack: PackRecord) -> int:
    """A named pack's tasks one by one: each sent one as its job, the others as a task
    that was never sent (or not yet: ``waiting``)."""
    shown: List[Tuple[str, Dict[str, Any], Optional[Listed], Tuple[str, ...]]] = []
    for task, item in pack_tasks(pack, settings, args.cached):
        if item is not None:
            shown.append((item.record.state, {**_job_json(item), "task": task.index}, item, ()))
            continue
        final = task.final if task.state == ENDED else None
        state = final.state.value if final is not None else "waiting"
        label = sweeps.NEVER_SENT if final is not None else "(not sent yet)"
        entry = {
            "job_id": None,
            "task": task.index,
            "state": state,
            "reason": final.reason if final is not None else None,
            "never_sent": final is not None,
            "scheduler": "flux",
            "job_name": os.path.basename(task.script),
        }
        row = (label, "flux", os.path.basename(task.script)[:24], state, "", "", "")
        shown.append((state, entry, None, row))
    if args.state:
        shown = [item for item in shown if item[0] == args.state]
    if args.limit:
        shown = shown[-args.limit :]
    if args.json:
        print_json([entry for _, entry, _, _ in shown])
        return EXIT_OK
    header = ("JOB ID", "SCHEDULER", "NAME", "STATE", "EXIT", "SUBMITTED", "ELAPSED")
    notes = Notes()
    table = [header] + [_job_row(item, notes) if item else row for _, _, item, row in shown]
    notes.print_under(table)
    return EXIT_OK


def named_status(record: Any, settings: Settings) -> Tuple[str, Dict[str, object]]:
    """A sweep's or named pack's state and counts now (its unfinished jobs asked
    first, one query per place): the line ``status NAME`` prints, and its JSON."""
    if isinstance(record, PackRecord):
        pack_tasks(record, settings, cached_only=False)
        book = PackBook(store_for(settings))
        counts, state = book.counts(record.name), book.state(record.name)
        return sweeps.line("pack", record, counts, state), sweeps.summary(
            "pack", record, counts, state
        )
    sweep_book = sweeps.book_for(settings)
    refreshed(sweep_book.records(record.name, unfinished_only=True), settings)
    fresh = sweep_book.get(record.name) or record
    counts = sweep_book.counts(fresh)
    state = fresh.state
    if state == "feeding" and not feeder_alive(fresh.feeder, fresh.beat, time.time()):
        state = "interrupted"  # its feeder died with tasks unsent: wait NAME goes on
    return sweeps.line("sweep", fresh, counts, state), sweeps.summary("sweep", fresh, counts)


def _print_jobs(
    args: argparse.Namespace,
    listed: Sequence[Listed],
    entries: List[Dict[str, Any]],
    rows: Sequence[Tuple[str, ...]],
) -> int:
    """The jobs after the sweeps' and packs' ``entries`` (``--json``) or ``rows``."""
    if args.json:
        print_json(entries + [_job_json(item) for item in listed])
        return EXIT_OK
    header = ("JOB ID", "SCHEDULER", "NAME", "STATE", "EXIT", "SUBMITTED", "ELAPSED")
    notes = Notes()
    notes.print_under([header, *rows, *(_job_row(item, notes) for item in listed)])
    return EXIT_OK
