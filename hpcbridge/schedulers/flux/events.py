"""Waiting woken by job events, for the native driver.

``ResultWaiter``: ``result_async`` futures on a handle of the waiter's own.

A fulfilled future carries the job's result (state, exit code, times): it is
kept in ``ended`` for the driver's next ``query``, which answers from it
instead of asking the broker again - a job's end reaches ``wait`` from the
event stream, with no status round trip after it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any, Collection, Dict, List, Optional, Set

from ...model import JobStatus
from .ids import parse_job_id
from .status import facts_from_jobinfo, status_from_facts

log = logging.getLogger("hpcbridge")


def run_reactor(handle: Any, timeout: float) -> bool:
    """Run ``handle``'s reactor until a callback stops it or ``timeout`` passes; False
    when the broker went away (no more wake-ups from this handle)."""
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
    """A ``driver.Waiter``: the pause between status rounds ends when a watched job ends.

    Owns its handle: a status query that resets the thread's handle after a
    lost connection must not pull it from under a running reactor.
    """

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
        """Whether this waiter will hear ``job_id`` end (open, connected, watching it)."""
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
        """Up to ``seconds``; the watched jobs that ended meanwhile.

        Never returns early without a reason: a waiter whose broker went away
        answers at once, and the UNKNOWN streak must still take its time.
        """
        started = time.monotonic()
        ended: Set[str] = set()
        if not self.broken:
            try:
                ended = self.wait(seconds)
            except Exception as exc:  # noqa: BLE001 - a lost connection: just sleep
                log.debug("flux: waiting for results failed (%s)", exc)
                self.broken = True
        if not ended:
            time.sleep(max(seconds - (time.monotonic() - started), 0))
        return ended

    def wait(self, timeout: float) -> Set[str]:
        """Run the reactor until a job ends or ``timeout`` passes; the ids that ended."""
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
