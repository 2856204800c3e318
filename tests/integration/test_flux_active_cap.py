"""A cap on active jobs met in a real Flux instance: a jobtap plugin (built here from
``tests/data/flux/active_cap.c``) refuses a job while 6 are active, in flux-accounting's
words ("user has max active jobs", its ``max_active_jobs``; flux-accounting itself is
not available here).  40 jobs submitted with no cap given - all at once, as a plain
``submit_many`` - are fed through it: every one COMPLETED, each task once, never more
than 6 active by the instance's own clock, no refusal reaching the caller.  Native
and CLI drivers, on the newest flux-core release.
"""

from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from hpcbridge.model import JobState
from tests.conftest import REPO
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

CAP = 6
JOBS = 40
PLUGIN_SOURCE = REPO / "tests" / "data" / "flux" / "active_cap.c"


def build_plugin(flux: str, folder: Path) -> Path:
    """The plugin, compiled against this release's headers; skips without a compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    prefix = Path(flux).resolve().parent.parent
    if compiler is None:
        pytest.skip("no C compiler (cc, gcc) to build the test's jobtap plugin")
    if not (prefix / "include" / "flux" / "jobtap.h").is_file():
        pytest.skip(f"no flux/jobtap.h under {prefix}/include to build the jobtap plugin")
    plugin = folder / "active_cap.so"
    argv = [compiler, "-shared", "-fPIC", f"-I{prefix / 'include'}", str(PLUGIN_SOURCE)]
    argv += ["-o", str(plugin), f"-L{prefix / 'lib'}", "-lflux-core"]
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120)
    return plugin


@pytest.fixture(scope="module", params=flux_params()[:1])
def capped(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    flux = request.param or require_flux()
    folder = tmp_path_factory.mktemp("flux-active-cap")
    plugin = build_plugin(flux, folder)
    instance = start_instance(folder / "broker", flux=flux, cores=16)
    try:
        instance.check(["jobtap", "load", str(plugin), f"cap={CAP}"])
        yield instance
    finally:
        instance.stop()


@pytest.mark.parametrize("driver", ["native", "cli"])
def test_a_cap_met_on_the_way_holds_the_rest_back_and_fails_none(
    driver: str, capped: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hpcbridge")
    driver_or_skip(driver, capped.flux)
    refused = capped.run([*capped.submit_words("submit"), "--cc=1-8", "sleep", "5"])
    assert "user has max active jobs" in refused.stderr, refused.stderr  # the plugin refuses
    capped.check(["cancel", "--all"])
    capped.check(["queue", "drain"])
    before = len(instance_spans(capped))
    adapter = adapter_on(capped, driver, tmp_path, nested=False)
    ran = shlex.quote(str(tmp_path / "ran"))
    script = write_script(tmp_path / "scripts", "nap.sh", f'sleep 0.3; echo "$1" >> {ran}\n')
    ids = adapter.submit_many([(script, [str(i)]) for i in range(JOBS)], {"time": "60s"})
    final = adapter.wait_all(ids, poll_interval=0.5, timeout=600)
    assert len(ids) == JOBS and len(set(ids)) == JOBS
    assert {status.state for status in final.values()} == {JobState.COMPLETED}
    assert sorted((tmp_path / "ran").read_text().split(), key=int) == [str(i) for i in range(JOBS)]
    # From acceptance: a job's t_submit (ingest) can precede the end its slot waited for.
    spans = instance_spans(capped, start="t_depend")
    ours = spans[: len(spans) - before]  # newest first: this case's
    assert len(ours) == JOBS  # a refused job is never made: each task went in once
    assert most_at_once(ours) <= CAP
    held = [r.getMessage() for r in caplog.records if "max active jobs" in r.getMessage()]
    assert held, "the cap was never met: the case proves nothing"
    adapter.close()
