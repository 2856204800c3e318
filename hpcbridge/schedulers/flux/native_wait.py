"""Waiting woken by job ends: ``result_async`` futures on a handle of the waiter's own."""

from __future__ import annotations

import logging
import time
from typing import Any, List, Optional, Set

from .ids import parse_job_id

log = logging.getLogger("hpcbridge")


class ResultWaiter:
    """A ``driver.Waiter``: the pause between status rounds ends when a watched job ends.

    Owns its handle: a status query that resets the thread's handle after a
    lost connection must not pull it from under a running reactor.
    """

    def __init__(self, flux_module: Any, uri: Optional[str], job_ids: List[str]) -> None:
        self.flux = flux_module
        self.handle = flux_module.Flux(uri) if uri else flux_module.Flux()
        self._done: Set[str] = set()
        self._futures: List[Any] = []
        #: the broker went away: no more wake-ups, plain sleeping from now on
        self.broken = False
        for job_id in job_ids:
            future = flux_module.job.result_async(self.handle, parse_job_id(job_id))
            future.then(self._fulfilled, job_id)
            self._futures.append(future)

    def _fulfilled(self, future: Any, job_id: str) -> None:
        self._done.add(job_id)
        self.handle.reactor_stop()

    def pause(self, seconds: float) -> bool:
        """Up to ``seconds``; True when a watched job ended meanwhile.

        Never returns early without a reason: a waiter whose broker went away
        answers at once, and the UNKNOWN streak must still take its time.
        """
        started = time.monotonic()
        woke = False
        if not self.broken:
            try:
                woke = bool(self.wait(seconds))
            except Exception as exc:  # noqa: BLE001 - a lost connection: just sleep
                log.debug("flux: waiting for results failed (%s)", exc)
                self.broken = True
        if not woke:
            time.sleep(max(seconds - (time.monotonic() - started), 0))
        return woke

    def wait(self, timeout: float) -> Set[str]:
        """Run the reactor until a job ends or ``timeout`` passes; the ids that ended."""
        if not self._done and not self.broken:
            timer = self.handle.timer_watcher_create(
                max(timeout, 0.0), lambda *_args: self.handle.reactor_stop()
            )
            timer.start()
            try:
                self.handle.reactor_run()
            except OSError as exc:
                # The broker went away: no more wake-ups from this handle.
                log.debug("flux reactor stopped: %s", exc)
                self.broken = True
            finally:
                timer.stop()
                timer.destroy()
        done, self._done = self._done, set()
        return done

    def close(self) -> None:
        self._futures = []
        try:
            self.handle.close()
        except Exception:  # noqa: BLE001, S110 - a dead handle may not close cleanly
            pass
