"""Following an adapter's jobs once its session is open: status (driver -> shared poller
-> tracker -> store), waiting (``waiting``), logs and cancels."""

from __future__ import annotations

import logging
from typing import Dict, List, Optional

from ..errors import JobNotFoundError
from ..model import JobStatus
from ..store.jobs import JobStore
from .driver import SchedulerDriver
from .observation import Observation
from .polling import PollBoard, Poller
from .tracking import JobTracker, ask
from .waiting import ProgressCallback, StatusCallback, WaitPlan, wait_for_all

log = logging.getLogger("hpcbridge")


class Following:
    """The status, wait, log and cancel paths of one adapter's jobs."""

    def __init__(
        self,
        driver: SchedulerDriver,
        tracker: JobTracker,
        store: JobStore,
        *,
        poll_interval: float,
        poll_floor: float,
        poll_target: str,
        unknown_limit: int,
    ) -> None:
        self.driver = driver
        self.tracker = tracker
        self.store = store
        self.scheduler_name = tracker.scheduler_name
        self.unknown_limit = unknown_limit
        # A driver woken by job events asks its own broker, cheaply: no shared poll.
        board = None if driver.capabilities.events else PollBoard(store)
        interval = 0.0 if driver.capabilities.events else poll_interval
        floor = 0.0 if driver.capabilities.events else poll_floor
        self.poller = Poller(self._ask, interval, board=board, target=poll_target, floor=floor)

    def statuses(self, ids: List[str]) -> Dict[str, Observation]:
        """Every id's status, a fresh answer waited for, a file's end confirmed."""
        return self.tracker.refresh(
            ids, lambda asked: self.poller.ask(asked, patient=True), confirm=True
        )

    def _ask(self, job_ids: List[str]) -> Dict[str, Observation]:
        """The driver's answer for every id; an unreachable scheduler is UNKNOWN for all."""
        return ask(lambda: self.driver, self.scheduler_name, job_ids)

    def wait_all(
        self,
        ids: List[str],
        poll_interval: Optional[float],
        timeout: Optional[float],
        on_change: Optional[StatusCallback],
        on_poll: Optional[ProgressCallback],
        notice_interval: float,
        enough: Optional[int] = None,
        files: bool = True,
    ) -> Dict[str, JobStatus]:
        """Every job's final status (``waiting.wait_for_all``; ``enough``, ``files``: as
        ``WaitPlan``'s)."""
        if poll_interval is not None:
            notice_interval = min(notice_interval, poll_interval)
        plan = WaitPlan(
            self.scheduler_name,
            timeout=timeout,
            unknown_limit=self.unknown_limit,
            notice_interval=notice_interval,
            on_change=on_change,
            on_poll=on_poll,
            enough=enough,
            files=files,
        )

        def status_round(pending: List[str]) -> Dict[str, Observation]:
            return self.tracker.refresh(
                pending, lambda asked: self.poller.ask(asked, interval=poll_interval)
            )

        def file_round(pending: List[str]) -> Dict[str, Observation]:
            return self.tracker.ended_by_files(pending)

        def heard_round(ended: List[str]) -> Dict[str, Observation]:
            return self.tracker.refresh(ended, self._ask)

        try:
            return wait_for_all(
                ids, status_round, file_round, self.driver.waiter, plan, heard_round
            )
        finally:
            if enough is None:
                self.poller.release()  # the next process waiting here takes the poll at once

    def log_path(self, job_id: str) -> str:
        record = self.store.get(job_id, self.scheduler_name, self.tracker.host_label)
        if record is not None and record.log_path:
            return record.log_path
        found = self.driver.find_output(job_id)
        if found is None:
            raise JobNotFoundError(
                f"no record of {self.scheduler_name} job {job_id} and the scheduler does not "
                "know where it writes (check the id and the scheduler: hpcbridge jobs)"
            )
        return found

    def cancel(self, ids: List[str]) -> None:
        self.store.mark_cancel_requested(self.scheduler_name, self.tracker.host_label, ids)
        self.driver.cancel(ids)
        # What the poll holds of these jobs predates the cancel: a wait asks afresh.
        self.poller.forget(ids)
        log.info("cancel requested for %s job(s) %s", self.scheduler_name, ", ".join(ids))
