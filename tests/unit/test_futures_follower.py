"""The follower behind futures and subscriptions (``engine/futures.py``), over a scripted
wait: what a real scheduler cannot be made to do on cue - a job added while the wait
runs, one job not found among others, the adapter closed mid-wait."""

from __future__ import annotations

import threading
from concurrent.futures import wait
from typing import Dict, List

import pytest

from hpcbridge.engine.awaiting import changes
from hpcbridge.engine.futures import Follower, FutureSubscriber, JobFuture, Subscription
from hpcbridge.engine.wait_plan import WaitPlan
from hpcbridge.errors import JobNotFoundError, SchedulerAdapterError
from hpcbridge.model import JobState, JobStatus

P, R, C, F = JobState.PENDING, JobState.RUNNING, JobState.COMPLETED, JobState.FAILED


class ScriptedWait:
    """A wait that, tick by tick, moves each job along its script (the last state stays);
    like the real loop it tells each state it sees change, afresh at each call."""

    def __init__(self, scripts: Dict[str, List[JobState]], hold: threading.Event) -> None:
        self.scripts = scripts
        self.hold = hold  # cleared: the jobs do not move (the wait just ticks)
        self.calls: List[List[str]] = []
        self.missing: set = set()

    def __call__(self, ids: List[str], plan: WaitPlan) -> Dict[str, JobStatus]:
        self.calls.append(list(ids))
        seen: Dict[str, JobState] = {}
        final: Dict[str, JobStatus] = {}
        while len(final) < len(ids):
            for job_id in ids:
                if job_id in self.missing:
                    raise JobNotFoundError(f"job {job_id} not found", job_id=job_id)
                script = self.scripts[job_id]
                state = script.pop(0) if len(script) > 1 and self.hold.is_set() else script[0]
                if seen.get(job_id) is not state and job_id not in final:
                    seen[job_id] = state
                    assert plan.on_change is not None
                    plan.on_change(JobStatus(job_id, state))
                    if state in (C, F):
                        final[job_id] = JobStatus(job_id, state)
            assert plan.on_poll is not None
            plan.on_poll({})
            threading.Event().wait(0.01)
        return final


def follower_of(scripts: Dict[str, List[JobState]], moving: bool = True) -> tuple:
    hold = threading.Event()
    if moving:
        hold.set()
    waited = ScriptedWait(scripts, hold)
    return Follower(waited, "test"), waited, hold


def futures_of(follower: Follower, ids: List[str]) -> List[JobFuture]:
    made = [JobFuture(job_id) for job_id in ids]
    follower.add([FutureSubscriber(future) for future in made])
    return made


def test_each_change_once_in_order_across_a_job_added_midway() -> None:
    follower, waited, hold = follower_of({"a": [P, R, R, C], "b": [P, P, R, F]}, moving=False)
    told: List[tuple] = []
    first = Subscription(["a"], lambda s: told.append((s.job_id, s.state)), follower.remove)
    follower.add([first])
    while not told:
        threading.Event().wait(0.01)
    later = Subscription(
        ["a", "b"], lambda s: told.append(("later", s.job_id, s.state)), follower.remove
    )
    follower.add([later])
    (b_future,) = futures_of(follower, ["b"])
    hold.set()
    assert later.wait(30) and first.wait(30)
    assert b_future.result(30).state is F
    # the second wait (a and b) told a's PENDING again: nobody heard it twice
    assert [t for t in told if t[0] == "a"] == [("a", P), ("a", R), ("a", C)]
    later_a = [t[2] for t in told if t[:2] == ("later", "a")]
    assert later_a == [P, R, C]  # the latest state first, then the rest
    assert [t[2] for t in told if t[:2] == ("later", "b")] == [P, R, F]
    assert len(waited.calls) >= 2 and sorted(waited.calls[-1]) == ["a", "b"]


def test_one_job_not_found_fails_its_future_alone() -> None:
    follower, waited, _ = follower_of({"a": [P, R, C], "lost": [P]})
    waited.missing.add("lost")
    good, lost = futures_of(follower, ["a", "lost"])
    assert good.result(30).state is C
    with pytest.raises(JobNotFoundError):
        lost.result(30)


def test_a_future_cannot_be_cancelled_and_close_fails_the_unfinished() -> None:
    follower, _, _ = follower_of({"a": [P]})
    (future,) = futures_of(follower, ["a"])
    assert future.running() and future.cancel() is False
    follower.close()
    with pytest.raises(SchedulerAdapterError, match="closed before job a ended"):
        future.result(30)
    assert not follower.running
    with pytest.raises(SchedulerAdapterError, match="closed"):
        futures_of(follower, ["a"])


def test_a_stopped_subscription_is_called_no_more() -> None:
    follower, _, hold = follower_of({"a": [P, R, C]}, moving=False)
    told: List[JobStatus] = []
    subscription = Subscription(["a"], told.append, follower.remove)
    follower.add([subscription])
    while not told:
        threading.Event().wait(0.01)
    subscription.stop()
    (future,) = futures_of(follower, ["a"])
    hold.set()
    assert future.result(30).state is C
    assert [s.state for s in told] == [P] and subscription.done


def test_one_thread_for_many_futures() -> None:
    scripts = {str(i): [P, R, C if i % 2 else F] for i in range(300)}
    follower, _, _ = follower_of(scripts)
    before = threading.active_count()
    made = futures_of(follower, list(scripts))
    assert threading.active_count() <= before + 1
    done, pending = wait(made, timeout=60)
    assert not pending
    assert all(f.result().state is (C if int(f.job_id) % 2 else F) for f in made)


@pytest.mark.anyio
async def test_a_stream_yields_in_order_then_raises_what_the_wait_raised() -> None:
    follower, waited, _ = follower_of({"a": [P, R, C], "lost": [P]})
    assert [(s.job_id, s.state) async for s in changes(follower, ["a"])] == [
        ("a", P),
        ("a", R),
        ("a", C),
    ]
    waited.missing.add("lost")
    with pytest.raises(JobNotFoundError, match="lost"):
        [s async for s in changes(follower, ["lost"])]


def test_a_callback_that_raises_stops_neither_its_calls_nor_the_others() -> None:
    follower, _, _ = follower_of({"a": [P, R, C]})
    told: List[JobState] = []

    def faulty(status: JobStatus) -> None:
        told.append(status.state)
        raise RuntimeError("a bug in the caller's callback")

    subscription = Subscription(["a"], faulty, follower.remove)
    follower.add([subscription])
    (future,) = futures_of(follower, ["a"])
    assert subscription.wait(30) and future.result(30).state is C
    assert told == [P, R, C]


def test_a_subscription_made_while_the_follower_waits_wakes_it() -> None:
    """A wait that would pause a long while (a driver's events, many jobs) is woken by a
    new subscriber, and waits again with its job; ``close`` wakes it the same way."""
    calls: List[List[str]] = []
    woken: List[bool] = []

    def waiting(ids: List[str], plan: WaitPlan) -> Dict[str, JobStatus]:
        calls.append(list(ids))
        assert plan.wake is not None and plan.on_poll is not None
        while True:
            woken.append(plan.wake.wait(60))  # the pause: ended by the wake alone
            plan.on_poll({})  # regroups (new jobs, the close) by raising

    follower = Follower(waiting, "test")
    (first,) = futures_of(follower, ["a"])
    while not calls:
        threading.Event().wait(0.01)
    (second,) = futures_of(follower, ["b"])
    while len(calls) < 2:
        threading.Event().wait(0.01)
    assert calls == [["a"], ["a", "b"]] and all(woken)
    follower.close()
    with pytest.raises(SchedulerAdapterError, match="closed"):
        second.result(timeout=60)
    assert all(woken) and not follower.running
