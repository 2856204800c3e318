"""Futures, asyncio and callbacks on the mock scheduler (issue 51): real jobs, one follower.

- 1,000 futures, made wave by wave while the follower already waits (the first job runs
  until every wave is in), resolve with each
  job's end (its exit code: COMPLETED or FAILED); a callback subscription over the same
  jobs hears each change once, in order, ending where the future did; one follower
  thread at a time; the mock asked by status rounds no more often than one waiter would
  (the adapter's poll interval).
- ``async for`` over ``changes``, ``wait_async``, ``wait_all_async`` and the async
  submissions, each driven by ``asyncio.run``, with a 10 ms ticker that keeps ticking:
  the loop is never blocked by a wait.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import as_completed, wait
from typing import Any, Dict, List

import pytest

from hpcbridge import MockAdapter
from hpcbridge.model import JobState, JobStatus
from hpcbridge.settings.config import Settings
from tests.support.streams import followers, in_order

WAVES, WAVE = 10, 100
INTERVAL = 2.0


def end_of(index: int) -> JobState:
    return JobState.COMPLETED if index % 3 == 0 else JobState.FAILED


@pytest.fixture
def adapter(state_dir: Any) -> Any:
    env = {"HPCBRIDGE_POLL_INTERVAL": str(INTERVAL)}
    made = MockAdapter(settings=Settings.from_env(env, state_dir=str(state_dir)))
    yield made
    made.close()


def count_rounds(adapter: Any) -> List[float]:
    """The mock's status rounds, as they happen (the driver's ``query``)."""
    driver = adapter.open().driver
    rounds: List[float] = []
    query = driver.query

    def counted(job_ids: Any) -> Any:
        rounds.append(time.monotonic())
        return query(job_ids)

    driver.query = counted
    return rounds


def test_a_thousand_futures_one_follower(adapter: Any, make_script: Any, tmp_path: Any) -> None:
    gate = tmp_path / "gate"  # the first job runs until every wave is in: the follower waits
    script = make_script(
        f'[ "$1" != 0 ] || while [ ! -e {gate} ]; do sleep 0.05; done; exit $(( $1 % 3 ))'
    )
    rounds = count_rounds(adapter)
    heard: Dict[str, List[JobStatus]] = {}
    futures, subscriptions, most = [], [], 0
    started = time.monotonic()
    for wave in range(WAVES):
        numbers = range(wave * WAVE, (wave + 1) * WAVE)
        ids = adapter.submit_many([(script, [str(n)]) for n in numbers])
        expected = dict(zip(ids, numbers))
        subscriptions.append(
            adapter.on_change(ids, lambda s: heard.setdefault(s.job_id, []).append(s))
        )
        futures += [(f, end_of(expected[f.job_id])) for f in adapter.futures(ids)]
        most = max(most, followers())
    assert not futures[0][0].done() and followers() == 1  # every wave joined a waiting follower
    gate.touch()
    done, pending = wait([f for f, _ in futures], timeout=600)
    waited = time.monotonic() - started
    assert not pending and len(done) == WAVES * WAVE
    assert [f.result().state for f, _ in futures] == [end for _, end in futures]
    assert all(subscription.wait(30) for subscription in subscriptions)
    assert all(in_order(heard[f.job_id]) for f, _ in futures)
    assert all(heard[f.job_id][-1].state is f.result().state for f, _ in futures)
    assert most == 1
    assert len(rounds) <= waited / INTERVAL + 2, (len(rounds), waited)


def test_as_completed_and_a_cancel_through_the_adapter(adapter: Any, make_script: Any) -> None:
    quick = adapter.submit_job(make_script("exit 0", "quick.sh"))
    slow = adapter.submit_job(make_script("sleep 60", "slow.sh"))
    quick_future, slow_future = adapter.futures([quick, slow])
    assert slow_future.cancel() is False  # running: cancel through the adapter
    assert next(as_completed([quick_future, slow_future], timeout=60)) is quick_future
    adapter.cancel_job(slow)
    assert slow_future.result(timeout=60).state is JobState.CANCELLED


async def ticking(stop: asyncio.Event, lateness: List[float]) -> None:
    """A 10 ms ticker: how late each tick came (a blocked loop makes it late)."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        planned = loop.time() + 0.01
        await asyncio.sleep(0.01)
        lateness.append(loop.time() - planned)


@pytest.mark.anyio
async def test_asyncio_never_blocks_the_loop(adapter: Any, make_script: Any) -> None:
    script = make_script("sleep 1; exit $(( $1 % 3 ))")
    stop, lateness = asyncio.Event(), []
    ticker = asyncio.ensure_future(ticking(stop, lateness))
    ids = await adapter.submit_many_async([(script, [str(n)]) for n in range(6)])
    one = await adapter.submit_async(script, arguments=["0"])
    streamed: Dict[str, List[JobStatus]] = {}
    ticks_before = len(lateness)
    async for change in adapter.changes([*ids, one]):
        streamed.setdefault(change.job_id, []).append(change)
    finals = await adapter.wait_all_async(ids)
    single = await adapter.wait_async(one)
    stop.set()
    await ticker
    assert list(finals) == ids
    assert [finals[job_id].state for job_id in ids] == [end_of(n) for n in range(6)]
    assert single.state is JobState.COMPLETED
    assert set(streamed) == {*ids, one}
    assert all(in_order(changes) for changes in streamed.values())
    assert [streamed[job_id][-1].state for job_id in ids] == [end_of(n) for n in range(6)]
    assert len(lateness) - ticks_before > 10  # the ticker ran while the stream waited


@pytest.mark.anyio
async def test_a_cancelled_await_stops_following(adapter: Any, make_script: Any) -> None:
    job = adapter.submit_job(make_script("sleep 60"))
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(adapter.wait_async(job), timeout=1.0)
    deadline = time.monotonic() + 10
    while followers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert followers() == 0  # nobody waits for the job: the follower is gone
    adapter.cancel_job(job)
