"""Following recorded jobs: ``status``, ``wait``, ``logs``, ``cancel``."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Sequence

from ..model import JobState
from .exits import EXIT_JOB_NOT_COMPLETED, EXIT_OK
from .output import Progress, announce, print_json, status_line
from .targets import adapter_for_ids

if TYPE_CHECKING:
    from ..schedulers.base import SchedulerAdapter


def wait_and_report(
    adapter: SchedulerAdapter, job_ids: Sequence[str], args: argparse.Namespace
) -> int:
    """Wait for the jobs to end; exit 0 only when every one COMPLETED."""
    many = len(job_ids) > 1
    progress = Progress() if many and sys.stderr.isatty() else None
    try:
        final = adapter.wait_all(
            list(job_ids),
            poll_interval=args.poll_interval,
            timeout=args.timeout,
            # With many jobs on a terminal, one progress line beats a line per change.
            on_change=None if progress else announce,
            on_poll=progress,
        )
    finally:
        if progress is not None:
            progress.finish()
    if getattr(args, "json", False):
        statuses = [final[job_id].to_json() for job_id in job_ids]
        print_json(statuses[0] if len(statuses) == 1 else statuses)
    ok = all(status.state is JobState.COMPLETED for status in final.values())
    return EXIT_OK if ok else EXIT_JOB_NOT_COMPLETED


def cmd_status(args: argparse.Namespace) -> int:
    adapter, job_ids = adapter_for_ids(args, args.job_ids)
    statuses = adapter.get_job_statuses(job_ids)
    ordered = [statuses[adapter.normalize_job_id(job_id)] for job_id in job_ids]
    if args.json:
        payload = [status.to_json() for status in ordered]
        print_json(payload[0] if len(payload) == 1 else payload)
    else:
        for status in ordered:
            print(status_line(status))
    return EXIT_OK


def cmd_wait(args: argparse.Namespace) -> int:
    adapter, job_ids = adapter_for_ids(args, args.job_ids)
    return wait_and_report(adapter, [adapter.normalize_job_id(j) for j in job_ids], args)


def cmd_logs(args: argparse.Namespace) -> int:
    adapter, (job_id,) = adapter_for_ids(args, [args.job_id])
    if not args.follow:
        sys.stdout.write(adapter.get_job_logs(job_id))
        return EXIT_OK
    shown = 0
    while True:
        status = adapter.get_job_status(job_id)
        text = adapter.get_job_logs(job_id)
        if len(text) > shown:
            sys.stdout.write(text[shown:])
            sys.stdout.flush()
            shown = len(text)
        if status.is_terminal:
            text = adapter.get_job_logs(job_id)  # what was written at the very end
            sys.stdout.write(text[shown:])
            return EXIT_OK
        time.sleep(1.0)


def cmd_cancel(args: argparse.Namespace) -> int:
    adapter, job_ids = adapter_for_ids(args, args.job_ids)
    adapter.cancel_jobs(job_ids)
    for job_id in args.job_ids:
        print(f"{job_id} cancel requested")
    return EXIT_OK
