"""Allocation packing on a Flux system (issue 37): ``--pack`` on a Flux instance holds
batch jobs, each an instance of its own, and feeds the sweep's tasks into them as plain
jobs; every task COMPLETED once, inside the batch job's instance, and nothing is left
running in the outer instance afterwards.  The outer instance is a test broker of its
own (16 cores declared), through each driver."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from hpcbridge.model import JobState
from hpcbridge.pack_feeder import run_packed
from hpcbridge.packing import ALLOCATION_NAME, Pack
from tests.conftest import REPO
from tests.support.flux_cases import adapter_on, start_instance, write_script

pytestmark = pytest.mark.flux

TASKS = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    instance = start_instance(tmp_path_factory.mktemp("flux-packing"))
    yield instance
    instance.stop()


def active_jobs(broker: Any, settle: float = 60.0) -> str:
    """The outer instance's active jobs once a released batch job had ``settle`` seconds
    to shut its instance down (CLEANUP)."""
    deadline = time.monotonic() + settle
    while True:
        listed = broker.run(["jobs", "--no-header", "-o", "{id} {name} {state}"])
        assert listed.returncode == 0, listed.stderr
        if not listed.stdout.strip() or time.monotonic() > deadline:
            return str(listed.stdout.strip())
        time.sleep(0.5)


@pytest.mark.parametrize("driver", ["native", "cli"])
def test_a_sweep_runs_in_a_batch_job_of_its_own_and_nothing_is_left(
    driver: str, broker: Any, tmp_path: Path
) -> None:
    outer = adapter_on(broker, driver, tmp_path)
    ran = tmp_path / "ran"
    task = write_script(tmp_path / "scripts", "task.sh", f'echo "$1 $FLUX_URI" >> {ran}\n')
    finals = run_packed(
        outer,
        [(task, [str(index)]) for index in range(TASKS)],
        {"time": "30s"},
        Pack.parse("nodes=1,time=5,count=1"),
        flux_command=broker.flux,
        poll_interval=0.5,
        timeout=240,
    )
    assert [status.state for status in finals] == [JobState.COMPLETED] * TASKS
    rows = [line.split() for line in ran.read_text().splitlines()]
    assert sorted(int(index) for index, _ in rows) == list(range(TASKS))  # each once
    uris = {uri for _, uri in rows}
    assert len(uris) == 1 and broker.uri not in uris  # in the batch job's own instance
    assert active_jobs(broker) == ""  # the batch job was released
    outer.close()


def test_the_command_shows_the_batch_job_it_would_hold(broker: Any, tmp_path: Path) -> None:
    task = write_script(tmp_path / "scripts", "task.sh", "echo never\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HPCBRIDGE_STATE_DIR": str(tmp_path / "state"),
        "HPCBRIDGE_FLUX_URI": broker.uri,
        "HPCBRIDGE_FLUX_COMMAND": broker.flux,
    }
    argv = [sys.executable, "-m", "hpcbridge", "submit-many", "--scheduler", "flux", task]
    argv += ["--time", "1m", "--pack", "time=10,count=2", "--dry-run"]
    shown = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "each running: exec sleep inf" in shown.stdout
    assert "batch" in shown.stdout and ALLOCATION_NAME in shown.stdout
    assert active_jobs(broker) == ""  # a dry run holds nothing
