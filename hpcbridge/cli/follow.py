"""Following recorded jobs: ``status``, ``wait``, ``logs``, ``cancel``."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any, Dict, Sequence

from ..model import JobState, JobStatus
from ..store import JobRecord
from .exits import EXIT_JOB_NOT_COMPLETED, EXIT_OK
from .lookup import not_found_error, require_traced, untraced
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
    target = adapter_for_ids(args, args.job_ids)
    statuses = target.adapter.get_job_statuses(target.job_ids)
    missing = untraced(target, statuses)
    shown = [statuses[job_id] for job_id in target.job_ids if job_id not in missing]
    if args.json and shown:
        payload = [with_kind(status.to_json(), target.records) for status in shown]
        print_json(payload[0] if len(payload) == 1 else payload)
    elif not args.json:
        for status in shown:
            print(status_line(status))
    if missing:
        raise not_found_error(target, missing, statuses)
    return EXIT_OK


def with_kind(item: Dict[str, Any], records: Dict[str, JobRecord]) -> Dict[str, Any]:
    """A status with its recorded job kind (Flux: "batch" or "plain"), where there is one."""
    record = records.get(item["job_id"])
    if record is not None and record.kind:
        item["kind"] = record.kind
    return item


def cmd_wait(args: argparse.Namespace) -> int:
    target = adapter_for_ids(args, args.job_ids)
    require_traced(target)
    return wait_and_report(target.adapter, target.job_ids, args)


def cmd_logs(args: argparse.Namespace) -> int:
    target = adapter_for_ids(args, [args.job_id])
    require_traced(target)
    adapter, (job_id,) = target.adapter, target.job_ids
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
    """Cancel the jobs still queued or running; say how each of the others ended.

    A job whose record or live state is final is not sent to the scheduler.
    """
    target = adapter_for_ids(args, args.job_ids)
    ended = {
        job_id: record.status()
        for job_id, record in target.records.items()
        if record.status().is_terminal
    }
    to_ask = [job_id for job_id in dict.fromkeys(target.job_ids) if job_id not in ended]
    live = target.adapter.get_job_statuses(to_ask) if to_ask else {}
    missing = untraced(target, live)
    ended.update({job_id: status for job_id, status in live.items() if status.is_terminal})
    to_cancel = [job_id for job_id in to_ask if job_id not in ended and job_id not in missing]
    if to_cancel:
        target.adapter.cancel_jobs(to_cancel)
    for job_id in dict.fromkeys(target.job_ids):
        if job_id in ended:
            print(f"{job_id} already ended {_how(ended[job_id])}: nothing to cancel")
        elif job_id not in missing:
            print(f"{job_id} cancel requested")
    if missing:
        raise not_found_error(target, missing, live)
    return EXIT_OK


def _how(status: JobStatus) -> str:
    """``COMPLETED``, ``FAILED (exit 3)``."""
    code = "" if status.exit_code is None else f" (exit {status.exit_code})"
    return f"{status.state.value}{code}"
