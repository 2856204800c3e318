"""Waiting for Flux jobs without a status round trip after their end (native: the
result event carries the final state)."""

import time
from types import SimpleNamespace
from typing import Any, List, Sequence

from hpcbridge.model import JobState, JobStatus
from hpcbridge.schedulers.flux.journal import ResultWaiter
from hpcbridge.schedulers.flux.journal_events import Relisting
from hpcbridge.schedulers.flux.native_driver import RELIST_AFTER, NativeDriver


class FakeResult:
    """A fulfilled ``result_async`` future: what ``get_info`` gives for a failed job."""

    def get_info(self) -> Any:
        return SimpleNamespace(
            id=1234,
            result="FAILED",
            returncode=3,
            waitstatus=3 << 8,
            t_submit=1.0,
            t_run=2.0,
            t_cleanup=3.0,
            exception=SimpleNamespace(occurred=False),
        )


class NoListing:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("no JobList round trip expected")


def test_a_heard_end_answers_the_next_query_without_asking_flux() -> None:
    waiter = ResultWaiter.__new__(ResultWaiter)
    waiter.ended, waiter._done = {}, set()
    waiter.handle = SimpleNamespace(reactor_stop=lambda: None)
    waiter._fulfilled(FakeResult(), "ƒ1234")
    status = waiter.ended["ƒ1234"]
    assert status.state is JobState.FAILED and status.exit_code == 3

    driver = NativeDriver.__new__(NativeDriver)
    driver._ended, driver._listed, driver._waiters = waiter.ended, Relisting(RELIST_AFTER), []
    driver._journal = None  # a release without the journal: a watch per job
    driver.flux = SimpleNamespace(job=SimpleNamespace(JobList=NoListing))
    assert driver.query(["ƒ1234"])["ƒ1234"] == status
    assert driver._ended == {}  # answered once, then forgotten


def test_a_job_a_waiter_hears_is_not_listed_again_within_a_second() -> None:
    driver = NativeDriver.__new__(NativeDriver)
    running = JobStatus("ƒ5", JobState.RUNNING)
    driver._ended, driver._listed = {}, Relisting(RELIST_AFTER)
    driver._listed.note({"ƒ5": running}, time.monotonic())
    driver._journal = None
    driver._waiters = [SimpleNamespace(hears=lambda job_id: job_id == "ƒ5")]  # type: ignore[list-item]
    driver.flux = SimpleNamespace(job=SimpleNamespace(JobList=NoListing))
    assert driver.query(["ƒ5"]) == {"ƒ5": running}
    driver._waiters = []  # nobody will hear its end: ask
    listed: List[Sequence[str]] = []
    driver._list = lambda ids: listed.append(ids) or {"ƒ5": running}  # type: ignore[method-assign]
    assert driver.query(["ƒ5"]) == {"ƒ5": running} and listed == [["ƒ5"]]
