"""One event stream for all of a native driver's jobs: the job manager's journal.

Which waiter a wait gets (``NativeDriver.waiter``):

- flux-core 0.68 and later, on an instance this user owns (an allocation, a
  batch job, an instance started inside a Slurm job): ``JournalWaiter`` - one
  ``job-manager.events-journal`` stream of every job's primary events (what
  ``flux.job.JournalConsumer`` reads; read here by ``journal_stream``, at a tenth
  of its cost a response), opened at the driver's first wait and kept until the
  driver closes: a sweep's many waits cost one stream, not a watch per job per wait;
- older releases (0.49, 0.26: no ``JournalConsumer``) and instances of another
  owner (the system instance: the journal is the owner's): ``events.ResultWaiter``,
  a ``result_async`` future per job.

The stream begins with the jobs active when it opens, each with its events so far
(read before the first status round), then goes on live; no inactive history (an
allocation's thousands of past jobs are not sent again), and only the events read
here (``EVENTS``).  A job that ended before the stream opened is listed instead,
and while one is unfinished the waiter does not say it hears every end, so the wait
loop lists at the notice interval, not at the slow pace kept for a stream that hears
them all (a sweep's first jobs can end before its first wait).
A job is heard ended at its ``clean`` event - inactive, its resources freed -
with its state, exit code and times from its own events (``eventlog.apply_event``).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Collection, Dict, Optional, Sequence, Set, Tuple

from ...model import JobStatus
from .eventlog import apply_event, settle
from .ids import canonical_job_id
from .journal_stream import BACKLOG_END_ID, JournalStream
from .status import JobFacts, status_from_facts

log = logging.getLogger("hpcbridge")

#: the events asked for: those that change what a job's ``JobFacts`` say.  Not
#: validate, depend, priority or start: every pending state is pending, and the alloc
#: that follows them says running: four events a job, not eight.
EVENTS = ("submit", "dependency-add", "alloc", "exception", "finish", "clean")
#: seconds to read the backlog of the jobs active when the stream opens
BACKLOG_TIMEOUT = 30.0
#: seconds a waiter that heard an end goes on listening for the next ones
GATHER = 0.1


def journal_usable(flux_module: Any, handle: Any) -> str:
    """Why the journal cannot be read here ("" when it can)."""
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
) -> Tuple[Optional[Journal], str]:
    """The journal where it can be read, else ``None`` and why (a watch per job then)."""
    try:
        why = journal_usable(flux_module, handle)
        if not why:
            return Journal(flux_module, uri, ended, ours), ""
    except Exception as exc:  # noqa: BLE001 - per-job watches instead
        why = f"{type(exc).__name__}: {exc}"
    log.debug("flux: no journal (%s): a watch per job", why)
    return None, why


class Journal:
    """The journal stream of one instance, and the facts of the jobs it follows: the
    driver's own (``ours``, canonical ids) and those a waiter watches."""

    def __init__(
        self,
        flux_module: Any,
        uri: Optional[str],
        ended: Dict[str, JobStatus],
        ours: Set[str],
        stream: Callable[[Any, Any, Sequence[str]], Any] = JournalStream,
    ) -> None:
        # A handle of the stream's own: reading it runs a reactor of its own.
        self.handle = flux_module.Flux(uri) if uri else flux_module.Flux()
        #: final statuses heard, for the driver's next ``query`` (shared with it)
        self.ended = ended
        self._ours = ours
        self._watched: Set[str] = set()
        #: the followed jobs' facts so far, and those whose submit event was heard
        self._facts: Dict[str, JobFacts] = {}
        self._whole: Set[str] = set()
        self._heard: Set[str] = set()
        #: the canonical id of each active job's integer id in the stream
        self._keys: Dict[int, str] = {}
        self.broken = False
        self._backlog_read = False
        self.stream = stream(flux_module, self.handle, EVENTS)
        # The active jobs' events, before anyone asks: their states come from them.
        self._read(BACKLOG_TIMEOUT, lambda: self._backlog_read)

    def _read(self, timeout: float, enough: Callable[[], bool]) -> None:
        """Take the stream's responses until ``enough()`` and no other has come, or
        ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while not self.broken:
            done = enough()
            try:
                response = self.stream.next(0.0 if done else deadline - time.monotonic())
            except (EOFError, OSError) as exc:  # the broker went away, or the stream failed
                log.debug("flux journal stopped: %s", exc)
                self.broken = True
                return
            if response is not None:
                self._response(response)
            elif done or time.monotonic() >= deadline:
                return

    def _response(self, response: Dict[str, Any]) -> None:
        job = response.get("id")
        entries = response.get("events") or []
        if job == BACKLOG_END_ID and not entries:
            self._backlog_read = True
        if not isinstance(job, int):
            return
        for entry in entries:
            self._event(job, entry["name"], entry["timestamp"], entry.get("context") or {})

    def follow(self, job_ids: Sequence[str]) -> None:
        """Follow these jobs too (a waiter's: perhaps submitted elsewhere)."""
        self._watched.update(canonical_job_id(job_id) for job_id in job_ids)

    def _event(self, job: int, name: str, timestamp: float, context: Dict[str, Any]) -> None:
        # Each job's four or so events: its id encoded once, forgotten at its end.
        key = self._keys.pop(job, None) if name == "clean" else None
        if key is None:
            key = self._keys.get(job) or canonical_job_id(int(job))
            if name != "clean":
                self._keys[job] = key
        facts = self._facts.get(key)
        if facts is None:
            if key not in self._ours and key not in self._watched:
                return  # another job's
            facts = self._facts[key] = JobFacts(id=key)
        if name == "submit":
            self._whole.add(key)
        apply_event(facts, name, timestamp, context)
        if name != "clean":
            return
        del self._facts[key]
        if key in self._whole:
            self.ended[key] = status_from_facts(settle(facts))
        # A job without its submit event (not expected: the backlog sends each active
        # job's events from the first) misses events: its end is listed.
        self._whole.discard(key)
        self._watched.discard(key)
        self._heard.add(key)

    def follows(self, key: str) -> bool:
        """Whether the stream hears this job's end (or has heard it): it was active when
        the stream opened, or submitted since.  A job that ended before is listed."""
        return key in self._whole or key in self.ended

    def status(self, job_id: str) -> Optional[JobStatus]:
        """What its events say so far of a job followed from its submit (its state while
        it is not done: pending, running); ``None`` for any other."""
        key = canonical_job_id(job_id)
        facts = self._facts.get(key)
        if facts is None or key not in self._whole:
            return None
        return status_from_facts(facts).with_(job_id=job_id)

    def drain(self) -> None:
        """Take the events already come in (no wait): ``status`` is up to date after it."""
        self._read(0.0, lambda: True)

    def wait(self, timeout: float) -> Set[str]:
        """Read until a followed job is heard ending (and the events come in behind it
        are taken) or ``timeout`` passes; the jobs heard ending."""
        self._read(timeout, lambda: bool(self._heard))
        heard, self._heard = self._heard, set()
        return heard

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
        """Not while a job it does not follow is unfinished: the loop's full rounds, at
        the notice interval, list it (or find its exit-code file) meanwhile, and say
        when it ended (``settled``)."""
        if self._unfollowed:
            self._unfollowed = {key for key in self._unfollowed if not self.journal.follows(key)}
        return self._open() and not self._unfollowed

    def settled(self, job_ids: Collection[str]) -> None:
        """Known ended, heard or not (one that ended before the stream opened: a listing
        or its exit-code file said so): no longer waited for."""
        for job_id in job_ids:
            key = canonical_job_id(job_id)
            self._unfollowed.discard(key)
            self._left.discard(key)

    def _open(self) -> bool:
        return not (self.closed or self.journal.broken)

    def pause(self, seconds: float) -> Set[str]:
        """Until a watched job ends, then ``GATHER`` seconds more for the ends close
        behind it (one wait tick for a few, not for each); at once when all have."""
        deadline = time.monotonic() + seconds
        heard: Set[str] = set()
        while self._open() and time.monotonic() < deadline:
            for key in self.journal.wait(deadline - time.monotonic()):
                if key in self._left:
                    self._left.discard(key)
                    heard.add(self._as_given(key))
            if heard and not self._left:
                return heard
            if heard:
                deadline = min(deadline, time.monotonic() + GATHER)
        if not heard:
            time.sleep(max(deadline - time.monotonic(), 0))
        return heard

    def _as_given(self, key: str) -> str:
        given = self._watched[key]
        if given != key and key in self.journal.ended:
            self.journal.ended[given] = self.journal.ended.pop(key)
        return given

    def close(self) -> None:
        self.closed = True  # the journal stays open for the driver's next wait
