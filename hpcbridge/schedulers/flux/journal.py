"""Waiting woken by job ends (native driver): one ``job-manager.events-journal`` stream for all
jobs (0.68+, an instance this user owns), read with libflux's own calls at a tenth of
``JournalConsumer``'s cost; else a ``result_async`` watch per job (``ResultWaiter``).
"""

from __future__ import annotations

import errno
import json
import logging
import os
from dataclasses import replace
from typing import (
    Any,
    Callable,
    Collection,
    Dict,
    List,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
    Union,
)

from ...model import JobStatus
from ...retrying import Deadline, retry
from .ids import canonical_job_id, parse_job_id
from .journal_events import EVENTS, TOPIC, JournalBook, request_payload
from .status import facts_from_jobinfo, status_from_facts

log = logging.getLogger("hpcbridge")

#: seconds to read the backlog of the jobs active when the stream opens
BACKLOG_TIMEOUT = 30.0
#: seconds a waiter that heard an end goes on listening for the next ones
GATHER = 0.1


def _none(found: Set[str]) -> bool:
    """Nothing heard yet: a waiter's pause goes on."""
    return not found


#: the longest one C wait: a signal (Ctrl-C) is acted on between two, not inside one
SLICE = 0.25


class ReadLock(Protocol):
    """What ``threading.Lock`` does for a journal: one thread at a time reads its stream."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


class JournalStream:
    """One open journal request on a handle of its own (the wait runs its own reactor)."""

    def __init__(self, flux_module: Any, handle: Any, events: Sequence[str]) -> None:
        inner = flux_module.core.inner
        self._ffi, self._lib = inner.ffi, inner.lib
        self._handle = handle
        constants = flux_module.constants
        self._noresponse = constants.FLUX_RPC_NORESPONSE
        # The Python RPC object owns the C future (destroyed with it).
        self._rpc = handle.rpc(TOPIC, request_payload(events), 0, constants.FLUX_RPC_STREAMING)
        self._future = self._rpc.pimpl.handle
        self._text = self._ffi.new("char *[1]")

    def next(self, timeout: float) -> Optional[Dict[str, Any]]:
        """The next response, ``None`` after ``timeout``; ``EOFError`` at its end, else OSError."""
        ffi, lib = self._ffi, self._lib
        deadline = Deadline(timeout)
        # flux_future_wait_for with a timeout of 0 does not read the socket at all.
        while lib.flux_future_wait_for(self._future, min(max(timeout, 1e-4), SLICE)) < 0:
            if ffi.errno != errno.ETIMEDOUT:
                raise OSError(ffi.errno, "the journal stream failed")
            timeout = deadline.remaining()
            if timeout <= 0:
                return None
        if lib.flux_rpc_get(self._future, self._text) < 0:
            if ffi.errno == errno.ENODATA:
                raise EOFError("the journal stream ended")
            raise OSError(ffi.errno, "the journal stream failed")
        text = ffi.string(self._text[0]) if self._text[0] != ffi.NULL else b"{}"
        lib.flux_future_reset(self._future)
        return dict(json.loads(text))

    def close(self) -> None:
        matchtag = self._lib.flux_rpc_get_matchtag(self._future)
        self._handle.rpc(TOPIC + "-cancel", {"matchtag": matchtag}, 0, self._noresponse)


def journal_usable(flux_module: Any, handle: Any) -> str:
    # The bindings' consumer came with the job manager's journal RPC.
    if not hasattr(flux_module.job, "JournalConsumer"):
        return "no job-manager journal (flux.job.JournalConsumer) before flux-core 0.68"
    try:
        owner = int(handle.attr_get("security.owner"))
    except Exception as exc:  # noqa: BLE001 - an attribute this release lacks
        return f"the instance's owner is not known ({exc})"
    if owner != os.getuid():
        return f"the instance is owned by uid {owner}: its journal is the owner's"
    return ""


def open_journal(
    flux_module: Any,
    handle: Any,
    uri: Optional[str],
    ended: Dict[str, JobStatus],
    ours: Set[str],
    reading: ReadLock,
) -> Tuple[Optional[Journal], str]:
    try:
        why = journal_usable(flux_module, handle)
        if not why:
            return Journal(flux_module, uri, ended, ours, reading), ""
    except Exception as exc:  # noqa: BLE001 - per-job watches instead
        why = f"{type(exc).__name__}: {exc}"
    log.debug("flux: no journal (%s): a watch per job", why)
    return None, why


class Journal:
    """One instance's journal, read into a ``JournalBook`` of the jobs it follows.

    It begins with the active jobs' events so far, then goes on live; a job that ended
    before it opened is listed instead."""

    def __init__(
        self,
        flux_module: Any,
        uri: Optional[str],
        ended: Dict[str, JobStatus],
        ours: Set[str],
        reading: ReadLock,
        stream: Callable[[Any, Any, Sequence[str]], Any] = JournalStream,
    ) -> None:
        # A handle of the stream's own: reading it runs a reactor of its own.
        self.handle = flux_module.Flux(uri) if uri else flux_module.Flux()
        self.book = JournalBook(ended, ours)
        #: final statuses heard, for the driver's next ``query`` (shared with it)
        self.ended = ended
        self.broken = False
        #: held by the one thread reading the stream (the driver's threads share it)
        self._reading = reading
        self.stream = stream(flux_module, self.handle, EVENTS)
        # The active jobs' events, before anyone asks: their states come from them.
        self._read(BACKLOG_TIMEOUT, lambda: self.book.backlog_read)

    def follow(self, job_ids: Sequence[str]) -> None:
        self.book.follow(job_ids)

    def follows(self, key: str) -> bool:
        return self.book.follows(key)

    def status(self, job_id: str) -> Optional[JobStatus]:
        return self.book.status(job_id)

    def _read(self, timeout: float, enough: Callable[[], bool]) -> None:
        deadline = Deadline(timeout)
        while not self.broken:
            done = enough()
            try:
                response = self.stream.next(0.0 if done else deadline.remaining())
            except (EOFError, OSError) as exc:  # the broker went away, or the stream failed
                log.debug("flux journal stopped: %s", exc)
                self.broken = True
                return
            if response is not None:
                self.book.response(response)
            elif done or deadline.expired:
                return

    def drain(self) -> None:
        # A handle's reactor runs in one thread at a time (libev aborts otherwise): while
        # a wait reads the stream in another (a future's follower), it reads into this book.
        if self._reading.acquire(blocking=False):
            try:
                self._read(0.0, lambda: True)
            finally:
                self._reading.release()

    def wait(self, timeout: float) -> Set[str]:
        """The jobs heard ending, read until one is or ``timeout`` passes."""
        deadline = Deadline(timeout)
        if self._reading.acquire(timeout=timeout):
            try:
                self._read(deadline.remaining(), self.book.heard)
            finally:
                self._reading.release()
        return self.book.take_heard()

    def close(self) -> None:
        self.broken = True
        try:
            self.stream.close()
        except Exception:  # noqa: BLE001, S110 - a dead handle may not take the cancel
            pass


class JournalWaiter:
    """A ``driver.Waiter`` on the driver's journal: the ids of its jobs heard ending."""

    def __init__(self, journal: Journal, job_ids: Sequence[str]) -> None:
        self.journal = journal
        #: canonical id -> the id as the caller spells it
        self._watched = {canonical_job_id(job_id): job_id for job_id in job_ids}
        #: those not heard ending yet
        self._left = set(self._watched)
        journal.follow(list(self._watched))
        #: those the stream does not follow (yet): ended before it opened (their end is
        #: listed), or their submit event not read yet
        self._unfollowed = {key for key in self._left if not journal.follows(key)}
        self.closed = False

    def hears(self, job_id: str) -> bool:
        key = canonical_job_id(job_id)
        followed = key not in self._unfollowed or self.journal.follows(key)
        return self._open() and key in self._watched and followed

    def listening(self) -> bool:
        """Not while a job it does not follow is unfinished (the loop lists it meanwhile)."""
        if self._unfollowed:
            self._unfollowed = {key for key in self._unfollowed if not self.journal.follows(key)}
        return self._open() and not self._unfollowed

    def settled(self, job_ids: Collection[str]) -> None:
        """Known ended (a listing or its exit-code file said so): no longer waited for."""
        for job_id in job_ids:
            key = canonical_job_id(job_id)
            self._unfollowed.discard(key)
            self._left.discard(key)

    def _open(self) -> bool:
        return not (self.closed or self.journal.broken)

    def pause(self, seconds: float) -> Set[str]:
        """Until a watched job ends, then ``GATHER`` s more for the ends close behind it;
        none heard, the stream gone: the rest of the pause without it (the one retry loop
        waits it out)."""
        deadline = Deadline(seconds)
        return retry(lambda: self._listen(deadline), budget=seconds, again=_none, pause=seconds)

    def _listen(self, deadline: Deadline) -> Set[str]:
        """The watched jobs heard ending by ``deadline`` (none at once: the stream is gone)."""
        heard: Set[str] = set()
        while self._open() and not deadline.expired:
            for key in self.journal.wait(deadline.remaining()):
                if key in self._left:
                    self._left.discard(key)
                    heard.add(self._as_given(key))
            if heard and not self._left:
                return heard
            if heard:
                deadline = Deadline(deadline.cap(GATHER))
        return heard

    def _as_given(self, key: str) -> str:
        given = self._watched[key]
        if given != key and key in self.journal.ended:
            self.journal.ended[given] = self.journal.ended.pop(key)
        return given

    def close(self) -> None:
        self.closed = True  # the journal stays open for the driver's next wait


def run_reactor(handle: Any, timeout: float) -> bool:
    """Run ``handle``'s reactor until stopped or ``timeout``; False when the broker went away."""
    timer = handle.timer_watcher_create(max(timeout, 0.0), lambda *_args: handle.reactor_stop())
    timer.start()
    try:
        handle.reactor_run()
    except OSError as exc:
        log.debug("flux reactor stopped: %s", exc)
        return False
    finally:
        timer.stop()
        timer.destroy()
    return True


class ResultWaiter:
    """A ``driver.Waiter`` on ``result_async`` futures, on a handle of its own (a query that
    resets the thread's handle must not pull it from under a running reactor)."""

    def __init__(
        self,
        flux_module: Any,
        uri: Optional[str],
        job_ids: List[str],
        ended: Optional[Dict[str, JobStatus]] = None,
    ) -> None:
        self.flux = flux_module
        #: the final status of each job whose result arrived (shared with the driver)
        self.ended: Dict[str, JobStatus] = ended if ended is not None else {}
        self.handle = flux_module.Flux(uri) if uri else flux_module.Flux()
        self._done: Set[str] = set()
        self._futures: List[Any] = []
        #: the broker went away: no more wake-ups, plain sleeping from now on
        self.broken = False
        self.closed = False
        self._watched = set(job_ids)
        for job_id in job_ids:
            future = flux_module.job.result_async(self.handle, parse_job_id(job_id))
            future.then(self._fulfilled, job_id)
            self._futures.append(future)

    def hears(self, job_id: str) -> bool:
        return self.listening() and job_id in self._watched

    def listening(self) -> bool:
        return not (self.closed or self.broken)

    def settled(self, job_ids: Collection[str]) -> None:
        """Nothing to note: a watch hears even a job that ended before it began."""

    def _fulfilled(self, future: Any, job_id: str) -> None:
        self._done.add(job_id)
        try:
            # The result's JobInfo has no state: a job with a result is INACTIVE.
            facts = replace(facts_from_jobinfo(future.get_info()), state="INACTIVE")
            self.ended[job_id] = status_from_facts(facts).with_(job_id=job_id)
        except Exception as exc:  # noqa: BLE001 - the next status round asks instead
            log.debug("flux: cannot read the result of %s: %s", job_id, exc)
        self.handle.reactor_stop()

    def pause(self, seconds: float) -> Set[str]:
        """Up to ``seconds`` (never early without an end); the watched jobs that ended.
        None ended: the rest of the pause asleep (the one retry loop waits it out)."""
        deadline = Deadline(seconds)
        return retry(lambda: self._ended(deadline), budget=seconds, again=_none, pause=seconds)

    def _ended(self, deadline: Deadline) -> Set[str]:
        """The watched jobs that ended by ``deadline``; none at once, the broker gone."""
        if self.broken or deadline.expired:
            return set()
        try:
            return self.wait(deadline.remaining())
        except Exception as exc:  # noqa: BLE001 - a lost connection: just sleep
            log.debug("flux: waiting for results failed (%s)", exc)
            self.broken = True
            return set()

    def wait(self, timeout: float) -> Set[str]:
        if not self._done and not self.broken and not run_reactor(self.handle, timeout):
            self.broken = True  # a callback may have said so already
        done, self._done = self._done, set()
        return done

    def close(self) -> None:
        self.closed = True
        self._futures = []
        try:
            self.handle.close()
        except Exception:  # noqa: BLE001, S110 - a dead handle may not close cleanly
            pass


def make_waiter(
    flux_module: Any,
    uri: Optional[str],
    journal: Optional[Journal],
    job_ids: Sequence[str],
    ended: Dict[str, JobStatus],
) -> Optional[Union[JournalWaiter, ResultWaiter]]:
    """A waiter on the journal where it is open, else on result watches; ``None``: sleep."""
    if journal is not None:
        return JournalWaiter(journal, list(job_ids))
    try:
        return ResultWaiter(flux_module, uri, list(job_ids), ended)
    except Exception as exc:  # noqa: BLE001 - fall back to sleeping
        log.debug("flux: cannot watch job results (%s); polling", exc)
        return None
