"""What the job store holds: ``jobs`` and ``cost``."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Dict, List, Sequence, Tuple

from ..config import Settings
from .exits import EXIT_OK
from .output import format_seconds, print_json, print_table
from .targets import store_for

if TYPE_CHECKING:
    from ..cost import JobCost
    from ..store import JobRecord


def _job_json(record: JobRecord) -> Dict[str, Any]:
    return {
        **record.status().to_json(),
        "scheduler": record.scheduler,
        "host": record.host,
        "job_name": record.job_name,
        "remote_dir": record.remote_dir,
        "submit_time": record.submit_time.isoformat() if record.submit_time else None,
    }


def _job_row(record: JobRecord) -> Tuple[str, ...]:
    elapsed = ""
    if record.start_time:
        end = record.end_time or datetime.now(timezone.utc)
        elapsed = format_seconds((end - record.start_time).total_seconds())
    submitted = ""
    if record.submit_time:
        submitted = record.submit_time.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    return (
        record.job_id,
        record.scheduler,
        (record.job_name or "")[:24],
        record.state,
        "" if record.exit_code is None else str(record.exit_code),
        submitted,
        elapsed,
    )


def cmd_jobs(args: argparse.Namespace) -> int:
    records = store_for(Settings.from_env()).list(state=args.state, limit=args.limit)
    if args.json:
        print_json([_job_json(record) for record in records])
        return EXIT_OK
    header = ("JOB ID", "SCHEDULER", "NAME", "STATE", "EXIT", "SUBMITTED", "ELAPSED")
    print_table([header, *map(_job_row, records)])
    return EXIT_OK


def _cost_json(rows: Sequence[JobCost], settings: Settings) -> Dict[str, Any]:
    return {
        "jobs": [row.to_json() for row in rows],
        "total": {
            "cpu_hours": round(sum(row.cpu_hours for row in rows), 6),
            "gpu_hours": round(sum(row.gpu_hours for row in rows), 6),
            "cost": round(sum(row.cost for row in rows), 6),
        },
        "prices": {
            "cpu_per_hour": settings.cpu_cost_per_hour,
            "gpu_per_hour": settings.gpu_cost_per_hour,
        },
    }


def _cost_table(rows: Sequence[JobCost]) -> List[Tuple[str, ...]]:
    table: List[Tuple[str, ...]] = [("JOB ID", "SCHEDULER", "STATE", "CPU-H", "GPU-H", "COST")]
    for row in rows:
        table.append(
            (
                row.job_id,
                row.scheduler,
                row.state,
                f"{row.cpu_hours:.4f}",
                f"{row.gpu_hours:.4f}",
                f"{row.cost:.4f}",
            )
        )
    totals = [sum(row.cpu_hours for row in rows), sum(row.gpu_hours for row in rows)]
    total_cost = sum(row.cost for row in rows)
    table.append(("TOTAL", "", "", f"{totals[0]:.4f}", f"{totals[1]:.4f}", f"{total_cost:.4f}"))
    return table


def cmd_cost(args: argparse.Namespace) -> int:
    from ..cost import costs

    settings = Settings.from_env()
    rows = costs(store_for(settings).list(), settings.cpu_cost_per_hour, settings.gpu_cost_per_hour)
    if args.json:
        print_json(_cost_json(rows, settings))
    else:
        print_table(_cost_table(rows))
    return EXIT_OK
