"""Many jobs at once on a real Flux: 200 through ``submit_many``, followed as one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

from hpcbridge.model import JobState
from tests.support.flux_cases import (
    adapter_on,
    driver_or_skip,
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
    driver_or_skip(driver, broker.flux)
    adapter = adapter_on(broker, driver, tmp_path)
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

    commands_per_round, on_poll = _count_scheduler_commands(adapter)
    final = adapter.wait_all(ids, poll_interval=2.0, timeout=600, on_poll=on_poll)
    states: Dict[JobState, int] = {}
    for status in final.values():
        states[status.state] = states.get(status.state, 0) + 1
    assert states == {JobState.COMPLETED: count - 2, JobState.FAILED: 1, JobState.CANCELLED: 1}
    assert final[ids[FAILING]].exit_code == 5
    assert "task 3" in adapter.get_job_logs(ids[3])
    assert commands_per_round and max(commands_per_round) <= 2, commands_per_round
    adapter.close()


def _count_scheduler_commands(adapter: Any) -> Tuple[List[int], Callable[[Any], None]]:
    """Per status round, how many scheduler commands (CLI) or list RPCs (native) ran.

    Returns the counts (one per round) and the ``on_poll`` callback that closes a round.
    """
    per_round: List[int] = []
    counter = {"n": 0}
    target = adapter.executor if adapter.open().driver.name == "cli" else adapter.open().driver
    name = "run" if adapter.open().driver.name == "cli" else "query"
    real = getattr(target, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        counter["n"] += 1
        return real(*args, **kwargs)

    setattr(target, name, counted)

    def on_poll(_statuses: Any) -> None:
        per_round.append(counter["n"])
        counter["n"] = 0

    return per_round, on_poll
