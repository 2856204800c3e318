"""Allocation packing, run: a sweep's tasks fed into a pack's allocations as plain Flux
jobs, allocations renewed before their end and released once idle (all of them when the
sweep ends, fails or is interrupted); every pack is recorded under its name as it goes
(``store.packs``), so that another process can go on with it or stop it."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from datetime import datetime, timezone
from typing import Any, Deque, Dict, List, Mapping, Optional, Sequence

from .allocations import AllocationError, Allocations, ended_early
from .engine.adapter import SchedulerAdapter
from .engine.feeding import LOOK_AGAIN, adopt
from .engine.jobscript import new_token
from .engine.submitting import Order, coerce_task, reach_text
from .engine.tracking import JobTracker
from .errors import JobTimeoutError, ResourceError, SchedulerAdapterError
from .model import FROM_FILE, INSTANCE_GONE, JobState, JobStatus
from .packing import Pack, due_for_renewal, room, split_resources, takes_more
from .schedulers.flux.adapter import FluxAdapter
from .store.packs import ENDED, SENDING, SENT, PackBook, PackRecord, PackTask

log = logging.getLogger("hpcbridge")

#: the margin kept before an allocation's end when none is given (FluxAdapter's own)
DEFAULT_MARGIN = 60.0


@dataclasses.dataclass
class Held:
    """One allocation as the feeding sees it."""

    job_id: str
    asked_at: float  # monotonic
    instance: Optional[FluxAdapter] = None
    #: when it ends (monotonic), from its instance's expiration or its start + time
    ends_at: Optional[float] = None
    #: the cores its instance schedules on (0: not read yet - its R is written once the
    #: instance has found its resources)
    cores: int = 0
    #: the tasks in it: Flux job id -> task index
    in_flight: Dict[str, int] = dataclasses.field(default_factory=dict)
    #: a resumed pack's tasks a dead feeder was sending into it: token -> task indexes
    sending: Dict[str, List[int]] = dataclasses.field(default_factory=dict)
    #: a newer allocation was asked for to take over from this one
    renewed: bool = False
    released: bool = False

    def time_left(self) -> float:
        return (self.ends_at - time.monotonic()) if self.ends_at is not None else 0.0


class PackRun:
    """A sweep fed into a pack's allocations (the rules: ``packing``)."""

    def __init__(
        self,
        allocations: Allocations,
        jobs: Sequence[Any],
        resources: Optional[Mapping[str, Any]],
        flux_options: Mapping[str, Any],
        book: Optional[PackBook] = None,
        name: Optional[str] = None,
    ) -> None:
        self.allocations = allocations
        self.jobs = list(jobs)
        self.resources = resources
        #: where a named pack is recorded at each step (``None``: not recorded)
        self.book, self.name = book, name
        task_time = allocations.outer.validate_resources(resources).time
        if not task_time or task_time == float("inf"):
            raise ResourceError(
                "time",
                "a packed task needs a time limit, to be placed only where it ends before "
                "its allocation does; give one, e.g. --time 10m",
            )
        self.task_time = float(task_time)
        self.flux_options = dict(flux_options)
        self.margin = float(self.flux_options.setdefault("outer_time_margin", DEFAULT_MARGIN))
        if not takes_more(allocations.pack.time, self.task_time, self.margin):
            raise ResourceError(
                "time",
                f"a task of {self.task_time:.0f} s does not fit an allocation of "
                f"{allocations.pack.time:.0f} s: it takes two task times and a "
                f"{self.margin:.0f} s margin; ask for a longer --pack time=",
            )
        self.pending: Deque[int] = deque(range(len(self.jobs)))
        self.finals: Dict[int, JobStatus] = {}
        self.sent_again: set = set()
        self.held: List[Held] = []
        #: when each token's order was first made (a resumed pack's ``sending`` tasks)
        self.made: Dict[str, datetime] = {}
        #: how long the last allocation took from its request to a reachable instance
        self.lead = 0.0
        #: who cancelled this named pack (``hpcbridge cancel NAME``), once seen
        self.cancelled_by: Optional[str] = None
        #: the outer scheduler is asked about the allocations at most once per its poll floor
        self._outer_every = allocations.outer.poll_floor
        self._outer_seen: Dict[str, JobStatus] = {}
        self._outer_asked = float("-inf")

    # -- the loop ----------------------------------------------------------------

    def _note(self, what: str, *args: Any) -> None:
        """Record one step of a named pack (``PackBook.<what>(name, *args)``)."""
        if self.book is not None and self.name is not None:
            getattr(self.book, what)(self.name, *args)

    def record(self, pack: PackRecord) -> None:
        """Record this pack and its tasks under ``pack.name`` (before anything is held)."""
        assert self.book is not None
        repo = self.allocations.outer.settings.remote_repo
        tasks = [coerce_task(item, repo) for item in self.jobs]
        self.book.create(
            pack,
            [
                PackTask(index, task.script, tuple(task.arguments), dict(task.environment or {}))
                for index, task in enumerate(tasks)
            ],
        )

    def run(
        self, poll_interval: float, timeout: Optional[float], resumed: bool = False
    ) -> List[JobStatus]:
        """Every task's final status, in the tasks' order."""
        deadline = time.monotonic() + timeout if timeout is not None else None
        if not resumed:
            for _ in range(self.allocations.pack.count):
                self._ask()
        beaten = float("-inf")
        while len(self.finals) < len(self.jobs):
            if time.monotonic() - beaten >= LOOK_AGAIN:  # as often as a sweep's feeder
                self._note("beat")
                beaten = time.monotonic()
            if self._cancelled():
                break
            self._reach()
            self._collect()
            self._feed()
            self._renew()
            self._release_idle()
            if len(self.finals) == len(self.jobs):
                break
            if deadline is not None and time.monotonic() > deadline:
                raise JobTimeoutError(
                    f"pack: {len(self.jobs) - len(self.finals)} task(s) unfinished after "
                    f"{timeout:.0f} s; the allocations are released (run the rest again)"
                )
            time.sleep(poll_interval)
        return [self.finals[index] for index in range(len(self.jobs))]

    def _cancelled(self) -> bool:
        """Whether ``hpcbridge cancel NAME`` stopped this pack: then every task that has
        not ended ends CANCELLED - one its wrapper saw end as it ended, one never sent
        said so (its allocations are released with the rest)."""
        if self.book is None or self.name is None:
            return False
        if self.cancelled_by is not None:
            return True
        who = self.book.cancelled_by(self.name)
        if who is None:
            return False
        self.cancelled_by = who
        why = f"pack {self.name} cancelled by {who}"
        before = set(self.finals)
        for held in self.held:
            self.finals.update(self._settle(held, why))
        for index in range(len(self.jobs)):
            self.finals.setdefault(index, never_sent(index, why))
        self._note("ended", {i: s for i, s in self.finals.items() if i not in before})
        self.pending.clear()
        for held in self.held:
            held.in_flight.clear()
            held.sending.clear()
        log.warning("pack %s was cancelled by %s", self.name, who)
        return True

    def _settle(self, held: Held, why: str) -> Dict[int, JobStatus]:
        """The tasks in flight in ``held``, whose instance is going or gone, settled
        (``settle_gone``: their wrapper's word, else CANCELLED for ``why``), by index."""
        if not held.in_flight:
            return {}
        settled = settle_gone(self.allocations.outer, list(held.in_flight), why)
        return {index: settled[flux_id] for flux_id, index in held.in_flight.items()}

    def release_all(self) -> None:
        """Release every allocation still held: the tasks still in one that its wrapper
        saw end are recorded so, the others are CANCELLED and - of a named pack - back
        to waiting (``wait NAME`` sends them); allocations whose work was all done are
        recorded COMPLETED, released."""
        left = [held for held in self.held if not held.released]
        done = len(self.finals) == len(self.jobs) and self.cancelled_by is None
        again = f": 'hpcbridge wait {self.name}' sends it again" if self.name else ""
        for held in left:
            why = f"its allocation {held.job_id} was released before it ended{again}"
            settled = self._settle(held, why)
            ended = {index: end for index, end in settled.items() if not is_lost(end)}
            self.finals.update(ended)
            self._note("ended", ended)
            back = [index for index in settled if index not in ended]
            self._note("waiting", back + [i for part in held.sending.values() for i in part])
            held.in_flight.clear()
            held.sending.clear()
        self.allocations.release([held.job_id for held in left], done=done)
        self._note("released", [held.job_id for held in left])
        self._note("let_go")
        for held in self.held:
            held.released = True
            if held.instance is not None:
                held.instance.close()

    # -- each round ----------------------------------------------------------------

    def _ask(self) -> None:
        job_id = self.allocations.ask()
        self._note("asked", job_id, time.time())
        self.held.append(Held(job_id, time.monotonic()))

    def _alive(self) -> List[Held]:
        return [held for held in self.held if not held.released]

    def _allocation_states(self) -> Dict[str, JobStatus]:
        """The allocations' statuses: one question for all of them, asked again
        only once the site's poll floor has passed (Flux is asked every round)."""
        alive = [held.job_id for held in self._alive()]
        unseen = any(job_id not in self._outer_seen for job_id in alive)
        if unseen or time.monotonic() - self._outer_asked >= self._outer_every:
            self._outer_seen = self.allocations.outer.get_job_statuses(alive) if alive else {}
            self._outer_asked = time.monotonic()
        return self._outer_seen

    def _reach(self) -> None:
        """Allocations that run get their instance; one that ended first is an error."""
        waiting = [held for held in self._alive() if held.instance is None]
        if not waiting:
            return
        statuses = self._allocation_states()
        for held in waiting:
            status = statuses[held.job_id]
            if status.state.is_terminal and (held.in_flight or held.sending):
                self._lost(held, status)  # a resumed pack's allocation ended meanwhile
                continue
            if status.state.is_terminal:
                raise AllocationError(ended_early(held.job_id, status))
            if status.state is not JobState.RUNNING:
                continue
            try:
                instance = self.allocations.instance(held.job_id, **self.flux_options)
            except SchedulerAdapterError:
                continue  # its broker is still starting: next round
            held.instance = instance
            self._recover(held)
            ends = [self.allocations.pack.time - _since(status)]
            left = instance.time_left()
            if left is not None:
                ends.append(left)  # the instance's own expiration, where Flux has it
            held.ends_at = time.monotonic() + min(ends)
            self.lead = max(self.lead, time.monotonic() - held.asked_at)
            log.info("pack: allocation %s reached (%.0f s left)", held.job_id, held.time_left())

    def _collect(self) -> None:
        """Ends of the tasks in flight; those of an allocation that ended are lost."""
        busy = [held for held in self._alive() if held.in_flight]
        if not busy:
            return
        allocations = self._allocation_states()
        for held in busy:
            ended = allocations[held.job_id].state.is_terminal
            assert held.instance is not None
            try:
                statuses = held.instance.get_job_statuses(list(held.in_flight))
            except SchedulerAdapterError:
                if not ended:
                    raise
                statuses = {}
            ended_now = {
                held.in_flight.pop(flux_id): status
                for flux_id, status in statuses.items()
                if status.state.is_terminal
            }
            self.finals.update(ended_now)
            if ended_now:
                self._note("ended", ended_now)
            if ended:
                self._lost(held, allocations[held.job_id])

    def _lost(self, held: Held, status: JobStatus) -> None:
        """The tasks left in an allocation that ended: sent again once, else FAILED;
        those it may never have had (``sending``) wait to be sent.  (Not when the pack
        was cancelled: that released it.)"""
        if self._cancelled():
            return
        held.released = True
        self._note("released", [held.job_id])
        why = f"lost with its allocation {held.job_id}, which ended {status.state.value}"
        settled = self._settle(held, why)
        ended = {index: end for index, end in settled.items() if not is_lost(end)}
        self.finals.update(ended)
        self._note("ended", ended)
        failed: Dict[int, JobStatus] = {}
        for flux_id, index in held.in_flight.items():
            if index in ended:
                continue
            if index in self.sent_again:
                failed[index] = JobStatus(
                    flux_id,
                    JobState.FAILED,
                    reason=f"lost twice: allocation {held.job_id} ended {status.state.value}",
                )
                continue
            self.sent_again.add(index)
            self.pending.appendleft(index)
            self._note("waiting", [index], True)
            log.warning(
                "pack: task %d (%s) lost with allocation %s (ended %s): sent again",
                index,
                flux_id,
                held.job_id,
                status.state.value,
            )
        self.finals.update(failed)
        if failed:
            self._note("ended", failed)
        for indexes in held.sending.values():
            self.pending.extendleft(reversed(indexes))
            self._note("waiting", indexes)
        held.in_flight.clear()
        held.sending.clear()

    def _recover(self, held: Held) -> None:
        """Tasks a dead feeder left ``sending`` into this allocation: adopted by their
        key where they went in, else back to waiting (see ``Submission.find_sent``)."""
        assert held.instance is not None
        for token, indexes in held.sending.items():
            went = adopt(held.instance, self._order(held.instance, indexes, token))
            if went:
                ids = [item.job_id for item in went]
                held.in_flight.update(zip(ids, indexes))
                self._note("sent", dict(zip(indexes, ids)))
            rest = indexes[len(went) :]
            if rest:
                self.pending.extendleft(reversed(rest))
                self._note("waiting", rest)
            log.warning(
                "pack %s: %d task(s) a dead feeder was sending found in %s, %d sent again",
                self.name,
                len(went),
                held.job_id,
                len(rest),
            )
        held.sending.clear()

    def _order(self, instance: FluxAdapter, indexes: Sequence[int], token: str = "") -> Order:
        """The order of these tasks for ``instance`` (as first sent, when ``token`` is)."""
        repo = instance.settings.remote_repo
        order = instance.order(
            lambda: [coerce_task(self.jobs[index], repo) for index in indexes],
            self.resources,
            None,
            None,
            {},
        )
        if not token:
            return order
        made = self.made.get(token)
        return dataclasses.replace(order, token=token, made=made or order.made)

    def _feed(self) -> None:
        for held in self._alive():
            if not self.pending or held.instance is None:
                continue
            if not takes_more(held.time_left(), self.task_time, self.margin):
                continue
            if not held.cores:
                held.cores = held.instance.open().commands.cores() or 0
            count = min(room(held.cores, len(held.in_flight)), len(self.pending))
            if not count:
                continue
            part = [self.pending.popleft() for _ in range(count)]
            order = self._order(held.instance, part)
            self._note("sending", part, held.job_id, order.token, order.made.isoformat())
            held.sending[order.token] = part  # in transit: back to waiting if stopped now
            ids = held.instance.submission().run(order)
            del held.sending[order.token]
            held.in_flight.update(zip(ids, part))
            self._note("sent", dict(zip(part, ids)))

    def _renew(self) -> None:
        """While tasks are left to send: a new allocation for each one about to stop
        taking tasks, and one when none is left that takes them or is starting."""
        if not self.pending:
            return
        for held in self._alive():
            if held.renewed or held.instance is None:
                continue
            if due_for_renewal(held.time_left(), self.task_time, self.margin, self.lead):
                held.renewed = True
                self._note("renewed", held.job_id)
                log.info(
                    "pack: allocation %s has %.0f s left: asking for the next one",
                    held.job_id,
                    held.time_left(),
                )
                self._ask()
        if not any(
            held.instance is None or takes_more(held.time_left(), self.task_time, self.margin)
            for held in self._alive()
        ):
            log.info(
                "pack: no allocation takes the %d task(s) left: asking for one", len(self.pending)
            )
            self._ask()

    def _release_idle(self) -> None:
        """Hand back an allocation that holds no task and will take none."""
        for held in self._alive():
            if held.instance is None or held.in_flight:
                continue
            if self.pending and takes_more(held.time_left(), self.task_time, self.margin):
                continue
            self.allocations.release([held.job_id], done=True)
            self._note("released", [held.job_id])
            held.released = True
            held.instance.close()


def settle_gone(outer: SchedulerAdapter, flux_ids: Sequence[str], why: str) -> Dict[str, JobStatus]:
    """The Flux jobs ``flux_ids`` of a pack of ``outer``, whose instance is gone (its
    allocation released or ended), settled in the job store without asking anyone:
    one whose wrapper wrote its exit code ended so, one already recorded as ended
    stays so, the others end CANCELLED for ``why`` (``lost``); each one's status."""
    host = outer.host_label
    files = outer.executor
    JobTracker(outer.store, "flux", host, files.read_text, files.stat_many).ended_by_files(
        list(flux_ids)
    )
    known = outer.store.statuses("flux", host, list(flux_ids))
    now = datetime.now(timezone.utc)
    settled: Dict[str, JobStatus] = {}
    for flux_id in flux_ids:
        status = known.get(flux_id)
        if status is not None and status.is_terminal:
            if status.native_state == FROM_FILE:  # no scheduler is left to confirm it
                status = status.with_(native_state=INSTANCE_GONE)
            settled[flux_id] = status
            continue
        settled[flux_id] = JobStatus(
            flux_id,
            JobState.CANCELLED,
            start_time=status.start_time if status is not None else None,
            end_time=now,
            native_state=INSTANCE_GONE,
            reason=why,
        )
    changed = [s for i, s in settled.items() if i in known and s != known[i]]
    outer.store.update_statuses("flux", host, changed)
    return settled


def is_lost(status: JobStatus) -> bool:
    """Whether ``status`` is that of a task lost with its instance (``settle_gone``)."""
    return status.state is JobState.CANCELLED and status.native_state == INSTANCE_GONE


def never_sent(index: int, why: str) -> JobStatus:
    """The end of a task of a stopped pack that was not sent (or not again, after its job
    was lost with its allocation): it has no job id."""
    return JobStatus("", JobState.CANCELLED, reason=f"not sent (task {index}): {why}")


def _since(status: JobStatus) -> float:
    """Seconds since the allocation started (0 when its scheduler did not say)."""
    if status.start_time is None:
        return 0.0
    return max(time.time() - status.start_time.timestamp(), 0.0)


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
    ``packing.ALLOCATION_KEYS`` and ``outer``'s own options go to the allocations, the rest
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
    given, task_resources = split_resources(resources, outer.scheduler_name)
    book = PackBook(outer.store)
    feeding = PackRun(
        Allocations(outer, pack, flux_command, given),
        jobs,
        task_resources,
        flux_options,
        book,
        name,
    )
    feeding.record(
        PackRecord(
            name,
            pack.text(),
            outer.scheduler_name,
            outer.executor.kind,
            outer.host_label,
            outer.instance_label,
            reach_text(outer.executor),
            outer.validate_resources(resources).as_request(),
            flux_command,
            feeding.margin,
            len(feeding.jobs),
            "",
        )
    )
    try:
        return feeding.run(poll_interval if poll_interval is not None else 1.0, timeout)
    finally:
        feeding.release_all()


def resume_packed(
    outer: SchedulerAdapter,
    name: str,
    poll_interval: Optional[float] = None,
    timeout: Optional[float] = None,
) -> List[JobStatus]:
    """Go on with the pack recorded as ``name`` whose feeder died (``outer`` reaches where
    it was recorded): its allocations reached again, the tasks a dead feeder was sending
    looked up by their keys, the rest fed - none sent twice.  ``ConcurrentFeedError``
    while its feeder is alive."""
    book = PackBook(outer.store)
    record = book.get(name)
    if record is None:
        raise KeyError(name)
    poll = poll_interval if poll_interval is not None else 1.0
    deadline = time.monotonic() + timeout if timeout is not None else None
    feeder = book.take(name)
    if feeder is not None:
        log.info("pack %s is being fed by %s: following it", name, feeder)
    while feeder is not None:  # its feeder lives: follow the record until it ends or dies
        tasks = book.tasks(name)
        if all(task.final is not None for task in tasks):
            return [task.final for task in tasks if task.final is not None]
        if deadline is not None and time.monotonic() > deadline:
            raise JobTimeoutError(f"pack {name}: still fed by {feeder} after {timeout:.0f} s")
        time.sleep(max(poll, 1.0))
        feeder = book.take(name)
    tasks = book.tasks(name)
    jobs = [(task.script, list(task.arguments), dict(task.environment) or None) for task in tasks]
    options = {"outer_time_margin": record.margin}
    given, task_resources = split_resources(record.resources, outer.scheduler_name)
    allocations = Allocations(outer, Pack.parse(record.spec), record.flux_command, given)
    feeding = PackRun(allocations, jobs, task_resources, options, book, name)
    now_wall, now = time.time(), time.monotonic()
    held = {}
    for allocation in book.allocations(name):
        if not allocation.released:
            held[allocation.job_id] = Held(
                allocation.job_id, now - (now_wall - allocation.asked), renewed=allocation.renewed
            )
    feeding.held = list(held.values())
    feeding.pending.clear()
    lost: List[int] = []
    for task in tasks:
        if task.again:
            feeding.sent_again.add(task.index)
        if task.state == ENDED and task.final is not None:
            feeding.finals[task.index] = task.final
        elif task.state in (SENT, SENDING) and task.allocation in held:
            place = held[task.allocation]
            if task.state == SENT and task.job_id:
                place.in_flight[task.job_id] = task.index
            else:
                place.sending.setdefault(task.token or "", []).append(task.index)
                if task.token and task.made:
                    feeding.made[task.token] = datetime.fromisoformat(task.made)
        elif task.state in (SENT, SENDING):
            lost.append(task.index)  # its allocation was released: it went with it
        else:
            feeding.pending.append(task.index)
    ids = [str(tasks[index].job_id) for index in lost if tasks[index].job_id]
    gone = settle_gone(outer, ids, "lost with its allocation, released")
    for index in lost:
        end = gone.get(tasks[index].job_id or "")
        if end is not None and not is_lost(end):  # its wrapper saw it end: not sent again
            feeding.finals[index] = end
            book.ended(name, {index: end})
        elif index in feeding.sent_again:
            feeding.finals[index] = JobStatus(
                tasks[index].job_id or "", JobState.FAILED, reason="lost twice with its allocation"
            )
            book.ended(name, {index: feeding.finals[index]})
        else:
            feeding.sent_again.add(index)
            feeding.pending.appendleft(index)
            book.waiting(name, [index], True)
    log.info(
        "pack %s resumed: %d task(s) ended, %d in %d allocation(s), %d to send",
        name,
        len(feeding.finals),
        sum(len(h.in_flight) + sum(map(len, h.sending.values())) for h in feeding.held),
        len(feeding.held),
        len(feeding.pending),
    )
    left = deadline - time.monotonic() if deadline is not None else None
    try:
        return feeding.run(poll, left, resumed=True)
    finally:
        feeding.release_all()


def cancel_packed(outer: SchedulerAdapter, name: str) -> str:
    """Stop the pack recorded as ``name``: its feeder (any process) sends nothing more
    and its allocations are released, the tasks in them with them (with no live feeder,
    the tasks are settled here); what was done, counted before."""
    book = PackBook(outer.store)
    tasks = book.tasks(name)
    held = [a.job_id for a in book.allocations(name) if not a.released]
    running = [t for t in tasks if t.state in (SENT, SENDING) and t.allocation in held]
    ended = [t for t in tasks if t.state == ENDED]
    book.cancel(name)
    if held:
        outer.cancel_jobs(held)
        book.released(name, held)
    if book.take(name) is None:  # no live feeder: what it would do on seeing the cancel
        try:
            why = f"pack {name} cancelled by {book.cancelled_by(name)}"
            ids = [str(t.job_id) for t in running if t.state == SENT and t.job_id]
            gone = settle_gone(outer, ids, why)
            finals = {t.index: gone[str(t.job_id)] for t in running if str(t.job_id) in gone}
            for task in tasks:
                if task.state != ENDED and task.index not in finals:
                    finals[task.index] = never_sent(task.index, why)
            book.ended(name, finals)
        finally:
            book.let_go(name)
    unsent = len(tasks) - len(running) - len(ended)
    return (
        f"pack {name} cancelled: {len(held)} allocation(s) released; {len(running)} task(s) "
        f"in them cancelled, {unsent} not sent (and now never will be), {len(ended)} had "
        "already ended"
    )
