"""Only a wait waits, on Flux (issue 45 point 2).

- CLI driver (the floor applies): a status call right after ``submit_many``, less than
  the floor (60 s) after a round, asks the broker nothing (the driver's queries are
  counted) and answers at once with each job's record: PENDING as of its submission.
  ``hpcbridge status --json`` of them, from another process, says the same at once.
  A wait asking every 0.1 s still gets one round per floor (1 s here).
- Bindings (woken by the job events: no floor, no shared poll): the same call asks the
  broker once, at once, for all the jobs.

The poller may not sleep in the status calls (``NoWaiting``): a call that waited for
the floor would fail, not be timed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterator, List

import pytest

from hpcbridge.engine import polling
from hpcbridge.engine.observation import Source
from hpcbridge.model import JobState
from hpcbridge.retrying import Deadline
from hpcbridge.schedulers.flux.adapter import FluxAdapter
from hpcbridge.settings.config import Settings
from tests.support.cli import hpcbridge_in
from tests.support.flux_cases import driver_or_skip, start_instance, write_script

pytestmark = pytest.mark.flux


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    instance = start_instance(tmp_path_factory.mktemp("flux-status-now"))
    yield instance
    instance.stop()


class NoWaiting(Deadline):
    def sleep(self, seconds: float) -> None:
        raise AssertionError("a status call waited for the poll")


def adapter_with_floor(broker: Any, driver: str, folder: Path, floor: float) -> FluxAdapter:
    settings = Settings.from_env(
        env={}, state_dir=str(folder / "state"), poll_interval=floor, min_poll_interval=floor
    )
    return FluxAdapter(
        uri=broker.uri,
        settings=settings,
        driver=driver_or_skip(driver, broker.flux),
        flux_command=broker.flux,
        remote_workdir=str(folder / "jobs"),
    )


def counted(adapter: FluxAdapter, monkeypatch: pytest.MonkeyPatch) -> List[List[str]]:
    """The driver's status queries from now on: the ids of each."""
    driver = adapter.open().driver
    calls: List[List[str]] = []
    query = driver.query

    def counting(job_ids: List[str]) -> Any:
        calls.append(list(job_ids))
        return query(job_ids)

    monkeypatch.setattr(driver, "query", counting)
    return calls


def test_cli_a_status_right_after_submit_many_answers_from_the_record(
    broker: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = adapter_with_floor(broker, "cli", tmp_path / "a", 60.0)
    # They run on: no exit-code file tells an end before the status call.
    script = write_script(tmp_path / "scripts", "long.sh", "sleep 300\n")
    calls = counted(adapter, monkeypatch)
    first = adapter.submit_job(script)
    adapter.get_job_status(first)
    assert len(calls) == 1  # the round the floor counts from
    ids = adapter.submit_many([script] * 3)
    monkeypatch.setattr(polling, "Deadline", NoWaiting)
    asked = time.time()
    observed = adapter.observe(ids)
    assert len(calls) == 1  # no round under the floor ...
    records = adapter.store.get_many("flux", adapter.host_label, ids)
    for job_id in ids:
        seen = observed[job_id]
        # ... and no wait for one: the submission's state, as of its record
        assert (seen.source, seen.status.state) == (Source.KNOWN, JobState.PENDING)
        as_of = seen.status.as_of
        assert as_of is not None and as_of == records[job_id].updated_at
        assert as_of.timestamp() <= asked
    monkeypatch.undo()
    adapter.close()

    # The command line takes the same path: answered at once from the records.
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("HPCBRIDGE_")},
        "HPCBRIDGE_STATE_DIR": str(tmp_path / "a" / "state"),
        "HPCBRIDGE_SCHEDULER": "flux",
        "HPCBRIDGE_FLUX_DRIVER": "cli",
        "HPCBRIDGE_FLUX_COMMAND": broker.flux,
        "HPCBRIDGE_MIN_POLL_INTERVAL": "60",
    }
    shown = hpcbridge_in(env, "status", *ids, "--json")
    assert shown.returncode == 0, shown.stderr
    for item in json.loads(shown.stdout):
        record = records[item["job_id"]]
        assert record.updated_at is not None
        assert (item["state"], item["as_of"]) == ("PENDING", record.updated_at.isoformat())
    canceller = adapter_with_floor(broker, "cli", tmp_path / "a", 60.0)
    canceller.cancel_jobs([first, *ids])
    canceller.close()

    # A wait asking every 0.1 s: one round per floor (1 s) at most.
    waiter = adapter_with_floor(broker, "cli", tmp_path / "b", 1.0)
    calls = counted(waiter, monkeypatch)
    sleeper = write_script(tmp_path / "scripts", "sleeper.sh", "sleep 4\n")
    ids = waiter.submit_many([sleeper] * 2)
    started = time.monotonic()
    final = waiter.wait_all(ids, poll_interval=0.1, timeout=300)
    waited = time.monotonic() - started
    assert {status.state for status in final.values()} == {JobState.COMPLETED}
    assert 1 <= len(calls) <= waited / 1.0 + 2, (calls, waited)
    waiter.close()


def test_bindings_a_status_right_after_submit_many_asks_the_broker_once(
    broker: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No floor for a driver woken by the job events: one query for all, at once."""
    adapter = adapter_with_floor(broker, "native", tmp_path, 60.0)
    script = write_script(tmp_path / "scripts", "hello.sh", "echo hello\n")
    calls = counted(adapter, monkeypatch)
    ids = adapter.submit_many([script] * 3)
    monkeypatch.setattr(polling, "Deadline", NoWaiting)
    asked = time.time()
    observed = adapter.observe(ids)
    assert calls == [ids]
    for job_id in ids:
        seen = observed[job_id]
        assert seen.source is Source.SCHEDULER and seen.status.state is not JobState.UNKNOWN
        assert seen.status.as_of is not None and seen.status.as_of.timestamp() >= asked
    monkeypatch.undo()
    adapter.close()
