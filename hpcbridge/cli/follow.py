"""Following recorded jobs: ``status``, ``wait``, ``logs``, ``cancel``, in the order the
ids were given; ``--json`` prints an object for one id, a list for several (a failed id:
an ``error`` entry, its line on stderr)."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ..engine.observation import statuses_of
from ..engine.wait_plan import WaitPlan
from ..errors import SchedulerAdapterError
from ..model import JobState, JobStatus
from ..routing.ids import Group, Targets
from ..routing.unrecorded import ask, require_traced, untraced_errors
from ..store.jobs import JobRecord
from . import sweeps
from .exits import EXIT_JOB_NOT_COMPLETED, EXIT_OK, exit_code_for
from .output import Progress, announce, one_line, print_json, say_errors, status_line
from .settings import settings_from
from .targets import targets_for

if TYPE_CHECKING:
    from ..engine.adapter import SchedulerAdapter

#: the jobs of one adapter: what one wait (one query per poll) follows
Batch = Tuple["SchedulerAdapter", List[str]]


def wait_and_report(
    batches: Sequence[Batch],
    args: argparse.Namespace,
    as_list: bool,
    order: Optional[Sequence[Tuple[int, str]]] = None,
    failed: Optional[Dict[Tuple[int, str], Exception]] = None,
) -> int:
    """Wait for the jobs to end; exit 0 only when every one COMPLETED.

    ``as_list``: ``--json`` prints a list even for one job; ``order``: (batch index, id)
    of each entry it prints (default: every job once); ``failed``: by the same key, the
    ids that name no job (already said on stderr), each an ``error`` entry."""
    failed = failed or {}
    plan = WaitPlan(args.poll_interval, args.timeout, on_change=announce)
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    final: Dict[Tuple[int, str], JobStatus] = {}
    for index, (adapter, job_ids) in enumerate(batches):
        if not job_ids:
            continue
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        ended = _wait(adapter, job_ids, replace(plan, timeout=left))
        final.update({(index, job_id): status for job_id, status in ended.items()})
    if getattr(args, "json", False):
        records = {
            index: records_here(adapter, job_ids)
            for index, (adapter, job_ids) in enumerate(batches)
            if job_ids
        }
        keys = order if order is not None else list(final)
        entries = [
            {"job_id": key[1], "error": one_line(failed[key])}
            if key in failed
            else with_record(final[key].to_json(), records.get(key[0], {}))
            for key in keys
        ]
        print_json(entries if as_list else entries[0])
    if failed:
        return exit_code_for(list(failed.values())[-1])
    ok = all(status.state is JobState.COMPLETED for status in final.values())
    return EXIT_OK if ok else EXIT_JOB_NOT_COMPLETED


def _wait(adapter: SchedulerAdapter, job_ids: List[str], plan: WaitPlan) -> Dict[str, JobStatus]:
    many = len(job_ids) > 1
    progress = Progress() if many and sys.stderr.isatty() else None
    if progress is not None:
        # With many jobs on a terminal, one progress line beats a line per change.
        plan = replace(plan, on_change=None, on_poll=progress)
    try:
        return adapter.wait_for(job_ids, plan)
    finally:
        if progress is not None:
            progress.finish()


def cmd_status(args: argparse.Namespace) -> int:
    """Each id's status; a sweep's or pack's name: its state and counts (one line)."""
    from .records import named_status

    settings = settings_from(args)
    named_packs, found_sweeps, ids = sweeps.split(args.job_ids, settings)
    named: Dict[str, Any] = {record.name: record for record in named_packs}
    named.update({record.name: record for record in found_sweeps})
    many = len(args.job_ids) > 1
    targets = targets_for(args, ids, keep_going=many) if ids else Targets([], [])
    found, errors = _ask_groups(targets, many)
    placed = targets.placed()
    items: List[Dict[str, Any]] = []
    for typed in args.job_ids:
        if typed.strip() in named:
            text, entry = named_status(named[typed.strip()], settings)
            if args.json:
                items.append(entry)
            else:
                print(text)
            continue
        if typed in targets.failed:
            items.append({"job_id": typed.strip(), "error": one_line(targets.failed[typed])})
            continue
        group, job_id = placed[typed]
        answer = found[(id(group), job_id)]
        if not isinstance(answer, JobStatus):
            items.append({"job_id": job_id, "error": one_line(answer)})
        elif args.json:
            items.append(with_record(answer.to_json(), group.records))
        else:
            print(status_line(answer))
    # a failed id is an ``error`` entry in a list; one id alone that failed prints nothing
    if args.json and (many or "error" not in items[0]):
        print_json(items if many else items[0])
    say_errors(errors)
    return EXIT_OK


def _ask_groups(targets: Targets, many: bool) -> Tuple[Dict[Tuple[int, str], Any], List[Exception]]:
    """Each group's statuses (one query per group), by (group, id): a status, or the
    error of an id its scheduler does not know; and every error, in order.  With
    ``many`` a group that cannot be asked is an error of its ids, not of the command."""
    found: Dict[Tuple[int, str], Any] = {}
    errors: List[Exception] = list(targets.failed.values())
    for group in targets.groups:
        try:
            observed, missing, error = ask(targets, group, group.job_ids)
        except SchedulerAdapterError as exc:
            if not many:
                raise
            errors.append(exc)
            found.update({(id(group), job_id): exc for job_id in group.job_ids})
            continue
        statuses = statuses_of(observed)
        if error is not None:
            errors.append(error)
        for job_id in group.job_ids:
            found[(id(group), job_id)] = error if job_id in missing else statuses[job_id]
    return found, errors


def records_here(adapter: SchedulerAdapter, job_ids: Sequence[str]) -> Dict[str, JobRecord]:
    """The records of ``job_ids`` where ``adapter`` records them (one query)."""
    return adapter.store.get_many(adapter.scheduler_name, adapter.host_label, list(job_ids))


def with_kind(item: Dict[str, Any], records: Dict[str, JobRecord]) -> Dict[str, Any]:
    """A status with its recorded job kind (Flux: "batch" or "plain"), where there is one."""
    record = records.get(item["job_id"])
    if record is not None and record.kind:
        item["kind"] = record.kind
    return item


def with_record(item: Dict[str, Any], records: Dict[str, JobRecord]) -> Dict[str, Any]:
    """A status with what its record adds: the job kind (``with_kind``) and the job's
    own name (its script's, or the ``job_name`` it was given)."""
    record = records.get(item["job_id"])
    if record is not None and record.job_name:
        item["job_name"] = record.job_name
    return with_kind(item, records)


def cmd_wait(args: argparse.Namespace) -> int:
    """Wait for jobs - a sweep's or a pack's name stands for all its jobs, the rest fed
    first (a pack's on its own, its tasks' ends printed when it is done)."""
    named_packs, found, ids = sweeps.split(args.job_ids, settings_from(args))
    codes = [sweeps.wait_pack(record, args) for record in named_packs]
    never: List[str] = []
    unsent = 0
    for record in found:
        sent, refused, cancelled = sweeps.feed(record, settings_from(args))
        ids.extend(sent)
        never.extend(f"sweep {record.name}: {line}" for line in refused)
        if cancelled is not None:  # no error: its jobs are reported as they ended
            print(f"hpcbridge: {one_line(cancelled)}", file=sys.stderr)
            unsent += cancelled.unsent
    for line in never:
        print(f"hpcbridge: error: {line}", file=sys.stderr)
    if found and not ids:
        codes.append(EXIT_JOB_NOT_COMPLETED if never or unsent else EXIT_OK)
    elif ids or not named_packs:
        # A sweep's name prints a list in --json, whatever the number of its jobs.
        code = _wait_ids(args, ids, as_list=bool(found) or len(ids) > 1)
        codes.append(EXIT_JOB_NOT_COMPLETED if (never or unsent) and code == EXIT_OK else code)
    return max(codes)


def _wait_ids(args: argparse.Namespace, ids: List[str], as_list: bool) -> int:
    """Wait for the jobs ``ids`` name.  With several, one that names no job is an error
    entry (its line on stderr at once) and the others are waited for all the same."""
    many = as_list or len(ids) > 1
    targets = targets_for(args, ids, keep_going=many)
    if not many:
        require_traced(targets)
    index = {id(group): number for number, group in enumerate(targets.groups)}
    order: List[Tuple[int, str]] = []
    failed: Dict[Tuple[int, str], Exception] = {}
    untraced_ids = untraced_errors(targets) if many else {}
    placed = targets.placed()
    for typed in ids:
        if typed in targets.failed:
            key = (-1, typed.strip())
            failed[key] = targets.failed[typed]
        else:
            group, job_id = placed[typed]
            key = (index[id(group)], job_id)
            if (id(group), job_id) in untraced_ids:
                failed[key] = untraced_ids[(id(group), job_id)]
        order.append(key)
    for error in dict.fromkeys(failed.values()):
        print(f"hpcbridge: error: {one_line(error)}", file=sys.stderr, flush=True)
    batches = [
        (
            group.adapter,
            [job_id for job_id in group.job_ids if (index[id(group)], job_id) not in failed],
        )
        for group in targets.groups
    ]
    return wait_and_report(batches, args, as_list, order, failed)


def cmd_logs(args: argparse.Namespace) -> int:
    targets = targets_for(args, [args.job_id])
    require_traced(targets)
    [(_, group, job_id)] = targets.order
    adapter = group.adapter
    if not args.follow:
        text = adapter.get_job_logs(job_id)
        sys.stdout.write(text)
        if not text:
            _no_output_yet(job_id, adapter.get_job_status(job_id), follow=False)
        return EXIT_OK
    shown = 0
    waiting_said = False
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
        if not shown and not waiting_said:
            waiting_said = _no_output_yet(job_id, status, follow=True)
        time.sleep(1.0)


def _no_output_yet(job_id: str, status: JobStatus, follow: bool) -> bool:
    """Say on stderr why there is nothing to print (the job has not started...); True if said."""
    if status.is_terminal:
        if follow:
            return False
        why = f"ended {status.state.value} without writing any output"
    elif status.state is JobState.PENDING:
        why = "is PENDING: it has not started, so there is no output yet"
    elif status.state is JobState.RUNNING:
        why = "is RUNNING and has written no output yet"
    else:
        why = "has no output yet (its state cannot be told right now)"
    then = (
        "waiting for it" if follow else f"'hpcbridge logs {job_id} --follow' prints it as it comes"
    )
    print(f"hpcbridge: job {job_id} {why}; {then}", file=sys.stderr, flush=True)
    return True


def cmd_cancel(args: argparse.Namespace) -> int:
    """Cancel the jobs still queued or running (a sweep's: and send no more; a pack's: its
    allocations released); say how each of the others ended."""
    named_packs, found, ids = sweeps.split(args.job_ids, settings_from(args))
    for record in [*named_packs, *found]:
        print(sweeps.cancel(record, settings_from(args)))
    if not ids:
        return EXIT_OK
    targets = targets_for(args, ids)
    said: Dict[Tuple[int, str], str] = {}
    errors: List[SchedulerAdapterError] = []
    for group in targets.groups:
        error = _cancel_group(targets, group, said)
        if error is not None:
            errors.append(error)
    for key in dict.fromkeys((id(group), job_id) for _, group, job_id in targets.order):
        if key in said:
            print(said[key])
    say_errors(errors)
    return EXIT_OK


def _cancel_group(
    targets: Targets, group: Group, said: Dict[Tuple[int, str], str]
) -> Optional[SchedulerAdapterError]:
    """Cancel what is live of one group; fill ``said`` with a line per id; the error of
    the ids its scheduler does not know, if any."""
    ended = {
        job_id: record.status()
        for job_id, record in group.records.items()
        if record.status().is_terminal
    }
    to_ask = [job_id for job_id in dict.fromkeys(group.job_ids) if job_id not in ended]
    observed, missing, error = ask(targets, group, to_ask)
    live = statuses_of(observed)
    ended.update({job_id: status for job_id, status in live.items() if status.is_terminal})
    to_cancel = [job_id for job_id in to_ask if job_id not in ended and job_id not in missing]
    if to_cancel:
        group.adapter.cancel_jobs(to_cancel)
    for job_id in group.job_ids:
        if job_id in ended:
            line = f"{job_id} already ended {_how(ended[job_id])}: nothing to cancel"
        elif job_id not in missing:
            line = f"{job_id} cancel requested"
        else:
            continue
        said[(id(group), job_id)] = line
    return error


def _how(status: JobStatus) -> str:
    """``COMPLETED``, ``FAILED (exit 3)``."""
    code = "" if status.exit_code is None else f" (exit {status.exit_code})"
    return f"{status.state.value}{code}"


__all__ = ["cmd_cancel", "cmd_logs", "cmd_status", "cmd_wait", "wait_and_report"]
