"""Many jobs at once on a real Flux: 200 through ``submit_many``, followed as one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from hpcbridge.model import JobState

from .test_flux_support import (
    make_adapter,
    native_bindings_or_skip,
    require_flux,
    start_instance,
    write_script,
)

pytestmark = pytest.mark.flux

# Every Flux batch job is a nested instance (~1.5 s of CPU to start): the full
# 200 run through the CLI driver, whose command count is the one at stake; the
# native driver gets a smaller batch of the same cases.
COUNTS = {"cli": 200, "native": 40}
FAILING = 17  # this task exits 5; its siblings complete
CANCELLED = 12  # this task sleeps and is cancelled on its own


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    instance = start_instance(tmp_path_factory.mktemp("flux-many"), cores=64)
    yield instance
    instance.stop()


@pytest.mark.parametrize("driver", ["native", "cli"])
def test_many_jobs(driver: str, broker: Any, tmp_path: Path) -> None:
    count = COUNTS[driver]
    if driver == "native":
        native_bindings_or_skip(broker.flux)
    adapter = make_adapter(
        driver,
        broker.uri,
        tmp_path / "state",
        remote_workdir=str(tmp_path / "jobs"),
        flux_command=broker.flux or require_flux(),
    )
    task = write_script(
        tmp_path / "scripts",
        "task.sh",
        'case "$1" in fail) exit 5 ;; sleep) sleep 300 ;; *) echo "task $1" ;; esac\n',
    )
    arguments = [
        ["fail"] if index == FAILING else ["sleep"] if index == CANCELLED else [str(index)]
        for index in range(count)
    ]
    ids = adapter.submit_many([(task, args) for args in arguments], {"time": "10m"})
    assert len(ids) == len(set(ids)) == count

    # Each id is followable and cancellable on its own.
    deadline = time.monotonic() + 120
    while adapter.get_job_status(ids[CANCELLED]).state is not JobState.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    adapter.cancel_job(ids[CANCELLED])

    queries: List[int] = []
    commands_per_query = _count_scheduler_commands(adapter, queries)
    final = adapter.wait_all(ids, poll_interval=2.0, timeout=600)
    states: Dict[JobState, int] = {}
    for status in final.values():
        states[status.state] = states.get(status.state, 0) + 1
    assert states == {JobState.COMPLETED: count - 2, JobState.FAILED: 1, JobState.CANCELLED: 1}
    assert final[ids[FAILING]].exit_code == 5
    assert "task 3" in adapter.get_job_logs(ids[3])
    assert queries and max(commands_per_query) <= 2, commands_per_query
    adapter.close()


def _count_scheduler_commands(adapter: Any, queries: List[int]) -> List[int]:
    """Per status round, how many scheduler commands (CLI) or list RPCs (native) ran."""
    per_query: List[int] = []
    counter = {"n": 0}
    if adapter.driver_kind == "cli":
        real_run = adapter.executor.run

        def counted_run(*args: Any, **kwargs: Any) -> Any:
            counter["n"] += 1
            return real_run(*args, **kwargs)

        adapter.executor.run = counted_run
    else:
        driver = adapter.driver
        real_query = driver.query

        def counted_query(*args: Any, **kwargs: Any) -> Any:
            counter["n"] += 1
            return real_query(*args, **kwargs)

        driver.query = counted_query
    real = adapter._query

    def query(job_ids: Any, records: Any) -> Any:
        counter["n"] = 0
        answer = real(job_ids, records)
        queries.append(len(job_ids))
        per_query.append(counter["n"])
        return answer

    adapter._query = query
    return per_query
