"""A sweep of 600 plain jobs fed into a real Flux instance with ``max_queued=50``,
through the bindings and through the CLI on the newest flux-core release, through
the bindings on the others (the core case).

Where the release has dependencies (0.49 and later), a hello->bye pair per
parameter, each bye ``afterok`` its hello; on 0.26, 600 independent jobs.  The
instance's own times (``t_submit``, ``t_inactive``) say how many of the sweep's
jobs were active at once: never more than 50.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, Iterator

import pytest

from hpcbridge.engine.sweeping import Sweep
from hpcbridge.model import JobState
from tests.support.flux_cases import (
    adapter_on,
    driver_or_skip,
    flux_params,
    instance_spans,
    require_flux,
    start_instance,
    write_script,
)
from tests.support.spans import most_at_once

pytestmark = pytest.mark.flux

CAP = 50
PAIRS = 300  # 600 jobs
#: scripts/test.sh sets it for every release but the newest: their core case only
CORE_ONLY = os.environ.get("HPCBRIDGE_TEST_FLUX_CORE_ONLY") == "1"


@pytest.fixture(scope="module", params=flux_params())
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    flux = request.param or require_flux()
    instance = start_instance(tmp_path_factory.mktemp("flux-sweeps"), flux=flux, cores=16)
    yield instance
    instance.stop()


@pytest.mark.parametrize("driver", ["native", "cli"])
def test_never_more_than_max_queued_active(driver: str, broker: Any, tmp_path: Path) -> None:
    if driver == "cli" and CORE_ONLY:
        pytest.skip("the CLI driver's sweep runs on the newest release (a core-only run)")
    driver_or_skip(driver, broker.flux)
    adapter = adapter_on(broker, driver, tmp_path, nested=False)
    assert adapter.open().driver.name == driver
    ran = shlex.quote(str(tmp_path / "ran"))
    hello = write_script(tmp_path / "scripts", "hello.sh", f'echo "hello $1" >> {ran}\n')
    bye = write_script(tmp_path / "scripts", "bye.sh", f'echo "bye $1" >> {ran}\n')
    pairs = adapter.open().facts.policy.dependencies
    sweep = Sweep(adapter, f"flux-{driver}", max_queued=CAP)
    hellos = sweep.add([(hello, [str(i)]) for i in range(PAIRS)], {"time": "60s"})
    second = [(bye if pairs else hello, [str(i if pairs else PAIRS + i)]) for i in range(PAIRS)]
    sweep.add(second, {"time": "60s"}, after=hellos if pairs else None)
    final = sweep.wait(poll_interval=0.5, timeout=900)  # our own instance: asked often
    assert len(final) == 2 * PAIRS
    assert {status.state for status in final.values()} == {JobState.COMPLETED}
    spans = instance_spans(broker, ids=final)
    assert len(spans) == 2 * PAIRS
    assert most_at_once(spans) <= CAP
    noted = sorted((tmp_path / "ran").read_text().splitlines())
    words = ("hello", "bye") if pairs else ("hello",)
    wanted = sorted(f"{w} {i}" for w in words for i in range(PAIRS * (1 if pairs else 2)))
    assert noted == wanted
    adapter.close()
