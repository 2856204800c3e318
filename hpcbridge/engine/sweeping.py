"""Sweeps: many jobs under one name, fed to the scheduler a few at a time.

    sweep = Sweep(adapter, "hello_bye", max_queued=50)
    hellos = sweep.add([("hello.sh", [name]) for name in names])
    sweep.add([("bye.sh", [name]) for name in names], after=hellos)  # each bye after its hello
    final = sweep.wait()                                             # feeds, then waits

Everything is checked when added.  ``submit()`` records the tasks and feeds them
(``feeding.Feeder``); ``Sweep.resume`` goes on after a feeder died; ``cancel()`` sends
nothing more, cancels the jobs sent and stops a feeding process.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from datetime import datetime
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ..errors import JobSubmissionError, JobTimeoutError, LimitRefusedError, SweepCancelledError
from ..model import JobStatus
from ..retrying import Deadline
from ..store.leases import me
from ..store.sweeps import (
    CANCELLED,
    FEEDING,
    GIVEN_UP,
    SENT,
    Step,
    SweepBook,
    SweepRecord,
    SweepTask,
    now_text,
)
from .driver import PartialSubmissionError, Submitted
from .feeding import LOOK_AGAIN, Feeder, ProgressCallback, SweepCancelled, take_or_follow
from .jobscript import new_token
from .parents import DependsOn
from .service import SubmissionService
from .submitting import JobInput, Order, coerce_task, reach_text
from .wait_plan import WaitPlan

log = logging.getLogger("hpcbridge")

#: a sweep's name: it names a folder, and starts with a letter as no Slurm or mock id does
NAME = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,63}")

#: a task's parents in the sweep: one index for every task, or one entry (indexes) per task
After = Union[None, int, Sequence[Union[int, Sequence[int]]]]


class Sweep:
    """One sweep of one adapter's jobs; see the module docstring."""

    def __init__(
        self,
        adapter: SubmissionService,
        name: Optional[str] = None,
        max_queued: Optional[int] = None,
    ) -> None:
        if max_queued is not None and (
            isinstance(max_queued, bool) or not isinstance(max_queued, int) or max_queued < 1
        ):
            raise ValueError(f"max_queued must be a whole number of 1 or more, not {max_queued!r}")
        if name is not None and not NAME.fullmatch(name):
            raise ValueError(
                f"a sweep's name is a letter, then letters, digits, '.', '_' or '-' (at most "
                f"64), not {name!r}: it names a folder and is told apart from job ids"
            )
        self.adapter = adapter
        self.book = SweepBook(adapter.store)
        self.name = name or f"sweep-{new_token()[:8]}"
        self.max_queued = int(max_queued) if max_queued is not None else None
        self._steps: List[Step] = []
        self._tasks: List[SweepTask] = []
        self._record: Optional[SweepRecord] = None

    def add(
        self,
        jobs: Sequence[JobInput],
        resources: Optional[Mapping[str, Any]] = None,
        depends_on: DependsOn = None,
        after: After = None,
        **options: Any,
    ) -> List[int]:
        """Add tasks sharing ``resources``, outside parents and options; ``after``: the
        tasks of this sweep each runs after.  The new tasks' indexes."""
        repo = self.adapter.settings.remote_repo
        tasks = [coerce_task(item, repo) for item in jobs]
        order = self.adapter.order(lambda: tasks, resources, depends_on, None, options)
        return self.add_order(order, options, after)

    def add_order(self, order: Order, options: Mapping[str, Any], after: After = None) -> List[int]:
        """``add`` of an order already validated (``submit_many``'s)."""
        if self._record is not None:
            raise JobSubmissionError(f"sweep {self.name} was already submitted; add to a new one")
        parents = _parents(after, len(order.tasks), len(self._tasks))
        if order.tasks:  # one task planned as it will be sent: refused now, not midway
            self.adapter.submission().plan(replace(order, tasks=order.tasks[:1]))
        step = len(self._steps)
        # As validated now: a feeder in another shell sends what was asked here.
        self._steps.append(Step(order.resources.as_request(), dict(options), order.depends_on))
        first = len(self._tasks)
        for offset, (task, before) in enumerate(zip(order.tasks, parents)):
            self._tasks.append(
                SweepTask(
                    first + offset,
                    step,
                    task.script,
                    tuple(task.arguments),
                    task.environment,
                    before,
                )
            )
        return list(range(first, len(self._tasks)))

    def submit(
        self, remote_dir: Optional[str] = None, on_progress: Optional[ProgressCallback] = None
    ) -> List[str]:
        """Record the sweep and feed it until every task is sent; the ids in task order
        (``PartialSubmissionError`` when some never will be, ``SweepCancelledError``)."""
        if self._record is None:
            self._record = self._create(remote_dir)
        return self.feed(on_progress)

    def wait(
        self,
        poll_interval: Optional[float] = None,
        timeout: Optional[float] = None,
        on_progress: Optional[ProgressCallback] = None,
    ) -> Dict[str, JobStatus]:
        """Feed what is left, then wait for every job sent; the final statuses by id."""
        if self._record is None:
            self._record = self._create(None)
        try:
            ids = self.feed(on_progress)
        except SweepCancelledError as cancelled:  # what was sent ends as the scheduler says
            ids = cancelled.submitted_ids
        return self.adapter.wait_for(ids, WaitPlan(poll_interval, timeout))

    @classmethod
    def resume(cls, adapter: SubmissionService, name: str) -> Sweep:
        """The sweep recorded under ``name``, to go on feeding (``submit``/``wait``)."""
        book = SweepBook(adapter.store)
        record = book.get(name)
        if record is None:
            raise JobSubmissionError(f"no sweep named {name!r} in {adapter.store.path}")
        sweep = cls(adapter, name, record.max_queued)
        sweep._record = record
        return sweep

    def job_ids(self) -> List[str]:
        """The ids of the sweep's jobs sent so far, in task order."""
        return self.book.job_ids(self.name)

    def counts(self) -> Dict[str, int]:
        """How many tasks wait, are being sent, and how many jobs are in each state."""
        record = self._record or self.book.get(self.name)
        return self.book.counts(record) if record is not None else {}

    def cancel(self, by: str = "Sweep.cancel()") -> List[str]:
        """Send nothing more and cancel the jobs not ended; their ids (a feeding process
        stops with ``SweepCancelledError`` naming ``by``)."""
        record = self._record or self.book.get(self.name)
        if record is None:
            return []
        self.book.give_up(self.name, f"cancelled by {by} (process {me()})")
        self.book.release(self.name)
        ids = self.job_ids()
        statuses = self.adapter.store.statuses(record.scheduler, record.host, ids)
        alive = [i for i in ids if i not in statuses or not statuses[i].is_terminal]
        if alive:
            self.adapter.cancel_jobs(alive)
        return alive

    def _create(self, remote_dir: Optional[str]) -> SweepRecord:
        if not self._tasks:
            raise JobSubmissionError(f"sweep {self.name} has no tasks: add some first")
        adapter = self.adapter
        folder = adapter.stager.folder(remote_dir, f"sweep-{self.name}", datetime.now())
        record = SweepRecord(
            name=self.name,
            scheduler=adapter.scheduler_name,
            transport=adapter.executor.kind,
            host=adapter.host_label,
            flux_uri=adapter.instance_label,
            reach=reach_text(adapter.executor),
            folder=folder,
            max_queued=self.max_queued,
            steps=self._steps,
            total=len(self._tasks),
            created=now_text(),
        )
        try:
            self.book.create(record, self._tasks)
        except ValueError:
            raise JobSubmissionError(
                f"a sweep named {self.name!r} is already recorded: choose another name, "
                f"or go on with it (hpcbridge wait {self.name})"
            ) from None
        return record

    def feed(self, on_progress: Optional[ProgressCallback] = None) -> List[str]:
        """Send what is left (while another live process feeds it, follow its jobs until
        that one is done or dies); ``submit``'s outcome."""
        if self._record is None:
            raise JobSubmissionError(f"sweep {self.name} is not submitted yet: submit() it")
        record = self.book.get(self.name) or self._record
        if record.state == FEEDING and take_or_follow(
            self.book, self.name, self._follow_a_while, f"sweep {self.name}"
        ):
            record = self.book.get(self.name) or record
            try:
                Feeder(self.adapter, self.book, record).run(on_progress)
            except SweepCancelled:
                pass  # the outcome says so
            finally:
                self.book.release(self.name)
        return self._outcome()

    def _follow_a_while(self, feeder: str) -> bool:
        """Follow the sweep's jobs a while (``feeder`` feeds it); whether it is fed now."""
        ids = self.job_ids()
        try:
            if ids:
                self.adapter.wait_for(ids, WaitPlan(timeout=LOOK_AGAIN))
            else:
                Deadline(LOOK_AGAIN).sleep(LOOK_AGAIN)
        except JobTimeoutError:
            pass
        record = self.book.get(self.name)
        return record is None or record.state != FEEDING

    def _outcome(self) -> List[str]:
        """The ids of the jobs sent, or the error of a cancelled or partly refused sweep."""
        tasks = self.book.tasks(self.name)
        sent = [task for task in tasks if task.state == SENT and task.job_id]
        never = [task for task in tasks if task.state == CANCELLED]
        ids = [str(task.job_id) for task in sent]
        record = self.book.get(self.name)
        if record is not None and record.state == GIVEN_UP:
            notes = [task.note for task in never if task.note and task.note.startswith("cancel")]
            how = notes[0] if notes else "cancelled"
            raise SweepCancelledError(self.name, ids, len(tasks) - len(sent), how)
        if never:
            failures = [f"task {task.index}: {task.note or 'cancelled'}" for task in never]
            submitted = [Submitted(str(task.job_id), "", task.index) for task in sent]
            raise PartialSubmissionError(submitted, failures, len(tasks))
        return ids


#: told a sweep's name and why when ``submit_many`` feeds its jobs as one unasked
Announce = Callable[[str, str], None]


def send_or_feed(
    adapter: SubmissionService,
    order: Order,
    options: Mapping[str, Any],
    max_queued: Optional[int],
    name: Optional[str],
    announce: Optional[Announce] = None,
) -> List[str]:
    """``submit_many``'s choice: one submission, or a sweep fed through a cap (given,
    the scheduler's, or met on the way); a sweep nobody asked for is announced (its
    name, so that ``hpcbridge wait NAME`` can go on with it)."""
    if max_queued is None:
        max_queued = adapter.settings.max_queued
    if max_queued is None and name is None:
        many = len(order.tasks) > 1
        # Only a cap known already: one not known is met on the way, by a refusal.
        driver = adapter.open().driver
        cap = driver.queue_limit(order.resources.account, ask=False) if many else None
        why = f"the scheduler takes at most {cap} of your jobs at once"
        if cap is None or len(order.tasks) <= cap:
            try:
                return adapter.submission().run(order)
            except LimitRefusedError as exc:
                log.info("the scheduler takes no more jobs now (%s): feeding them as a sweep", exc)
                cap = driver.queue_limit(order.resources.account)  # met: now worth reading
                why = f"the scheduler takes no more now: {exc}"
            except PartialSubmissionError as exc:
                if not exc.limited:
                    raise
                return _feed_the_rest(adapter, order, exc, options, name, announce)
        max_queued = cap
        sweep = Sweep(adapter, name, max_queued)
        sweep.add_order(order, options)
        _announce(announce, sweep.name, len(order.tasks), why)
        return sweep.submit(order.remote_dir)
    sweep = Sweep(adapter, name, max_queued)
    sweep.add_order(order, options)
    return sweep.submit(order.remote_dir)


def _announce(announce: Optional[Announce], name: str, count: int, why: str) -> None:
    """Say the name of a sweep made because of a limit (``announce``, else the log)."""
    if announce is not None:
        announce(name, why)
    else:
        log.warning(
            "%d job(s) fed as sweep %s (%s); if this process stops, 'hpcbridge wait %s' "
            "goes on with it",
            count,
            name,
            why,
            name,
        )


def _feed_the_rest(
    adapter: SubmissionService,
    order: Order,
    refused: PartialSubmissionError,
    options: Mapping[str, Any],
    name: Optional[str],
    announce: Optional[Announce] = None,
) -> List[str]:
    """The rest of a submission refused for the cluster's cap goes in as a sweep through
    that cap; every id, in task order."""
    went = {item.index: item.job_id for item in refused.submitted}
    rest = [index for index in range(len(order.tasks)) if index not in went]
    said = refused.failures[0] if refused.failures else "a limit"
    log.info(
        "the scheduler took %d job(s) and no more (%s): feeding the other %d as a sweep",
        len(went),
        said,
        len(rest),
    )
    tasks = [order.tasks[index] for index in rest]
    later = Order(tasks, order.resources, order.depends_on, order.remote_dir, order.options)
    sweep = Sweep(adapter, name, max(len(went), 1))
    sweep.add_order(later, options)
    if name is None:
        why = f"the scheduler took {len(went)} and no more: {said}"
        _announce(announce, sweep.name, len(rest), why)
    went.update(zip(rest, sweep.submit(later.remote_dir)))
    return [went[index] for index in range(len(order.tasks))]


def _parents(after: After, count: int, earlier: int) -> List[tuple]:
    """Each new task's parents (indexes of earlier tasks of the sweep)."""
    if after is None:
        return [()] * count
    if isinstance(after, int) and not isinstance(after, bool):
        each: List[Any] = [after] * count
    else:
        each = list(after)  # type: ignore[arg-type]
        if len(each) != count:
            raise ValueError(
                f"after has {len(each)} entries for {count} tasks: give one per task, "
                "or one index for all"
            )
    parents = []
    for entry in each:
        indexes = (entry,) if isinstance(entry, int) else tuple(entry)
        for index in indexes:
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < earlier:
                raise ValueError(
                    f"after names task {index!r}, which is not an earlier task of this sweep "
                    f"(0..{earlier - 1}): add parents first and pass the indexes add returned"
                )
        parents.append(indexes)
    return parents
