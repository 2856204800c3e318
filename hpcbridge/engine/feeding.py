"""Feeding a sweep: at most ``cap`` jobs queued (``max_queued``, else ``queue_limit()``), a
run of one step's tasks as one submission, a task with parents alone (``afterok``); one
feeder per sweep (a lease); a ``LimitRefusedError`` holds the rest back until an end."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from typing import Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, TypeVar

from ..errors import (
    JobSubmissionError,
    JobTimeoutError,
    LimitRefusedError,
    SchedulerAdapterError,
    SubmissionUncertainError,
)
from ..model import JobState, JobStatus
from ..resources import Resources
from ..retrying import Deadline
from ..store.leases import Book
from ..store.sweeps import FED, GIVEN_UP, SENDING, SENT, WAITING, SweepBook, SweepRecord, SweepTask
from .driver import PartialSubmissionError, Submitted
from .jobscript import TaskSpec, staged_basenames
from .service import SubmissionService
from .submitting import Order, Submission, batches
from .wait_plan import WaitPlan

log = logging.getLogger("hpcbridge")

#: the most seconds one wait for an end lasts before the feeder looks again (and beats)
LOOK_AGAIN = 30.0

ProgressCallback = Callable[[Dict[str, int]], None]


class SweepCancelled(Exception):
    """The sweep was cancelled (``hpcbridge cancel SWEEP``) while being fed."""


class Feeder:
    """Sends one sweep's tasks through its adapter; see the module docstring."""

    def __init__(self, adapter: SubmissionService, book: SweepBook, sweep: SweepRecord) -> None:
        self.adapter = adapter
        self.book = book
        self.sweep = sweep
        self.tasks: List[SweepTask] = book.tasks(sweep.name)
        self.by_index = {task.index: task for task in self.tasks}
        #: one file name per script in the sweep's one folder
        self.script_names = staged_basenames([task.script for task in self.tasks])
        self._position = {task.index: at for at, task in enumerate(self.tasks)}
        #: every task before this position is sent or never will be: a fill starts here
        self._first_waiting = 0
        self._unsent = sum(task.state in (WAITING, SENDING) for task in self.tasks)
        #: the sweep's jobs not known to have ended
        self.unfinished: Dict[str, None] = {}
        #: ids of jobs that ended, and whether each COMPLETED
        self.ended: Dict[str, bool] = {}
        self.cap = sweep.max_queued or adapter.open().driver.queue_limit()
        #: the scheduler refused more for its own cap: wait for an end before trying again
        self.held = False

    def run(self, on_progress: Optional[ProgressCallback] = None) -> None:
        """Feed until every task is sent (or will never be); then the sweep is ``fed``."""
        self._recover()
        self._note_unfinished()
        if self.cap:
            log.info("sweep %s: at most %d job(s) queued at once", self.sweep.name, self.cap)
        while True:
            self._check_not_cancelled()
            self.book.beat(self.sweep.name)
            self._fill()
            if on_progress is not None:
                on_progress(self.counts())
            if self._advance() == len(self.tasks):
                break  # nothing waits
            if not self.unfinished and not self.held:
                # nothing queued, nothing sendable: what waits has a parent never sent
                waiting = [task for task in self.tasks if task.state == WAITING]
                self._never(waiting, "a task it runs after was never submitted")
                continue
            self._wait_for_an_end()
        self.book.release(self.sweep.name, FED)

    def counts(self) -> Dict[str, int]:
        """Tasks not sent, jobs unfinished, jobs ended (COMPLETED or not) - from memory."""
        done = sum(self.ended.values())
        return {
            "total": len(self.tasks),
            "unsent": self._unsent,
            "queued": len(self.unfinished),
            "completed": done,
            "failed": len(self.ended) - done,
        }

    def _check_not_cancelled(self) -> None:
        """``SweepCancelled`` when the sweep was cancelled meanwhile, cancelling the jobs
        sent after the canceller looked."""
        current = self.book.get(self.sweep.name)
        if current is None or current.state != GIVEN_UP:
            return
        records = self.adapter.store.get_many(
            self.adapter.scheduler_name, self.adapter.host_label, list(self.unfinished)
        )
        missed = [i for i in self.unfinished if i in records and not records[i].cancel_requested]
        if missed:
            try:
                self.adapter.cancel_jobs(missed)
            except SchedulerAdapterError as exc:
                log.warning("sweep %s: cannot cancel %s: %s", self.sweep.name, missed, exc)
        raise SweepCancelled(f"sweep {self.sweep.name} was cancelled")

    def _note_unfinished(self) -> None:
        """Which sent jobs still count, by their recorded states."""
        ids = [task.job_id for task in self.tasks if task.state == SENT and task.job_id]
        recorded = self.adapter.store.statuses(
            self.adapter.scheduler_name, self.adapter.host_label, [i for i in ids if i]
        )
        for job_id in ids:
            status = recorded.get(job_id)
            if status is not None and status.is_terminal:
                self.ended[job_id] = status.state is JobState.COMPLETED
            else:
                self.unfinished[job_id] = None

    def _wait_for_an_end(self) -> None:
        if not self.unfinished:  # held by the cluster's cap with none of ours queued
            interval = self.adapter.settings.poll_interval or self.adapter.default_poll_interval
            pause = max(interval, self.adapter.poll_floor)
            Deadline(pause).sleep(pause)
            self.held = False
            return
        try:
            # Not the exit-code file: a job counts against the cap while it completes.
            plan = WaitPlan(timeout=LOOK_AGAIN, enough=1, files=False)
            ended = self.adapter.following().wait_all(list(self.unfinished), plan)
        except JobTimeoutError:
            return  # none ended within LOOK_AGAIN: look again (and beat)
        for job_id, status in ended.items():
            self.unfinished.pop(job_id, None)
            self.ended[job_id] = status.state is JobState.COMPLETED
        self.held = False

    def _fill(self) -> None:
        """Send ready tasks while there is room."""
        if self.held:
            return
        room: Optional[int] = (self.cap - len(self.unfinished)) if self.cap else None
        group: List[SweepTask] = []

        def send(tasks: List[SweepTask]) -> None:
            nonlocal room
            if tasks:
                self._send_group(tasks)
                room = None if room is None else room - len(tasks)

        for at in range(self._advance(), len(self.tasks)):  # no copy of the rest
            task = self.tasks[at]
            if self.held or (room is not None and room - len(group) <= 0):
                break
            if task.state != WAITING or not self._parents_sent(task):
                continue
            if task.after:  # its own submission, afterok its parents' ids
                send(group)
                group = []
                if not self.held:
                    send([task])
                continue
            if group and group[-1].step != task.step:
                send(group)
                group = []
            group.append(task)
        if not self.held:
            send(group)

    def _advance(self) -> int:
        """The position of the first task still waiting (``len(tasks)``: none)."""
        while (
            self._first_waiting < len(self.tasks)
            and self.tasks[self._first_waiting].state != WAITING
        ):
            self._first_waiting += 1
        return self._first_waiting

    def _waiting_again(self, tasks: Sequence[SweepTask]) -> None:
        """These go back to waiting (held back, or never went in): a fill sees them."""
        self.book.mark_waiting(self.sweep.name, [task.index for task in tasks])
        for task in tasks:
            task.state, task.token = WAITING, None
            self._first_waiting = min(self._first_waiting, self._position[task.index])

    def _parents_sent(self, task: SweepTask) -> bool:
        return all(self.by_index[parent].state == SENT for parent in task.after)

    def _send_group(self, group: Sequence[SweepTask]) -> int:
        """Send one run of tasks as one order; how many went in."""
        if not group or self.held:
            return 0
        order = self._order(group)
        indexes, made = [task.index for task in group], order.made.isoformat()
        if not self.book.mark_sending(self.sweep.name, indexes, order.token, made):
            self._check_not_cancelled()
            return 0
        for task in group:
            task.state, task.token = SENDING, order.token
        try:
            ids = self.adapter.submission().run(order, self._known(order.depends_on))
        except LimitRefusedError as exc:
            return self._held_back(group, group, str(exc))
        except PartialSubmissionError as exc:
            # By the tasks' indexes: not always the first ones went in.
            went = {item.index: item.job_id for item in exc.submitted}
            self._sent([group[i] for i in sorted(went)], [went[i] for i in sorted(went)])
            rest = [task for i, task in enumerate(group) if i not in went]
            if exc.limited:
                return self._held_back(group, rest, "; ".join(exc.failures))
            self._never(rest, "; ".join(exc.failures))
            return len(went)
        except SubmissionUncertainError:
            raise  # left "sending": the next feeder looks it up by its key
        except JobSubmissionError as exc:
            self._never(group, str(exc))
            return 0
        self._sent(group, ids)
        self._check_not_cancelled()  # cancelled while these went in: send no more
        return len(ids)

    def _known(self, parents: Sequence[str]) -> Dict[str, JobStatus]:
        """The sweep's own parents as recorded (no scheduler asked): the store's states."""
        ours = [job_id for job_id in parents if job_id in self.unfinished or job_id in self.ended]
        if not ours:
            return {}
        return self.adapter.store.statuses(
            self.adapter.scheduler_name, self.adapter.host_label, ours
        )

    def _held_back(self, group: Sequence[SweepTask], rest: Sequence[SweepTask], why: str) -> int:
        """``rest`` of ``group`` was refused for the scheduler's cap: it waits for an end,
        and the cap becomes what it took (half the group when none); how many went in."""
        self._waiting_again(rest)
        took = len(self.unfinished) or max(1, len(group) // 2)
        self.cap = min(self.cap, took) if self.cap else took
        if not self.held:
            log.info(
                "sweep %s: the scheduler takes no more jobs for now (%s); holding %d back "
                "until some end, at most %d queued from now on",
                self.sweep.name,
                why,
                len(rest),
                self.cap,
            )
        self.held = True
        return len(group) - len(rest)

    def _sent(self, group: Sequence[SweepTask], ids: Sequence[str]) -> None:
        self.book.mark_sent(self.sweep.name, {t.index: i for t, i in zip(group, ids)})
        for task, job_id in zip(group, ids):
            task.state, task.job_id = SENT, job_id
            self.unfinished[job_id] = None
        self._unsent -= len(ids)

    def _never(self, tasks: Sequence[SweepTask], why: str) -> None:
        if not tasks:
            return
        log.error("sweep %s: %d task(s) refused: %s", self.sweep.name, len(tasks), why)
        self.book.mark_never(self.sweep.name, {task.index: why for task in tasks})
        for task in tasks:
            task.state, task.note = "cancelled", why
        self._unsent -= len(tasks)

    def _order(self, group: Sequence[SweepTask], token: Optional[str] = None) -> Order:
        step = self.sweep.steps[group[0].step]
        parents = [self.by_index[p].job_id or "" for task in group for p in task.after]
        specs = [TaskSpec(t.script, t.arguments, t.environment) for t in group]
        order = self.adapter.order(
            lambda: specs,
            Resources.from_mapping(step.resources),  # as validated when added
            [*step.depends_on, *parents],
            self.sweep.folder,
            step.options,
        )
        order = replace(order, script_names=self.script_names)
        if token is None:
            return order
        made = datetime.fromisoformat(group[0].made) if group[0].made else order.made
        return replace(order, token=token, made=made)  # the order as it was first sent

    def _recover(self) -> None:
        """Tasks a dead feeder left ``sending``: adopted by their key, or sent again."""
        runs: Dict[str, List[SweepTask]] = {}
        for task in self.tasks:
            if task.state == SENDING and task.token:
                runs.setdefault(task.token, []).append(task)
        went, rest = adopt_sending(
            self.adapter,
            runs,
            lambda group, token: self._order(group, token),
            f"sweep {self.sweep.name}",
            f"the {self.adapter.scheduler_name} queue",
        )
        if went:
            self._sent([task for task, _ in went], [job_id for _, job_id in went])
        if rest:
            self._waiting_again(rest)


T = TypeVar("T")


class Sends(Protocol):
    """A scheduler that jobs are sent through (a ``SubmissionService``): what finding a
    dead feeder's sending needs of it, and the base of what a pack's feeder needs of an
    allocation's instance (``packing.allocations.Instance``)."""

    def submission(self) -> Submission:
        """A submission through the open session's driver, recorded where this scheduler
        records: it plans, stages, sends and records an ``Order``'s jobs."""
        ...


def adopt_sending(
    service: Sends,
    runs: Mapping[str, Sequence[T]],
    order_of: Callable[[Sequence[T], str], Order],
    what: str,
    where: str,
) -> Tuple[List[Tuple[T, str]], List[T]]:
    """Tasks a feeder that stopped left ``sending``, by the token of the order each run
    went in (``order_of(run, token)``: that order as first sent): those that went in, each
    with its job id - found by the order's key and recorded here (``adopt``) - and those
    that never did, to send again; none is sent twice.  Sweeps and packs alike."""
    went: List[Tuple[T, str]] = []
    rest: List[T] = []
    for token, run in runs.items():
        found = adopt(service, order_of(run, token))
        went.extend(zip(run, [item.job_id for item in found]))
        rest.extend(run[len(found) :])
    if runs:
        log.warning(
            "%s: %d task(s) a dead feeder was sending found in %s, %d sent again",
            what,
            len(went),
            where,
            len(rest),
        )
    return went, rest


def adopt(service: Sends, order: Order) -> List[Submitted]:
    """The jobs of ``order`` (as a dead feeder first sent it) found by their key and
    recorded here; none when it never went in."""
    submission = service.submission()
    found = _find_sent(submission, order) or []
    if found:
        _record_found(submission, order, found)
    return found


def _find_sent(submission: Submission, order: Order) -> Optional[List[Submitted]]:
    """The jobs of ``order`` (as first sent) that went in, found by their keys, in task
    order; ``None`` when none did (a sender died before hearing its ids)."""
    driver = submission.driver
    found: List[Submitted] = []
    made = order.made.timestamp()
    for batch, _ in batches(order, submission.stager, driver.max_batch()):
        part = driver.find_submitted(driver.plan(batch), made)
        if not part:
            break
        found.extend(part)
    return found or None


def _record_found(submission: Submission, order: Order, found: Sequence[Submitted]) -> None:
    """Record the jobs ``_find_sent`` found, each with its task."""
    start = 0
    for batch, chunk in batches(order, submission.stager, submission.driver.max_batch()):
        mine = found[start : start + batch.count]
        if mine:
            submission.record(mine, batch, chunk)
        start += batch.count


def take_or_follow(book: Book, name: str, follow: Callable[[str], bool], what: str) -> bool:
    """Become the feeder of ``name`` (a sweep's or a pack's lease): ``True`` once this
    process holds it; while another live process does, ``follow(holder)`` a while, again
    and again - ``False`` as soon as that says nothing is left to feed."""
    holder = book.take(name)
    if holder is not None:
        log.info("%s is being fed by %s: following it", what, holder)
    while holder is not None:
        if follow(holder):
            return False
        holder = book.take(name)
    return True
