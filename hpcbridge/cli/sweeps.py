"""Sweeps on the command line: a sweep's name where ``wait``, ``cancel`` and ``jobs``
take ids, and the progress line while one is fed.

An argument is a sweep's name when a sweep of that name is recorded in the
store; anything else is a job id (``targets``).  A sweep is reached where it
was recorded - its scheduler, transport, host and Flux instance - like a job.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from ..config import Settings
from ..errors import SweepCancelledError
from .places import Place, adapter_at
from .targets import store_for

if TYPE_CHECKING:
    from ..engine.adapter import SchedulerAdapter
    from ..engine.sweeping import Sweep
    from ..store.sweeps import SweepBook, SweepRecord


def book_for(settings: Settings) -> SweepBook:
    from ..store.sweeps import SweepBook

    return SweepBook(store_for(settings))


def split(arguments: Sequence[str], settings: Settings) -> Tuple[List[SweepRecord], List[str]]:
    """The recorded sweeps named among ``arguments``, and the other arguments (ids)."""
    from ..engine.sweeping import NAME

    book: Optional[SweepBook] = None
    sweeps: List[SweepRecord] = []
    others: List[str] = []
    for argument in arguments:
        record = None
        if NAME.fullmatch(argument.strip()):
            book = book or book_for(settings)
            record = book.get(argument.strip())
        if record is not None:
            sweeps.append(record)
        else:
            others.append(argument)
    return sweeps, others


def opened(record: SweepRecord, settings: Settings) -> Tuple[SchedulerAdapter, Sweep]:
    """The sweep, through an adapter that reaches where it was recorded."""
    from ..engine.sweeping import Sweep

    place = Place(record.scheduler, record.host, record.flux_uri, record.transport, record.reach)
    adapter = adapter_at(place, settings)
    return adapter, Sweep.resume(adapter, record.name)


class SweepProgress:
    """One rewritten stderr line while a sweep is fed (on a terminal only)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.started = time.monotonic()
        self.first_done: Optional[int] = None
        self.shown = sys.stderr.isatty()

    def __call__(self, counts: Dict[str, int]) -> None:
        if not self.shown:
            return
        done = counts["completed"] + counts["failed"]
        if self.first_done is None:
            self.first_done = done
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = (done - self.first_done) / elapsed
        sent = counts["total"] - counts["unsent"]
        sys.stderr.write(
            f"\r\033[Ksweep {self.name}: {sent}/{counts['total']} sent, {counts['queued']} "
            f"queued, {counts['completed']} completed, {counts['failed']} not, "
            f"{rate:.1f} jobs/s"
        )
        sys.stderr.flush()

    def finish(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def feed(
    record: SweepRecord, settings: Settings
) -> Tuple[List[str], List[str], Optional[SweepCancelledError]]:
    """Go on feeding the sweep (or follow the process feeding it) until all is sent:
    the ids of its jobs, a line per task refused (it will never be sent), and - for a
    cancelled sweep - what says so (its tasks not sent are no error)."""
    from ..engine.driver import PartialSubmissionError

    adapter, sweep = opened(record, settings)
    progress = SweepProgress(record.name)
    try:
        return sweep.feed(progress), [], None
    except SweepCancelledError as exc:
        return exc.submitted_ids, [], exc
    except PartialSubmissionError as exc:
        return [item.job_id for item in exc.submitted], list(exc.failures), None
    finally:
        progress.finish()
        adapter.close()


def cancel(record: SweepRecord, settings: Settings) -> str:
    """Send nothing more of the sweep and cancel its live jobs; one line saying so."""
    adapter, sweep = opened(record, settings)
    try:
        unsent = sum(1 for task in sweep.book.tasks(record.name) if task.state == "waiting")
        cancelled = sweep.cancel(by=f"'hpcbridge cancel {record.name}'")
    finally:
        adapter.close()
    return (
        f"sweep {record.name}: {unsent} job(s) not sent will not be, "
        f"cancel requested for {len(cancelled)} job(s)"
    )


def summary(record: SweepRecord, counts: Dict[str, int]) -> Dict[str, object]:
    """A sweep as one entry of ``jobs --json``."""
    return {
        "sweep": record.name,
        "scheduler": record.scheduler,
        "host": record.host,
        "state": record.state,
        "total": record.total,
        "max_queued": record.max_queued,
        "created": record.created,
        "counts": counts,
    }


def row(record: SweepRecord, counts: Dict[str, int]) -> Tuple[str, ...]:
    """A sweep as one line of ``jobs``: its counts in place of a state."""
    shown = ", ".join(f"{count} {state}" for state, count in sorted(counts.items()))
    created = datetime.fromisoformat(record.created).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    return (record.name, record.scheduler, f"sweep of {record.total}", shown, "", created, "")
