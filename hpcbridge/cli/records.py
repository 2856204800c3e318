"""The recorded jobs as they are now: ``jobs`` and ``cost``.  Each place's scheduler is
asked once for its unfinished jobs (not with ``--cached``); one that cannot be reached
leaves its jobs' recorded states, marked stale with why."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..config import Settings
from ..cost import (
    Charge,
    CostReport,
    JobCost,
    by_account,
    charge_of,
    key_of,
    no_price_note,
    parse_day_or_time,
    report,
    total,
    with_charge,
    within,
)
from ..errors import JobNotFoundError, SchedulerAdapterError
from ..model import RELEASED, JobState, JobStatus
from ..store.leases import feeder_alive
from ..store.packs import ENDED, OUTSIDE_PACKS, SENT, PackBook, PackRecord, PackTask
from . import sweeps
from .exits import EXIT_OK
from .output import format_seconds, one_line, print_json, print_table
from .parser import TABLE_JOBS
from .targets import Place, adapter_at, place_of, store_for

if TYPE_CHECKING:
    from ..store.jobs import JobRecord, JobStore

#: the reason shown for an unfinished job with ``--cached``
NOT_ASKED = "not asked (--cached)"


@dataclass(frozen=True)
class Listed:
    """A record as the command shows it: live, or its last recorded state and why."""

    record: JobRecord
    stale_reason: Optional[str] = None

    @property
    def stale(self) -> bool:
        return self.stale_reason is not None


def cached(records: Sequence[JobRecord]) -> List[Listed]:
    """The records as stored; the unfinished ones marked as not asked."""
    return [
        Listed(record, None if record.status().is_terminal else NOT_ASKED) for record in records
    ]


def refreshed(records: Sequence[JobRecord], settings: Settings) -> List[Listed]:
    """The records with every unfinished job's live state (one query per place)."""
    places: Dict[Place, List[int]] = {}
    for index, record in enumerate(records):
        if not record.status().is_terminal:
            places.setdefault(place_of(record), []).append(index)
    listed = [Listed(record) for record in records]
    for place, indexes in places.items():
        answers, failure = ask_place(place, [records[i].job_id for i in indexes], settings)
        for index in indexes:
            listed[index] = _listed(records[index], answers.get(records[index].job_id), failure)
    return listed


def _listed(record: JobRecord, status: Optional[JobStatus], failure: Optional[str]) -> Listed:
    if status is None or status.state is JobState.UNKNOWN:
        why = failure or (status.reason if status is not None else "") or "no answer"
        return Listed(record, why)
    return Listed(with_status(record, status))


def with_status(record: JobRecord, status: JobStatus) -> JobRecord:
    """The record with the live state (times kept where the scheduler gave none)."""
    return dataclasses.replace(
        record,
        state=status.state.value,
        native_state=status.native_state or record.native_state,
        reason=status.reason,
        exit_code=status.exit_code if status.exit_code is not None else record.exit_code,
        start_time=status.start_time or record.start_time,
        end_time=status.end_time or record.end_time,
    )


def ask_place(
    place: Place, job_ids: List[str], settings: Settings
) -> Tuple[Mapping[str, JobStatus], Optional[str]]:
    """One batched query for the jobs at ``place``: ``(answers, None)``, or
    ``({}, why)`` when its scheduler cannot be reached from here."""
    try:
        adapter = adapter_at(place, settings)
    except (SchedulerAdapterError, ValueError, OSError) as exc:
        return {}, f"{place.scheduler} on {place.host}: {one_line(exc)}"
    try:
        return adapter.get_job_statuses(job_ids), None
    except (SchedulerAdapterError, OSError) as exc:
        return {}, f"{place.scheduler} on {place.host}: {one_line(exc)}"
    finally:
        adapter.close()


def listed_jobs(
    settings: Settings,
    cached_only: bool,
    state: Optional[str] = None,
    limit: Optional[int] = None,
    where: str = "",
) -> List[Listed]:
    """The recorded jobs (``state``: only those in it now; ``limit``: the newest N;
    ``where``: a condition of the store's, e.g. no sweep's)."""
    store = store_for(settings)
    if cached_only:
        return cached(store.list(state=state, limit=limit, where=where))
    if state is None:
        return refreshed(store.list(limit=limit, where=where), settings)
    # Only an unfinished job, or one already in it, can be in ``state`` now.
    candidates = [
        record
        for record in store.list(where=where)
        if record.state == state or not record.status().is_terminal
    ]
    shown = [item for item in refreshed(candidates, settings) if item.record.state == state]
    return shown[-limit:] if limit else shown


def _stale_json(item: Listed) -> Dict[str, Any]:
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
        **_stale_json(item),
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
    listed = listed_jobs(settings, args.cached, state=args.state, limit=limit, where=where)
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


def _figures(cpu_hours: float, gpu_hours: float, cost: float) -> Tuple[str, str, str]:
    return f"{cpu_hours:.4f}", f"{gpu_hours:.4f}", f"{cost:.4f}"


def _rounded(figures: Dict[str, float]) -> Dict[str, float]:
    return {key: round(value, 6) for key, value in figures.items()}


def _cost_json(counted: CostReport, listed: Sequence[Listed], settings: Settings) -> Dict[str, Any]:
    def entries(rows: Sequence[JobCost], sources: Sequence[int]) -> List[Dict[str, Any]]:
        return [{**row.to_json(), **_stale_json(listed[i])} for row, i in zip(rows, sources)]

    return {
        "jobs": entries(counted.rows, counted.sources),
        "total": _rounded(total(counted.rows)),
        "by_account": {
            account: _rounded(figures) for account, figures in by_account(counted.rows).items()
        },
        "mock_jobs": entries(counted.mock, counted.mock_sources),
        "mock_total": _rounded(total(counted.mock)),
        "prices": {
            "cpu_per_hour": settings.cpu_cost_per_hour,
            "gpu_per_hour": settings.gpu_cost_per_hour,
        },
    }


COST_HEADER = ("JOB ID", "SCHEDULER", "ACCOUNT", "STATE", "BASIS", "CPU-H", "GPU-H", "COST")


def _cost_table(
    counted: CostReport, listed: Sequence[Listed], notes: Notes
) -> List[Tuple[str, ...]]:
    """The real jobs (a pack's tasks indented under their allocation), each account's
    subtotal when there are several, TOTAL; then the mock jobs and their own line."""
    table: List[Tuple[str, ...]] = [COST_HEADER]

    def add(row: JobCost, state: str, indent: str = "") -> None:
        figures = _figures(row.cpu_hours, row.gpu_hours, row.cost)
        account = row.account or "-"
        table.append((indent + row.job_id, row.scheduler, account, state, row.basis, *figures))

    for row, index in zip(counted.rows, counted.sources):
        add(row, notes.cell(listed[index]))
        for task in row.tasks:  # a breakdown of the allocation's own figures
            add(task, task.state, indent="  ")
    accounts = by_account(counted.rows)
    if len(accounts) > 1:  # charged to more than one account (bank): each its subtotal
        for account, figures in sorted(accounts.items()):
            table.append(("SUBTOTAL", "", account or "-", "", "", *_figures(**figures)))
    table.append(("TOTAL", "", "", "", "", *_figures(**total(counted.rows))))
    if counted.mock:
        for row, index in zip(counted.mock, counted.mock_sources):
            add(row, notes.cell(listed[index]))
        table.append(("MOCK", "", "", "", "not charged", *_figures(**total(counted.mock))))
    return table


def cmd_cost(args: argparse.Namespace) -> int:
    """Each job once, from what its scheduler charged (read once an ended job is asked
    about, then kept in its record), filtered, priced; mock jobs apart."""
    settings = Settings.from_env()
    since = parse_day_or_time(args.since) if args.since else None
    until = parse_day_or_time(args.until, end=True) if args.until else None
    store = store_for(settings)
    pack_book = PackBook(store)
    inside = pack_book.task_allocations()
    records = _named(args.sweep, store, pack_book) if args.sweep else store.list()
    kept = {
        key_of(record)
        for record in records
        if key_of(record) not in inside
        and (not args.scheduler or record.scheduler == args.scheduler)
        and within(record, since, until)
    }
    # a pack's task goes with its allocation: shown under it, or not at all
    records = [r for r in records if key_of(r) in kept or inside.get(key_of(r)) in kept]
    listed = cached(records) if args.cached else refreshed(records, settings)
    if not args.cached:
        listed = _charged(listed, settings, store, inside)
    prices = (settings.cpu_cost_per_hour, settings.gpu_cost_per_hour)
    counted = report([item.record for item in listed], *prices, inside)
    if args.json:
        print_json(_cost_json(counted, listed, settings))
    else:
        notes = Notes()
        notes.print_under(_cost_table(counted, listed, notes))
    note = no_price_note(*prices)
    if note:  # apart from the table and the JSON: a pipe reads them alone
        print(f"hpcbridge: {note}", file=sys.stderr)
    return EXIT_OK


def _named(name: str, store: JobStore, pack_book: PackBook) -> List[JobRecord]:
    """The records of the sweep or pack ``name``: a pack's allocations and its tasks."""
    pack = pack_book.get(name)
    if pack is not None:
        allocations = [held.job_id for held in pack_book.allocations(name)]
        task_ids = [task.job_id for task in pack_book.tasks(name) if task.job_id]
        held = store.get_many(pack.scheduler, pack.host, allocations)
        tasks = store.get_many("flux", pack.host, task_ids)
        return [*held.values(), *tasks.values()]
    from ..store.sweeps import SweepBook

    book = SweepBook(store)
    if book.get(name) is None:
        raise JobNotFoundError(
            f"no sweep or pack named {name!r} is recorded in {store.path} "
            "(hpcbridge jobs lists them)"
        )
    return book.records(name)


#: job ids per question of what they were charged (one sacct or flux jobs command line)
CHARGES_PER_QUESTION = 500


def _charged(
    listed: Sequence[Listed], settings: Settings, store: JobStore, inside: Mapping[Any, Any]
) -> List[Listed]:
    """The jobs with what their scheduler charged, where not read yet: one question per
    place for the jobs that ran or ended (one cancelled before it ran: charged 0; a
    pack's tasks are not asked: their allocation was charged); an ended job's charge is
    kept in its record.  A place that cannot say
    leaves its jobs estimated, said on stderr."""
    places: Dict[Place, List[int]] = {}
    for index, item in enumerate(listed):
        record = item.record
        if (
            record.scheduler != "mock"
            and key_of(record) not in inside
            and charge_of(record) is None
            and (record.start_time is not None or record.status().is_terminal)
        ):
            places.setdefault(place_of(record), []).append(index)
    result = list(listed)
    for place, indexes in places.items():
        ids = [listed[i].record.job_id for i in indexes]
        charges: Dict[str, Charge] = {}
        try:
            adapter = adapter_at(place, settings)
            try:
                for start in range(0, len(ids), CHARGES_PER_QUESTION):
                    charges.update(adapter.charges(ids[start : start + CHARGES_PER_QUESTION]))
            finally:
                adapter.close()
        except (SchedulerAdapterError, ValueError, OSError) as exc:
            print(
                f"hpcbridge: what {len(ids)} job(s) on {place.describe()} were charged is not "
                f"known now ({one_line(exc)}): their figures are estimates (basis requested)",
                file=sys.stderr,
            )
            continue
        ended = {}
        for index in indexes:
            record = listed[index].record
            charge = charges.get(record.job_id)
            if charge is None:
                continue
            result[index] = dataclasses.replace(listed[index], record=with_charge(record, charge))
            if charge.final and record.status().is_terminal:
                ended[record.job_id] = charge.as_row()
        store.record_charges(place.scheduler, place.host, ended)
    return result
