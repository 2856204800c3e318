"""What a Flux job journal says, read: the request for one stream of every job's events, and
the facts of the jobs it follows (``JournalBook``) - a job followed from its ``submit`` event
is heard ended at its ``clean`` event, with its final status; one followed midway is only
heard.  Pure (the stream itself is read by ``journal``).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Sequence, Set, Tuple

from ...model import JobStatus
from .ids import canonical_job_id
from .status import JobFacts, apply_event, settle, status_from_facts

TOPIC = "job-manager.events-journal"
#: the events that change a job's ``JobFacts`` (pending is pending; alloc says running)
EVENTS = ("submit", "dependency-add", "alloc", "exception", "finish", "clean")
#: the id on the response that ends the backlog: FLUX_JOBID_ANY as a signed 64-bit integer
BACKLOG_END_ID = -1


def request_payload(events: Sequence[str]) -> Dict[str, Any]:
    return {"full": False, "allow": dict.fromkeys(events, 1)}


class JournalBook:
    """The facts of the jobs one journal follows (``ours`` and those watched), response by
    response; the final statuses heard go into ``ended`` (shared with the driver)."""

    def __init__(self, ended: Dict[str, JobStatus], ours: Set[str]) -> None:
        self.ended = ended
        self._ours = ours
        self._watched: Set[str] = set()
        #: the followed jobs' facts so far, and those whose submit event was heard
        self._facts: Dict[str, JobFacts] = {}
        self._whole: Set[str] = set()
        self._heard: Set[str] = set()
        #: the canonical id of each active job's integer id in the stream
        self._keys: Dict[int, str] = {}
        self.backlog_read = False

    def response(self, response: Dict[str, Any]) -> None:
        job = response.get("id")
        entries = response.get("events") or []
        if job == BACKLOG_END_ID and not entries:
            self.backlog_read = True
        if not isinstance(job, int):
            return
        for entry in entries:
            self._event(job, entry["name"], entry["timestamp"], entry.get("context") or {})

    def follow(self, job_ids: Sequence[str]) -> None:
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
        """Whether the stream hears (or heard) this job's end: active when it opened, or since."""
        return key in self._whole or key in self.ended

    def status(self, job_id: str) -> Optional[JobStatus]:
        """What its events say so far of a job followed from its submit, else ``None``."""
        key = canonical_job_id(job_id)
        facts = self._facts.get(key)
        if facts is None or key not in self._whole:
            return None
        return status_from_facts(facts).with_(job_id=job_id)

    def heard(self) -> bool:
        return bool(self._heard)

    def take_heard(self) -> Set[str]:
        """The jobs heard ending since the last call."""
        heard, self._heard = self._heard, set()
        return heard


class Relisting:
    """The last listed state of each unfinished job and when (the caller's clock): answered
    again for ``seconds`` instead of a listing, for a job a waiter will hear end."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._listed: Dict[str, Tuple[float, JobStatus]] = {}

    def recent(self, job_id: str, now: float, hears: bool) -> Optional[JobStatus]:
        listed = self._listed.get(job_id)
        if listed is None or now - listed[0] >= self.seconds or not hears:
            return None
        return listed[1]

    def forget(self, job_ids: Iterable[str]) -> None:
        for job_id in job_ids:
            self._listed.pop(job_id, None)

    def note(self, fresh: Dict[str, JobStatus], now: float) -> Dict[str, JobStatus]:
        """``fresh``, kept until it is older than ``seconds`` (an ended job's is forgotten)."""
        for job_id, found in fresh.items():
            if found.is_terminal:
                self._listed.pop(job_id, None)
            else:
                self._listed[job_id] = (now, found)
        return fresh
