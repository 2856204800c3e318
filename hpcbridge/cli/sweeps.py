"""Sweeps and named packs on the command line: a name where ``wait``, ``cancel`` and
``jobs`` take ids (anything that names no recorded one is a job id), reached where it was
recorded, and the progress line while a sweep is fed."""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import SweepCancelledError
from ..model import JobState, JobStatus
from ..routing.places import adapter_at, place_of
from ..settings.config import Settings
from .exits import EXIT_JOB_NOT_COMPLETED, EXIT_OK
from .output import TerminalLine, print_json
from .settings import settings_from, store_for

if TYPE_CHECKING:
    from ..engine.adapter import SchedulerAdapter
    from ..store.packs import PackRecord
    from ..store.sweeps import SweepBook, SweepRecord


def book_for(settings: Settings) -> SweepBook:
    from ..store.sweeps import SweepBook

    return SweepBook(store_for(settings))


def split(
    arguments: Sequence[str], settings: Settings
) -> Tuple[List[PackRecord], List[SweepRecord], List[str]]:
    """The recorded packs and sweeps named among ``arguments`` (a pack's name first), and
    the other arguments (ids)."""
    from ..engine.sweeping import NAME
    from ..store.packs import PackBook
    from ..store.sweeps import SweepBook

    store = store_for(settings)
    pack_book, sweep_book = PackBook(store), SweepBook(store)
    packs: List[PackRecord] = []
    found: List[SweepRecord] = []
    ids: List[str] = []
    for argument in arguments:
        name = argument.strip()
        named = NAME.fullmatch(name) is not None
        pack = pack_book.get(name) if named else None
        record = sweep_book.get(name) if named and pack is None else None
        if pack is not None:
            packs.append(pack)
        elif record is not None:
            found.append(record)
        else:
            ids.append(argument)
    return packs, found, ids


@contextmanager
def reached(record: Any, settings: Settings) -> Iterator[SchedulerAdapter]:
    """An adapter that reaches where the sweep or pack was recorded, closed after use."""
    adapter = adapter_at(place_of(record), settings)
    try:
        yield adapter
    finally:
        adapter.close()


#: seconds between two progress lines when stderr is no terminal (a pipe, a log file)
PIPED_EVERY = 30.0


class SweepProgress(TerminalLine):
    """The sweep's counts while it is fed: one line rewritten in place on a terminal;
    elsewhere a line of its own now and then (a log shows that the feeding goes on)."""

    def __init__(self, name: str, every: float = PIPED_EVERY) -> None:
        self.name = name
        self.started = time.monotonic()
        self.first_done: Optional[int] = None
        self.terminal = sys.stderr.isatty()
        self.every = every
        self.printed = float("-inf")

    def __call__(self, counts: Dict[str, int]) -> None:
        if not self.terminal and time.monotonic() - self.printed < self.every:
            return
        done = counts["completed"] + counts["failed"]
        if self.first_done is None:
            self.first_done = done
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = (done - self.first_done) / elapsed
        sent = counts["total"] - counts["unsent"]
        line = (
            f"sweep {self.name}: {sent}/{counts['total']} sent, {counts['queued']} "
            f"queued, {counts['completed']} completed, {counts['failed']} failed, "
            f"cancelled or timed out, {rate:.1f} jobs/s"
        )
        if self.terminal:
            self.write(line)
        else:
            print(f"hpcbridge: {line}", file=sys.stderr, flush=True)
            self.printed = time.monotonic()


def feed(
    record: SweepRecord, settings: Settings
) -> Tuple[List[str], List[str], Optional[SweepCancelledError]]:
    """Go on feeding the sweep (or follow the process feeding it) until all is sent:
    the ids of its jobs, a line per task refused (it will never be sent), and - for a
    cancelled sweep - what says so (its tasks not sent are no error)."""
    from ..engine.driver import PartialSubmissionError
    from ..engine.sweeping import Sweep

    with reached(record, settings) as adapter:
        sweep = Sweep.resume(adapter, record.name)
        progress = SweepProgress(record.name)
        try:
            return sweep.feed(progress), [], None
        except SweepCancelledError as exc:
            return exc.submitted_ids, [], exc
        except PartialSubmissionError as exc:
            return [item.job_id for item in exc.submitted], list(exc.failures), None
        finally:
            progress.finish()


def cancel(record: Any, settings: Settings) -> str:
    """Send nothing more of the sweep and cancel its live jobs (a pack: stop it and
    release its allocations); one line saying so."""
    from ..engine.sweeping import Sweep
    from ..packing import cancel_packed
    from ..store.packs import PackRecord

    with reached(record, settings) as adapter:
        if isinstance(record, PackRecord):
            return cancel_packed(adapter, record.name)
        sweep = Sweep.resume(adapter, record.name)
        unsent = sum(1 for task in sweep.book.tasks(record.name) if task.state == "waiting")
        cancelled = sweep.cancel(by=f"'hpcbridge cancel {record.name}'")
    return (
        f"sweep {record.name}: {unsent} job(s) not sent will not be, "
        f"cancel requested for {len(cancelled)} job(s)"
    )


def report(finals: Sequence[JobStatus], as_json: bool) -> int:
    """Each pack task's end (its Flux id and state, or JSON), in the tasks' order - a task
    never sent as such (``(never sent)``; JSON: ``"job_id": null, "never_sent": true``);
    0 when every task COMPLETED."""
    if as_json:
        print_json([task_json(status) for status in finals])
    else:
        for status in finals:
            print(f"{status.job_id or NEVER_SENT} {status.state.value}", flush=True)
    ended_well = all(status.state is JobState.COMPLETED for status in finals)
    return EXIT_OK if ended_well else EXIT_JOB_NOT_COMPLETED


#: how a task of a pack that has no job id is shown (it was never sent)
NEVER_SENT = "(never sent)"


def task_json(status: JobStatus) -> Dict[str, Any]:
    """A pack task's end in JSON: a task never sent has no job id, and says so."""
    if status.job_id:
        return status.to_json()
    return {**status.to_json(), "job_id": None, "never_sent": True}


def settle_orphans(settings: Settings, records: Sequence[Any]) -> bool:
    """The Flux jobs among ``records`` that a named pack sent into an allocation that was
    released or has ended since (its record says so, else its scheduler, asked once),
    recorded as their instance left them (``packing.settling.settle_gone``) - a gone
    instance is never asked; whether any was."""
    from ..packing.settling import settle_gone
    from ..store.packs import PackBook

    flux = [r.job_id for r in records if r.scheduler == "flux" and not r.status().is_terminal]
    if not flux:
        return False
    book = PackBook(store_for(settings))
    by_pack: Dict[str, List[Tuple[str, str, bool]]] = {}
    for job_id, pack, allocation, released in book.holders(flux):
        by_pack.setdefault(pack, []).append((job_id, allocation, released))
    settled = False
    for name, held in by_pack.items():
        record = book.get(name)
        if record is None:
            continue
        live = sorted({allocation for _, allocation, released in held if not released})
        known = book.store.statuses(record.scheduler, record.host, live)
        gone = {a: s.state.value for a, s in known.items() if s.is_terminal}
        with reached(record, settings) as outer:
            unended = [allocation for allocation in live if allocation not in gone]
            ends = outer.get_job_statuses(unended) if unended else {}
            gone.update({a: s.state.value for a, s in ends.items() if s.state.is_terminal})
            for allocation in {allocation for _, allocation, released in held if released}:
                gone[allocation] = "released"
            for allocation, how in gone.items():
                ids = [job_id for job_id, where, _ in held if where == allocation]
                why = (
                    f"its allocation {allocation} ended ({how}) before it was seen to end "
                    f"('hpcbridge wait {name}' goes on with the pack)"
                )
                settle_gone(outer, ids, why)
                settled = True
    return settled


def wait_pack(record: PackRecord, args: argparse.Namespace) -> int:
    """Go on with the pack (its first client may have died) and report each task's end."""
    from ..packing import resume_packed

    with reached(record, settings_from(args)) as outer:
        finals = resume_packed(
            outer, record.name, poll_interval=args.poll_interval, timeout=args.timeout
        )
    return report(finals, args.json)


#: what ``jobs --json`` shows of a sweep and of a named pack, after its name
SUMMARY_FIELDS = {
    "sweep": ("scheduler", "host", "state", "total", "max_queued", "created"),
    "pack": ("scheduler", "host", "spec", "total", "created"),
}


def row(
    what: str, record: Any, counts: Dict[str, int], state: Optional[str] = None
) -> Tuple[str, ...]:
    """A sweep or named pack (``what`` it is) as one line of ``jobs``: its counts in place
    of a state (and a pack's own state, unless done)."""
    shown = _counted(counts)
    if state and state != "done":
        shown += f" ({state})"
    created = datetime.fromisoformat(record.created).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    return (record.name, record.scheduler, _kind(what, record), shown, "", created, "")


def _counted(counts: Dict[str, int]) -> str:
    """``412 COMPLETED, 38 PENDING, 150 waiting``."""
    return ", ".join(f"{count} {key}" for key, count in sorted(counts.items()))


def _kind(what: str, record: Any) -> str:
    """``sweep of 600``, ``pack of 12 (nodes=1,time=0:10:00,count=1)``."""
    return f"{what} of {record.total}" + (f" ({record.spec})" if what == "pack" else "")


def summary(
    what: str, record: Any, counts: Dict[str, int], state: Optional[str] = None
) -> Dict[str, object]:
    """A sweep or named pack (``what`` it is) as one entry of ``jobs --json`` (a pack's
    ``state``: ``PackBook.state``)."""
    shown = {key: getattr(record, key) for key in SUMMARY_FIELDS[what]}
    if state is not None:
        shown["state"] = state
    return {what: record.name, **shown, "counts": counts}


def line(what: str, record: Any, counts: Dict[str, int], state: str) -> str:
    """A sweep or named pack as ``status NAME`` prints it: what it is, its state, its
    counts, and what goes on with it when it is not done."""
    text = f"{record.name}: {_kind(what, record)}, {state}: {_counted(counts) or 'no task'}"
    if state == "interrupted":
        text += f"; 'hpcbridge wait {record.name}' goes on with it"
    elif state == "feeding":
        text += f"; 'hpcbridge wait {record.name}' follows it (or goes on, if its client died)"
    return text
