"""Futures and ``async for`` on Slurm 22.05 cost the controller what one waiter does (issue 51).

A cluster of the module's own (``own_cluster``: its RPC counts are this module's
alone).  200 jobs waited for by one blocking ``wait_all``, then 200 more followed by
200 futures and an ``async for`` over the same jobs at once: every future resolves
COMPLETED, the stream tells each change once and in order, one follower thread asks,
and ``sdiag`` counts no more job-info RPCs than one waiter's rate allows (the wait's
length / the poll interval, + 2) - the figures of both runs are printed (``-s``).
Over SSH (paramiko), 40 jobs followed by futures, a callback and a stream at once.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import wait
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from hpcbridge.model import JobState, JobStatus
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from hpcbridge.settings.config import Settings
from hpcbridge.store.jobs import JobStore
from hpcbridge.transports.local import LocalExecutor
from tests.support.slurm_clusters import job_info_rpcs, own_cluster, sdiag_reset
from tests.support.streams import in_order, streamed

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

JOBS = 200
INTERVAL = 5.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    with own_cluster("futures", 17330) as env:
        yield env


def adapter_for(cluster: Dict[str, str], root: Path, executor: Any, **kw: Any) -> Any:
    env = {"HPCBRIDGE_POLL_INTERVAL": str(INTERVAL)}
    settings = Settings.from_env(env=env, state_dir=str(root / "state"), scheduler="slurm")
    return RealSlurmAdapter(
        executor=executor,
        settings=settings,
        store=JobStore(root / "state" / "jobs.db"),
        command_env={"SLURM_CONF": cluster["SLURM_CONF"]},
        driver="cli",
        **kw,
    )


@pytest.fixture(scope="module")
def adapter(cluster: Dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("futures")
    made = adapter_for(cluster, root, LocalExecutor(default_timeout=60))
    yield made
    made.close()


def submitted(adapter: Any, cluster: Dict[str, str], folder: Path, count: int = JOBS) -> List[str]:
    script = folder / "step.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("#!/bin/sh\nsleep $(( 1 + ${SLURM_ARRAY_TASK_ID:-0} % 2 ))\n")
    script.chmod(0o755)
    ids = adapter.submit_many([str(script)] * count)
    sdiag_reset(cluster)
    return list(ids)


@pytest.fixture(scope="module")
def blocking(adapter: Any, cluster: Dict[str, str]) -> Dict[str, Any]:
    ids = submitted(adapter, cluster, Path(adapter.remote_workdir))
    started = time.monotonic()
    final = adapter.wait_all(ids, timeout=600)
    return {"final": final, "waited": time.monotonic() - started, "rpcs": job_info_rpcs(cluster)}


def test_futures_and_a_stream_cost_one_waiter(
    adapter: Any, cluster: Dict[str, str], blocking: Dict[str, Any]
) -> None:
    assert {s.state for s in blocking["final"].values()} == {JobState.COMPLETED}
    ids = submitted(adapter, cluster, Path(adapter.remote_workdir))
    started = time.monotonic()
    futures = adapter.futures(ids)
    told, followers = asyncio.run(streamed(adapter, ids))
    done, pending = wait(futures, timeout=600)
    waited, rpcs = time.monotonic() - started, job_info_rpcs(cluster)
    print(
        f"\nsdiag job-info RPCs: one blocking wait_all of {JOBS} jobs {blocking['rpcs']} "
        f"in {blocking['waited']:.0f} s; {JOBS} futures + async for {rpcs} in {waited:.0f} s"
    )
    assert not pending
    assert [f.result().state for f in futures] == [JobState.COMPLETED] * JOBS
    assert set(told) == set(ids) and all(in_order(c) for c in told.values())
    assert followers <= 1
    assert rpcs <= waited / INTERVAL + 2, (rpcs, waited, blocking)


def test_over_ssh_futures_a_callback_and_a_stream(
    cluster: Dict[str, str], ssh_executor: Any, ssh_remote_dir: str, tmp_path: Path
) -> None:
    """The same over SSH (paramiko, the unprivileged test user): 40 jobs, a future, a
    callback subscription and an ``async for`` each; one waiter's RPCs."""
    adapter = adapter_for(cluster, tmp_path, ssh_executor, remote_workdir=ssh_remote_dir)
    ids = submitted(adapter, cluster, tmp_path / "scripts", count=40)
    started = time.monotonic()
    heard: Dict[str, List[JobStatus]] = {}
    subscription = adapter.on_change(ids, lambda s: heard.setdefault(s.job_id, []).append(s))
    futures = adapter.futures(ids)
    told, _ = asyncio.run(streamed(adapter, ids))
    done, pending = wait(futures, timeout=600)
    assert subscription.wait(60) and not subscription.errors
    waited, rpcs = time.monotonic() - started, job_info_rpcs(cluster)
    assert not pending and {f.result().state for f in futures} == {JobState.COMPLETED}
    for changes in (heard, told):
        assert set(changes) == set(ids) and all(in_order(c) for c in changes.values())
    assert rpcs <= waited / INTERVAL + 2, (rpcs, waited)
