"""The journal waiter (``flux.journal``) on a stand-in for the bindings: the events of
a job followed from its submit give its final status; one followed midway is heard
but listed; the ids come back as the caller spelled them; who may read the journal;
the stream asks for no history and only the events it reads, and the backlog of
active jobs is read when it opens.

The real stream is tested on flux-core 0.88 by the native Flux integration cases.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any, List, Optional, Sequence

from hpcbridge.model import JobState
from hpcbridge.schedulers.flux.ids import canonical_job_id
from hpcbridge.schedulers.flux.journal import Journal, JournalWaiter, journal_usable
from hpcbridge.schedulers.flux.journal_events import BACKLOG_END_ID, EVENTS, request_payload

#: in a fake reactor's queue: the job manager's response that ends the backlog
BACKLOG_END = "backlog end"


class FakeHandle:
    """The broker's handle, and the journal stream on it: queued events are answered one a
    response, only those the stream asked for (``allow``), as the job manager does."""

    def __init__(self, owner: int) -> None:
        self.owner = owner
        #: the backlog (events, then its end), then live events; None: the stream's end
        self.queue: List[Any] = [BACKLOG_END]
        self.events: Optional[Sequence[str]] = None

    def attr_get(self, name: str) -> str:
        assert name == "security.owner"
        return str(self.owner)

    def open(self, flux_module: Any, handle: Any, events: Sequence[str]) -> FakeHandle:
        """The ``stream`` a ``Journal`` is given: this handle, asked for ``events``."""
        assert handle is self
        self.events = events
        return self

    def next(self, timeout: float) -> Optional[dict]:
        while self.queue:
            item = self.queue.pop(0)
            if item == BACKLOG_END:
                return {"id": BACKLOG_END_ID, "events": []}
            if item is None:
                raise EOFError("the journal stream ended")
            if self.events is not None and item.name not in self.events:
                continue
            entry = {"name": item.name, "timestamp": item.timestamp, "context": item.context}
            return {"id": item.jobid, "events": [entry]}
        return None

    def close(self) -> None:
        pass


def fake_flux(owner: int, with_journal: bool = True) -> Any:
    handle = FakeHandle(owner)
    job = SimpleNamespace(JournalConsumer=object) if with_journal else SimpleNamespace()
    return SimpleNamespace(Flux=lambda *args: handle, job=job, handle=handle)


def fake_journal(flux: Any, uri: Any, ended: dict, ours: set) -> Journal:
    return Journal(flux, uri, ended, ours, threading.Lock(), stream=flux.handle.open)


def event(job: int, name: str, stamp: float, **context: Any) -> Any:
    return SimpleNamespace(jobid=job, name=name, timestamp=stamp, context=context)


def life(job: int, status: int) -> List[Any]:
    return [
        event(job, "submit", 10.0, userid=0),
        event(job, "depend", 10.1),
        event(job, "priority", 10.2, priority=16),
        event(job, "alloc", 10.3),
        event(job, "start", 10.4),
        event(job, "finish", 11.0, status=status),
        event(job, "release", 11.1, final=True),
        event(job, "free", 11.2),
        event(job, "clean", 11.3),
    ]


def test_a_job_followed_from_its_submit_ends_with_its_own_events() -> None:
    flux = fake_flux(owner=0)
    ended: dict = {}
    job = canonical_job_id(1234567)
    journal = fake_journal(flux, "local:///x", ended, {job})
    waiter = JournalWaiter(journal, [job])
    flux.handle.queue += [event(999, "submit", 9.0)] + life(1234567, 3 << 8)
    assert waiter.pause(5.0) == {job}
    status = ended[job]
    assert status.state is JobState.FAILED and status.exit_code == 3
    assert status.start_time is not None and status.end_time is not None


def test_a_job_followed_midway_is_heard_but_left_to_a_listing() -> None:
    flux = fake_flux(owner=0)
    ended: dict = {}
    journal = fake_journal(flux, None, ended, set())
    waiter = JournalWaiter(journal, ["1234567"])  # as the caller spells it: decimal
    flux.handle.queue += life(1234567, 0)[-3:]  # its start went by before the stream
    assert waiter.pause(5.0) == {"1234567"}
    assert ended == {}  # no finish heard: the driver lists it instead


def test_the_id_comes_back_as_given_with_its_status() -> None:
    flux = fake_flux(owner=0)
    ended: dict = {}
    journal = fake_journal(flux, None, ended, {canonical_job_id(1234567)})
    waiter = JournalWaiter(journal, ["1234567"])
    flux.handle.queue += life(1234567, 0)
    assert waiter.pause(5.0) == {"1234567"}
    assert ended["1234567"].state is JobState.COMPLETED


def test_a_broken_stream_stops_listening() -> None:
    flux = fake_flux(owner=0)
    journal = fake_journal(flux, None, {}, set())
    waiter = JournalWaiter(journal, ["1234567"])
    flux.handle.queue.append(None)  # the stream's end: the broker went away
    assert waiter.pause(0.01) == set()
    assert not waiter.listening()


def test_who_may_read_the_journal() -> None:
    import os

    assert "0.68" in journal_usable(fake_flux(0, with_journal=False), fake_flux(0).handle)
    mine = fake_flux(os.getuid())
    assert journal_usable(mine, mine.handle) == ""
    other = fake_flux(os.getuid() + 1)
    assert "owned by uid" in journal_usable(other, other.handle)


def test_a_followed_job_is_answered_from_its_events_while_it_runs() -> None:
    flux = fake_flux(owner=0)
    job = canonical_job_id(1234567)
    journal = fake_journal(flux, None, {}, {job})
    assert journal.status(job) is None  # no event yet: listed instead
    flux.handle.queue += life(1234567, 0)[:5]  # submitted .. started
    journal.drain()
    status = journal.status(job)
    assert status is not None and status.state is JobState.RUNNING
    assert journal.status(canonical_job_id(42)) is None  # not followed


def test_the_stream_asks_for_active_jobs_and_the_events_it_reads_and_reads_their_backlog() -> None:
    flux = fake_flux(owner=0)
    job = canonical_job_id(1234567)
    flux.handle.queue[:0] = life(1234567, 0)[:5]  # active when the stream opens
    journal = fake_journal(flux, None, {}, {job})
    assert flux.handle.events == EVENTS
    assert request_payload(EVENTS) == {"full": False, "allow": dict.fromkeys(EVENTS, 1)}
    status = journal.status(job)  # no drain: the backlog was read at the open
    assert status is not None and status.state is JobState.RUNNING


def test_a_waiter_gathers_the_ends_close_behind_the_first_and_returns_once_all_have() -> None:
    flux = fake_flux(owner=0)
    jobs = [1234567, 1234568, 1234569]
    ours = {canonical_job_id(job) for job in jobs}
    journal = fake_journal(flux, None, {}, ours)
    waiter = JournalWaiter(journal, sorted(ours))
    flux.handle.queue += life(jobs[0], 0) + life(jobs[1], 0)
    assert waiter.pause(5.0) == {canonical_job_id(jobs[0]), canonical_job_id(jobs[1])}
    flux.handle.queue += life(jobs[2], 0)
    assert waiter.pause(60.0) == {canonical_job_id(jobs[2])}  # the last: at once


def test_a_job_ended_before_the_stream_opened_is_left_to_listings_until_one_finds_it() -> None:
    flux = fake_flux(owner=0)
    gone, live = canonical_job_id(1234567), canonical_job_id(7654321)
    journal = fake_journal(flux, None, {}, {gone, live})
    waiter = JournalWaiter(journal, [gone, live])
    flux.handle.queue += life(7654321, 0)[:1]  # the live one's submit: followed from here
    assert waiter.pause(0.01) == set()
    # The other ended before: no event of it will come, so the waiter does not say it
    # hears every end (the loop lists at the notice interval) until a listing finds it.
    assert waiter.hears(live) and not waiter.hears(gone)
    assert not waiter.listening()
    waiter.settled([gone])
    assert waiter.listening() and waiter.hears(gone)
