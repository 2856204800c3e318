"""Following one adapter's jobs: their statuses (never waiting for the floor), waits
(the loop of ``waiting.py`` over the shared poll of ``polling.py``), logs and cancels."""

from __future__ import annotations

import logging
from typing import Dict, List

from ..errors import JobNotFoundError
from ..model import JobStatus
from ..store.jobs import JobStore
from .driver import SchedulerDriver
from .observation import Observation
from .polling import PollBoard, Poller
from .tracking import JobTracker, ask
from .wait_plan import WaitPlan
from .waiting import Rounds, wait_for_all

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
        """Every id's status, a file's end confirmed: asked now where the floor allows,
        else the freshest known (``JobStatus.as_of``: since when) - only a wait waits."""
        return self.tracker.refresh(ids, self._ask_once, confirm=True)

    def _ask_once(self, job_ids: List[str]) -> Dict[str, Observation]:
        """One status question, never under the floor: an id left out keeps what is known
        (a job just submitted: its record, PENDING since its submission)."""
        found = self.poller.ask(job_ids, one_off=True)
        left = [job_id for job_id in job_ids if job_id not in found]
        if left:  # not asked now: an end its exit-code file tells is fresher than the record
            found.update(self.tracker.ended_by_files(left))
        # Nothing known (no record here, never answered): no state to answer with.
        unknown = [job_id for job_id in left if job_id not in found]
        unknown = [job_id for job_id in unknown if not self.tracker.knows(job_id)]
        if unknown:
            found.update(self.poller.next_answers(unknown))
        return found

    def _ask(self, job_ids: List[str]) -> Dict[str, Observation]:
        """The driver's answer for every id; an unreachable scheduler is UNKNOWN for all."""
        return ask(lambda: self.driver, self.scheduler_name, job_ids)

    def wait_all(self, ids: List[str], plan: WaitPlan) -> Dict[str, JobStatus]:
        """Every job's final status, waited for as ``plan`` says (``waiting.wait_for_all``)."""

        def status_round(pending: List[str]) -> Dict[str, Observation]:
            asked = lambda ids: self.poller.ask(ids, interval=plan.poll_interval)  # noqa: E731
            return self.tracker.refresh(pending, asked)

        def heard_round(ended: List[str]) -> Dict[str, Observation]:
            return self.tracker.refresh(ended, self._ask)

        rounds = Rounds(
            self.scheduler_name,
            status=status_round,
            files=self.tracker.ended_by_files,
            waiter=self.driver.waiter,
            heard=heard_round,
            unknown_limit=self.unknown_limit,
        )
        try:
            return wait_for_all(ids, rounds, plan)
        finally:
            if plan.enough is None:
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
