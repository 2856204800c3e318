"""Nested instances (``flux batch``): resolving a job id to a URI, the outer
time limit, and a wait whose enclosing job ends under it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Tuple

import pytest

from hpcbridge.errors import JobNotFoundError, JobSubmissionError
from hpcbridge.model import JobState
from tests.support.flux_cases import (
    driver_or_skip,
    make_adapter,
    require_flux,
    start_instance,
    wait_state,
    write_script,
)

pytestmark = pytest.mark.flux


@pytest.fixture(scope="module")
def parent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    instance = start_instance(tmp_path_factory.mktemp("flux-parent"))
    yield instance
    instance.stop()


@pytest.fixture(scope="module")
def nested(parent: Any) -> Iterator[Tuple[str, str]]:
    """A nested instance with a 3-minute limit: (its job id, its local URI)."""
    job_id = parent.batch_instance(time_limit="3m")
    uri = parent.local_uri(job_id)
    yield job_id, uri
    parent.run(["cancel", job_id])


@pytest.fixture(params=["native", "cli"])
def driver(request: pytest.FixtureRequest) -> str:
    return driver_or_skip(request.param)


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("scripts")
    return (
        write_script(folder, "hello.sh", "echo hello nested\n"),
        write_script(folder, "sleeper.sh", "sleep 300\n"),
    )


def test_job_id_target_resolves_and_submits_into_the_nested_instance(
    parent: Any, nested: Tuple[str, str], driver: str, scripts: Any, tmp_path: Path
) -> None:
    job_id, local_uri = nested
    adapter = make_adapter(driver, job_id, tmp_path / "state", parent_uri=parent.uri)
    # `flux uri --remote` gives ssh://HOST/...; on this host the local form is used.
    assert adapter.open().instance == local_uri
    submitted = adapter.submit_job(scripts[0], {"time": "30s"})
    assert adapter.wait(submitted, poll_interval=0.5, timeout=60).state is JobState.COMPLETED
    listed = parent.check(["jobs", "-a", "-no", "{id.f58}"], uri=local_uri)
    assert submitted in listed
    assert adapter.store.get(submitted, "flux", adapter.host_label).flux_uri == local_uri  # type: ignore[union-attr]


def test_outer_time_limit_refuses_a_job_that_cannot_fit(
    nested: Tuple[str, str], driver: str, scripts: Any, tmp_path: Path
) -> None:
    adapter = make_adapter(driver, nested[1], tmp_path / "state")
    left = adapter.time_left()
    assert left is not None and 0 < left <= 180
    with pytest.raises(JobSubmissionError, match=r"ends in \d+s .* ask for at most \d+s"):
        adapter.submit_job(scripts[0], {"time": "10m"})


def test_wait_ends_when_the_enclosing_job_ends(
    parent: Any, driver: str, scripts: Any, tmp_path: Path
) -> None:
    """The nested instance is cancelled under a waiting client: a clear error
    or a final state within the UNKNOWN streak - never a hang."""
    job_id = parent.batch_instance(time_limit="5m")
    uri = parent.local_uri(job_id)
    adapter = make_adapter(driver, uri, tmp_path / "state", unknown_limit=4)
    try:
        submitted = adapter.submit_job(scripts[1], {"time": "2m"})
        wait_state(adapter, submitted, [JobState.RUNNING])
        threading.Timer(1.0, lambda: parent.run(["cancel", job_id])).start()
        started = time.monotonic()
        try:
            status = adapter.wait(submitted, poll_interval=1.0, timeout=90)
        except JobNotFoundError as exc:
            assert "could not be observed" in str(exc)
            assert "Flux instance" in str(exc) or "flux jobs" in str(exc)
        else:
            assert status.is_terminal  # e.g. from the wrapper's exit-code file
        assert time.monotonic() - started < 60
    finally:
        adapter.close()
        parent.run(["cancel", job_id])


def test_hpcbridge_uri_then_submit_wait(
    parent: Any, nested: Tuple[str, str], scripts: Any, tmp_path: Path
) -> None:
    """`hpcbridge uri ID` prints a URI that a later `hpcbridge submit --wait` uses
    through HPCBRIDGE_FLUX_URI."""
    flux = require_flux()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HPCBRIDGE_", "EXAMLOPS_", "FLUX_"))
    }
    env.update(
        HPCBRIDGE_SCHEDULER="flux",
        HPCBRIDGE_STATE_DIR=str(tmp_path / "state"),
        HPCBRIDGE_FLUX_COMMAND=flux,
        FLUX_URI=parent.uri,  # the enclosing instance: where the job id is looked up
    )
    resolved = subprocess.run(
        [sys.executable, "-m", "hpcbridge", "uri", nested[0]],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resolved.returncode == 0, resolved.stderr
    uri = resolved.stdout.strip()
    assert uri == nested[1]
    env.pop("FLUX_URI")
    env["HPCBRIDGE_FLUX_URI"] = uri
    submitted = subprocess.run(
        [sys.executable, "-m", "hpcbridge", "submit", scripts[0], "--time", "30s", "--wait"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert submitted.returncode == 0, submitted.stderr
    listed = parent.check(["jobs", "-a", "-no", "{id.f58} {result}"], uri=uri)
    assert "COMPLETED" in listed
