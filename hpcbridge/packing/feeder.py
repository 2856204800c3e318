"""Allocation packing, run: a named pack's tasks, as the job store has them, fed into its
allocations as plain Flux jobs; allocations renewed before their end and released once
idle (all of them when the pack ends, fails or is interrupted).  A new pack and one whose
feeder died go the same way: ``PackRun.load`` reads where every task and allocation is
(``store.packs``), then ``run`` feeds, recording each step as it goes."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..engine.adapter import SchedulerAdapter
from ..engine.feeding import LOOK_AGAIN, adopt_sending
from ..engine.submitting import Order, coerce_task
from ..errors import JobTimeoutError, SchedulerAdapterError
from ..model import JobState, JobStatus
from ..retrying import Deadline
from ..store.packs import PackBook, PackRecord
from .allocations import AllocationError, Allocations, Instance, ended_early
from .request import Pack, due_for_renewal, packed_task_time, room, split_resources, takes_more
from .settling import is_lost, lost_with_node, never_sent, settle_gone
from .state import Held, Standing, standing

log = logging.getLogger("hpcbridge")

#: the margin kept before an allocation's end when none is given (FluxAdapter's own)
DEFAULT_MARGIN = 60.0


class PackRun:
    """The pack recorded as ``record`` fed into its allocations (the rules: ``request``)."""

    def __init__(
        self,
        outer: SchedulerAdapter,
        record: PackRecord,
        book: PackBook,
        flux_options: Mapping[str, Any],
    ) -> None:
        """Checks the pack's terms (nothing read or held yet); ``flux_options`` go to each
        instance's adapter (``outer_time_margin``: the record's margin unless given)."""
        given, self.resources = split_resources(record.resources, outer.scheduler_name)
        pack = Pack.parse(record.spec)
        self.allocations = Allocations(outer, pack, record.flux_command, given)
        self.book, self.name = book, record.name
        self.flux_options = dict(flux_options)
        self.margin = float(self.flux_options.setdefault("outer_time_margin", record.margin))
        self.task_time = packed_task_time(
            outer.validate_resources(self.resources).time, pack, self.margin
        )
        self.jobs: List[Any] = []
        stands = Standing()  # until ``load``
        self.held, self.pending, self.finals = stands.held, stands.pending, stands.finals
        self.sent_again, self.made = stands.sent_again, stands.made
        #: how long the last allocation took from its request to a reachable instance
        self.lead = 0.0
        #: who cancelled this pack (``hpcbridge cancel NAME``), once seen
        self.cancelled_by: Optional[str] = None
        #: no allocation was ever asked for: ``run`` asks the pack's count at once
        self.fresh = True
        #: the outer scheduler is asked about the allocations at most once per its poll floor
        self._outer_every = outer.poll_floor
        self._outer_seen: Dict[str, JobStatus] = {}
        self._outer_asked = float("-inf")

    # -- where the pack stands, from the store ------------------------------------

    def load(self) -> None:
        """The pack as the store has it (``state.standing``); the tasks of an allocation
        released since were lost with it (``_lost``)."""
        tasks = self.book.tasks(self.name)
        self.jobs = [(t.script, list(t.arguments), dict(t.environment) or None) for t in tasks]
        recorded = self.book.allocations(self.name)
        self.fresh = not recorded
        stands = standing(tasks, recorded, time.time(), time.monotonic())
        self.held, self.pending, self.finals = stands.held, stands.pending, stands.finals
        self.sent_again, self.made = stands.sent_again, stands.made
        for gone in self.held:
            if gone.released and (gone.in_flight or gone.sending):
                self._lost(gone, "was released")
        log.info(
            "pack %s: %d task(s) ended, %d in %d allocation(s), %d to send",
            self.name,
            len(self.finals),
            sum(len(h.in_flight) + sum(map(len, h.sending.values())) for h in self._alive()),
            len(self._alive()),
            len(self.pending),
        )

    # -- the loop ----------------------------------------------------------------

    def _note(self, what: str, *args: Any) -> None:
        """Record one step of the pack (``PackBook.<what>(name, *args)``)."""
        getattr(self.book, what)(self.name, *args)

    def run(self, poll_interval: float, deadline: Deadline) -> List[JobStatus]:
        """Every task's final status, in the tasks' order (``load`` first)."""
        if self.fresh:
            for _ in range(self.allocations.pack.count):
                self._ask()
        beaten = float("-inf")
        while len(self.finals) < len(self.jobs):
            if time.monotonic() - beaten >= LOOK_AGAIN:  # as often as a sweep's feeder
                self._note("beat")
                beaten = time.monotonic()
            if self.cancelled():
                break
            self._reach()
            self._collect()
            self._feed()
            self._renew()
            self._release_idle()
            if len(self.finals) == len(self.jobs):
                break
            if deadline.expired:
                raise JobTimeoutError(
                    f"pack: {len(self.jobs) - len(self.finals)} task(s) unfinished after "
                    f"{deadline.seconds or 0:.0f} s; the allocations are released (run the "
                    "rest again)"
                )
            deadline.sleep(poll_interval)
        return [self.finals[index] for index in range(len(self.jobs))]

    def cancelled(self) -> bool:
        """Whether ``hpcbridge cancel NAME`` stopped this pack: then every task that has
        not ended ends CANCELLED - one its wrapper saw end as it ended, one never sent
        said so (its allocations are released with the rest)."""
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

    def _ended(self, finals: Mapping[int, JobStatus]) -> None:
        self.finals.update(finals)
        if finals:
            self._note("ended", finals)

    def release_all(self) -> None:
        """Release every allocation still held: the tasks still in one that its wrapper
        saw end are recorded so, the others are CANCELLED and back to waiting (``wait
        NAME`` sends them); allocations whose work was all done are recorded COMPLETED,
        released.  The pack is let go (another process may go on with it)."""
        left = [held for held in self.held if not held.released]
        done = len(self.finals) == len(self.jobs) and self.cancelled_by is None
        again = f": 'hpcbridge wait {self.name}' sends it again"
        for held in left:
            why = f"its allocation {held.job_id} was released before it ended{again}"
            settled = self._settle(held, why)
            self._ended({index: end for index, end in settled.items() if not is_lost(end)})
            back = [index for index in settled if index not in self.finals]
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
                self._lost(held, f"ended {status.state.value}")  # while no feeder watched
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
            self._recover(held, instance)
            ends = [self.allocations.pack.time - _since(status)]
            left = instance.time_left()
            if left is not None:
                ends.append(left)  # the instance's own expiration, where Flux has it
            held.ends_at = time.monotonic() + min(ends)
            self.lead = max(self.lead, time.monotonic() - held.asked_at)
            log.info("pack: allocation %s reached (%.0f s left)", held.job_id, held.time_left())

    def _collect(self) -> None:
        """Ends of the tasks in flight; those of an allocation that ended, or of a node
        lost from its instance, are lost."""
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
            ends = {
                flux_id: status for flux_id, status in statuses.items() if status.state.is_terminal
            }
            done = {}
            for flux_id, status in ends.items():
                index = held.in_flight.pop(flux_id)
                if lost_with_node(status):  # the allocation's other nodes go on
                    self._send_again(index, flux_id, f"allocation {held.job_id}: {status.reason}")
                    held.counted_at = float("-inf")  # its cores up, counted again at once
                else:
                    done[index] = status
            self._ended(done)
            if ended:
                self._lost(held, f"ended {allocations[held.job_id].state.value}")

    def _lost(self, held: Held, how: str) -> None:
        """The tasks left in an allocation that ``how`` (ended TIMEOUT, was released):
        those its wrapper saw end keep that end, the others are sent again once, and
        FAILED when lost twice; those it may never have had (``sending``) wait to be
        sent.  (Not when the pack was cancelled: that released it.)"""
        if self.cancelled():
            return
        held.released = True
        self._note("released", [held.job_id])
        settled = self._settle(held, f"lost with its allocation {held.job_id}, which {how}")
        self._ended({index: end for index, end in settled.items() if not is_lost(end)})
        for flux_id, index in held.in_flight.items():
            if index not in self.finals:
                self._send_again(index, flux_id, f"allocation {held.job_id} {how}")
        for indexes in held.sending.values():
            self.pending.extendleft(reversed(indexes))
            self._note("waiting", indexes)
        held.in_flight.clear()
        held.sending.clear()

    def _send_again(self, index: int, flux_id: str, why: str) -> None:
        """A task lost with its allocation or its node: sent again once, FAILED when lost
        twice."""
        if index in self.sent_again:
            self._ended({index: JobStatus(flux_id, JobState.FAILED, reason=f"lost twice: {why}")})
            return
        self.sent_again.add(index)
        self.pending.appendleft(index)
        self._note("waiting", [index], True)
        log.warning("pack: task %d (%s) lost (%s): sent again", index, flux_id, why)

    def _recover(self, held: Held, instance: Instance) -> None:
        """Tasks a feeder that stopped left ``sending`` into this allocation: adopted by
        their key where they went in, else back to waiting (``feeding.adopt_sending``)."""
        if not held.sending:
            return
        went, rest = adopt_sending(
            instance,
            held.sending,
            lambda indexes, token: self._order(instance, indexes, token),
            f"pack {self.name}",
            held.job_id,
        )
        held.in_flight.update((job_id, index) for index, job_id in went)
        if went:
            self._note("sent", dict(went))
        if rest:
            self.pending.extendleft(reversed(rest))
            self._note("waiting", rest)
        held.sending.clear()

    def _order(self, instance: Instance, indexes: Sequence[int], token: str = "") -> Order:
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
            if held.capacity_due(time.monotonic()):
                said = held.counted(held.instance.open().commands.capacity(), time.monotonic())
                if said:  # its brokers joined, or one left: what it is fed follows
                    log.info("pack: allocation %s: %s", held.job_id, said)
            count = min(room(held.cores, len(held.in_flight)), len(self.pending))
            if not count:
                continue
            part = [self.pending.popleft() for _ in range(count)]
            order = self._order(held.instance, part)
            self._note("sending", part, held.job_id, order.token, order.made.isoformat())
            held.sending[order.token] = part  # in transit: looked up by its key if stopped now
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


def _since(status: JobStatus) -> float:
    """Seconds since the allocation started (0 when its scheduler did not say)."""
    if status.start_time is None:
        return 0.0
    return max(time.time() - status.start_time.timestamp(), 0.0)
