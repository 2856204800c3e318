"""A named pack run, gone on with, or stopped: ``run_packed`` records it and feeds it,
``resume_packed`` follows it while its feeder lives and then feeds what is left - both
through ``feed`` (the one path: ``PackRun`` loaded from the store) - and
``cancel_packed`` stops it from any process."""

from __future__ import annotations

import logging
from typing import Any, List, Mapping, Optional, Sequence

from ..engine.adapter import SchedulerAdapter
from ..engine.feeding import take_or_follow
from ..engine.jobscript import new_token
from ..engine.submitting import coerce_task, reach_text
from ..errors import JobTimeoutError
from ..model import JobStatus
from ..resources import Resources
from ..retrying import Deadline
from ..store.packs import ENDED, SENDING, SENT, PackBook, PackRecord, PackTask
from .feeder import DEFAULT_MARGIN, PackRun
from .request import Pack

log = logging.getLogger("hpcbridge")


def new_pack_name() -> str:
    """The name of a pack given none (as a sweep's: ``pack-`` and 8 random hex digits)."""
    return f"pack-{new_token()[:8]}"


def run_packed(
    outer: SchedulerAdapter,
    jobs: Sequence[Any],
    resources: Optional[Mapping[str, Any]],
    pack: Pack,
    *,
    flux_command: str = "flux",
    poll_interval: Optional[float] = None,
    timeout: Optional[float] = None,
    name: Optional[str] = None,
    **flux_options: Any,
) -> List[JobStatus]:
    """``jobs`` (as ``submit_many`` takes them, each with a time limit in ``resources``)
    run as plain Flux jobs in ``pack``'s allocations - Slurm jobs when ``outer`` is a Slurm
    adapter, batch jobs when it is a Flux one; every task's final status, in the
    tasks' order.  ``flux_options`` go to each instance's ``FluxAdapter`` (e.g.
    ``outer_time_margin``, 60 s by default).  Of ``resources``, the keys of
    ``request.ALLOCATION_KEYS`` and ``outer``'s own options go to the allocations, the rest
    to each task.  The pack is recorded in the job store under ``name`` (given none: a
    ``new_pack_name()``, logged) as it goes: ``resume_packed`` goes on with it when this
    process died, ``cancel_packed`` stops it from another.

    The allocations are released whatever ends this call: its end, a Python exception,
    ``KeyboardInterrupt``.  A signal whose default action kills the process (TERM, HUP)
    skips that: the ``hpcbridge`` command turns INT, TERM and HUP into an exception in its
    main thread; a Python caller does likewise (``signal.signal``) or, after SIGKILL,
    calls ``cancel_packed``/``resume_packed`` with the name."""
    if not name:
        name = new_pack_name()
        log.info("pack %s: %d task(s)", name, len(jobs))
    margin = float(flux_options.get("outer_time_margin", DEFAULT_MARGIN))
    record = _record(outer, name, pack, resources, flux_command, margin, len(jobs))
    book = PackBook(outer.store)
    feeding = PackRun(outer, record, book, flux_options)  # its terms refused before it is recorded
    repo = outer.settings.remote_repo
    tasks = [coerce_task(item, repo) for item in jobs]
    book.create(
        record,
        [
            PackTask(index, task.script, tuple(task.arguments), dict(task.environment or {}))
            for index, task in enumerate(tasks)
        ],
    )
    return feed(feeding, poll_interval, Deadline(timeout))


def _record(
    outer: SchedulerAdapter,
    name: str,
    pack: Pack,
    resources: Optional[Mapping[str, Any]],
    flux_command: str,
    margin: float,
    total: int,
) -> PackRecord:
    """A new pack's record: where it runs, what it holds and asks for."""
    return PackRecord(
        name,
        pack.text(),
        outer.scheduler_name,
        outer.executor.kind,
        outer.host_label,
        outer.instance_label,
        reach_text(outer.executor),
        # as asked: the settings' defaults apply where it is fed, as to any submission
        Resources.from_mapping(resources).as_request(),
        flux_command,
        margin,
        total,
        "",
    )


def feed(feeding: PackRun, poll_interval: Optional[float], deadline: Deadline) -> List[JobStatus]:
    """The pack, as the store has it, fed to its end by this process (which holds its
    lease); its allocations released whatever ends this call."""
    try:
        feeding.load()
        return feeding.run(poll_interval if poll_interval is not None else 1.0, deadline)
    finally:
        feeding.release_all()


def resume_packed(
    outer: SchedulerAdapter,
    name: str,
    poll_interval: Optional[float] = None,
    timeout: Optional[float] = None,
) -> List[JobStatus]:
    """Go on with the pack recorded as ``name`` (``outer`` reaches where it was
    recorded): while its feeder lives, follow its record until every task ended; once it
    died, its allocations reached again, the tasks it was sending looked up by their keys,
    the rest fed - none sent twice."""
    book = PackBook(outer.store)
    record = book.get(name)
    if record is None:
        raise KeyError(name)
    poll = poll_interval if poll_interval is not None else 1.0
    deadline = Deadline(timeout)

    def follow(feeder: str) -> bool:
        if all(task.final is not None for task in book.tasks(name)):
            return True
        if deadline.expired:
            raise JobTimeoutError(f"pack {name}: still fed by {feeder} after {timeout:.0f} s")
        deadline.sleep(max(poll, 1.0))
        return False

    if not take_or_follow(book, name, follow, f"pack {name}"):
        return [task.final for task in book.tasks(name) if task.final is not None]
    return feed(PackRun(outer, record, book, {}), poll, deadline)


def cancel_packed(outer: SchedulerAdapter, name: str) -> str:
    """Stop the pack recorded as ``name``: its feeder (any process) sends nothing more
    and its allocations are released, the tasks in them with them (with no live feeder,
    here, as its feeder would on seeing the cancel); what was done, counted before."""
    book = PackBook(outer.store)
    record = book.get(name)
    if record is None:
        raise KeyError(name)
    feeding = PackRun(outer, record, book, {})  # its terms read before anything changes
    tasks = book.tasks(name)
    held = [a.job_id for a in book.allocations(name) if not a.released]
    running = [t for t in tasks if t.state in (SENT, SENDING) and t.allocation in held]
    ended = [t for t in tasks if t.state == ENDED]
    book.cancel(name)
    if book.take(name) is None:  # no live feeder: the one path, which sees the cancel
        try:
            feeding.load()
            feeding.cancelled()
        finally:
            feeding.release_all()
    elif held:
        outer.cancel_jobs(held)
        book.released(name, held)
    unsent = len(tasks) - len(running) - len(ended)
    return (
        f"pack {name} cancelled: {len(held)} allocation(s) released; {len(running)} task(s) "
        f"in them cancelled, {unsent} not sent (and now never will be), {len(ended)} had "
        "already ended"
    )
