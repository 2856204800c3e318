"""Futures and ``async for`` on Flux (issue 51), through the bindings and the CLI, on a
broker of the module's own: every future resolves with its job's end, the stream tells
each change once and in order, one follower thread waits.  Through the bindings the
follower waits as ``wait_all`` does, woken by the job manager's journal (0.68 and
later) or a result watch per job."""

from __future__ import annotations

import asyncio
from concurrent.futures import wait
from pathlib import Path
from typing import Iterator

import pytest

from hpcbridge.model import JobState
from tests.support.flux import FluxInstance
from tests.support.flux_cases import adapter_on, require_flux, start_instance, write_script
from tests.support.streams import in_order, streamed

pytestmark = pytest.mark.flux

JOBS = 12


@pytest.fixture(scope="module")
def instance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FluxInstance]:
    flux = require_flux()
    made = start_instance(Path(tmp_path_factory.mktemp("futures")), cores=4, flux=flux)
    try:
        yield made
    finally:
        made.stop()


@pytest.mark.parametrize("driver", ["native", "cli"])
def test_futures_and_a_stream(instance: FluxInstance, driver: str, tmp_path: Path) -> None:
    adapter = adapter_on(instance, driver, tmp_path, nested=False)
    script = write_script(tmp_path, "step.sh", "sleep 1\nexit $(( $1 % 2 ))\n")
    try:
        ids = adapter.submit_many([(script, [str(n)]) for n in range(JOBS)])
        futures = adapter.futures(ids)
        told, followers = asyncio.run(streamed(adapter, ids))
        done, pending = wait(futures, timeout=120)
    finally:
        adapter.close()
    ends = [JobState.COMPLETED if n % 2 == 0 else JobState.FAILED for n in range(JOBS)]
    assert not pending
    assert [f.result().state for f in futures] == ends
    assert set(told) == set(ids) and all(in_order(c) for c in told.values())
    assert [told[job_id][-1].state for job_id in ids] == ends
    assert followers <= 1


def test_status_calls_and_submissions_beside_the_follower(
    instance: FluxInstance, tmp_path: Path
) -> None:
    """The caller's thread asks and submits while the follower reads the journal: one
    thread at a time runs the journal handle's reactor (libev aborted the process)."""
    adapter = adapter_on(instance, "native", tmp_path, nested=False)
    script = write_script(tmp_path, "step.sh", "sleep 0.3\n")
    try:
        futures = adapter.futures(adapter.submit_many([script] * JOBS))
        for _ in range(10):
            adapter.get_job_statuses([f.job_id for f in futures])
            futures += adapter.futures(adapter.submit_many([script] * 2))
        done, pending = wait(futures, timeout=120)
    finally:
        adapter.close()
    assert not pending and {f.result().state for f in done} == {JobState.COMPLETED}
