"""One plain job submitted through the bindings, traced: which modules of the Flux
package it passes, in order - and a refused job (an unknown queue, a job longer
than the enclosing allocation has left) leaves no staged folder behind.

The session is opened first (``adapter.open()``, the named step); the trace then
records the first call into each module under ``hpcbridge/schedulers/flux/``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any, Iterator, List, Optional

import pytest

from hpcbridge.errors import JobSubmissionError
from hpcbridge.model import JobState
from tests.support.flux_cases import (
    make_adapter,
    native_bindings_or_skip,
    require_flux,
    start_instance,
    write_script,
)

pytestmark = pytest.mark.flux

FLUX_PACKAGE = str(Path(__file__).resolve().parents[2] / "hpcbridge" / "schedulers" / "flux")
#: the most modules of the Flux package one plain submission may pass
MOST_MODULES = 6


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    instance = start_instance(tmp_path_factory.mktemp("flux-path"), named=True)
    yield instance
    instance.stop()


def modules_passed(call: Any) -> List[str]:
    """The modules of the Flux package whose code runs during ``call()``, first call first."""
    seen: List[str] = []

    def profile(frame: FrameType, event: str, _arg: Any) -> Optional[Any]:
        if event == "call":
            path = frame.f_code.co_filename
            if path.startswith(FLUX_PACKAGE) and Path(path).stem not in seen:
                seen.append(Path(path).stem)
        return None

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def test_a_plain_native_submission_passes_at_most_six_modules(broker: Any, tmp_path: Path) -> None:
    native_bindings_or_skip(broker.flux)
    adapter = make_adapter("native", broker.uri, tmp_path / "state", nested=False)
    script = write_script(tmp_path / "scripts", "hello.sh", "echo hello\n")
    assert adapter.open().driver.name == "native"
    found: List[str] = []
    passed = modules_passed(lambda: found.append(adapter.submit_job(script, {"qos": "debug"})))
    print("modules passed:", " -> ".join(passed))
    assert len(passed) <= MOST_MODULES, passed
    # the job kind read first (the service into planning); the adapter's glue not passed,
    # nor driver_base (the sending's retries and adoption are the engine's runner's)
    assert passed[0] == "planning" and "adapter" not in passed and "jobspec" in passed
    assert "driver_base" not in passed
    assert adapter.wait(found[0], poll_interval=0.5, timeout=60).state is JobState.COMPLETED


@pytest.mark.parametrize("driver", ["native", "cli"])
def test_a_refused_job_leaves_no_folder(broker: Any, tmp_path: Path, driver: str) -> None:
    if driver == "native":
        native_bindings_or_skip(broker.flux)
    jobs = tmp_path / "jobs"
    adapter = make_adapter(
        driver, broker.uri, tmp_path / "state", nested=False, remote_workdir=str(jobs)
    )
    script = write_script(tmp_path / "scripts", "hello.sh", "echo hello\n")
    if not adapter.open().facts.policy.queues:
        pytest.skip(f"Flux adapter {adapter.open().facts.policy.name} has no named queues")
    with pytest.raises(JobSubmissionError, match="valid queues: debug, batch"):
        adapter.submit_job(script, {"qos": "nosuch"})
    assert not jobs.exists() or not any(jobs.iterdir()), "a refused job was staged"


def test_too_long_for_the_enclosing_job_leaves_no_folder(broker: Any, tmp_path: Path) -> None:
    """A nested instance with a 2 minute limit refuses a 1 hour job before staging it."""
    flux = require_flux()
    job_id = broker.batch_instance(time_limit="120s")
    try:
        uri = broker.local_uri(job_id)
        jobs = tmp_path / "jobs"
        adapter = make_adapter(
            "cli", uri, tmp_path / "state", remote_workdir=str(jobs), flux_command=flux
        )
        script = write_script(tmp_path / "scripts", "long.sh", "sleep 1\n")
        with pytest.raises(JobSubmissionError, match="would not fit|too little left"):
            adapter.submit_job(script, {"time": "1h"})
        assert not jobs.exists() or not any(jobs.iterdir()), "a refused job was staged"
    finally:
        broker.run(["cancel", job_id])
