"""What the recorded jobs were charged: ``cost`` (each job once, priced, filtered; mock
jobs apart), as a table or JSON."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List, Sequence, Tuple

from ..engine.cost import (
    CostReport,
    JobCost,
    by_account,
    key_of,
    no_price_note,
    parse_day_or_time,
    report,
    total,
    within,
)
from ..errors import JobNotFoundError
from ..routing.refreshing import Listed, cached, charged, refreshed
from ..settings.config import Settings
from ..store.jobs import JobRecord, JobStore
from ..store.packs import PackBook
from .exits import EXIT_OK
from .output import notice, print_json
from .records import Notes, stale_json
from .settings import store_for


def _figures(cpu_hours: float, gpu_hours: float, cost: float) -> Tuple[str, str, str]:
    return f"{cpu_hours:.4f}", f"{gpu_hours:.4f}", f"{cost:.4f}"


def _rounded(figures: Dict[str, float]) -> Dict[str, float]:
    return {key: round(value, 6) for key, value in figures.items()}


def _cost_json(counted: CostReport, listed: Sequence[Listed], settings: Settings) -> Dict[str, Any]:
    def entries(rows: Sequence[JobCost], sources: Sequence[int]) -> List[Dict[str, Any]]:
        return [{**row.to_json(), **stale_json(listed[i])} for row, i in zip(rows, sources)]

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
        listed = charged(listed, settings, store, inside, notify=notice)
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
