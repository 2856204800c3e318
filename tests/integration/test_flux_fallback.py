"""Bindings that are missing or broken switch the adapter to the CLI driver,
with one log line, and jobs still run."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest

from hpcbridge.model import JobState
from tests.support.flux import flux_version
from tests.support.flux_cases import make_adapter, require_flux, start_instance, write_script

pytestmark = pytest.mark.flux


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    instance = start_instance(tmp_path_factory.mktemp("flux-fallback"))
    yield instance
    instance.stop()


def test_unimportable_bindings_use_the_cli(
    broker: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "flux", None)  # `import flux` raises ImportError
    script = write_script(tmp_path, "hi.sh", "echo via cli\n")
    adapter = make_adapter("auto", broker.uri, tmp_path / "state")
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        job_id = adapter.submit_job(script, {"time": "30s"})
        status = adapter.wait(job_id, poll_interval=0.5, timeout=60)
    assert adapter.open().driver.name == "cli"
    assert status.state is JobState.COMPLETED
    fallbacks = [r for r in caplog.records if "using the CLI driver" in r.getMessage()]
    assert len(fallbacks) == 1
    assert "flux bindings unusable" in fallbacks[0].getMessage()


BROKEN_FLUX = textwrap.dedent(
    """
    # Stands for bindings whose C library cannot be loaded.
    raise OSError(
        "libflux-core.so.2: cannot open shared object file: No such file or directory"
    )
    """
)

CHILD = textwrap.dedent(
    """
    import json, logging, sys
    records = []
    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    logging.getLogger("hpcbridge").addHandler(Keep())
    logging.getLogger("hpcbridge").setLevel(logging.INFO)
    from hpcbridge import Settings
    from hpcbridge.schedulers.flux.adapter import FluxAdapter
    uri, flux, state, script = sys.argv[1:5]
    settings = Settings.from_env(env={}, state_dir=state, min_poll_interval=0.0)
    adapter = FluxAdapter(uri=uri, flux_command=flux, settings=settings)
    job_id = adapter.submit_job(script, {"time": "30s"})
    status = adapter.wait(job_id, poll_interval=0.5, timeout=60)
    driver = adapter.open().driver.name
    print(json.dumps({"driver": driver, "state": status.state.value, "log": records}))
    """
)


def test_broken_library_uses_the_cli(broker: Any, tmp_path: Path) -> None:
    """A process whose `flux` package fails to load its library (PYTHONPATH first)."""
    fake = tmp_path / "broken"
    (fake / "flux").mkdir(parents=True)
    (fake / "flux" / "__init__.py").write_text(BROKEN_FLUX)
    script = write_script(tmp_path, "hi.sh", "echo via cli\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("HPCBRIDGE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(fake), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    result = subprocess.run(
        [sys.executable, "-c", CHILD, broker.uri, require_flux(), str(tmp_path / "state"), script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["driver"] == "cli" and answer["state"] == "COMPLETED"
    fallbacks = [line for line in answer["log"] if "using the CLI driver" in line]
    assert len(fallbacks) == 1 and "libflux-core.so.2" in fallbacks[0]


DOCTOR_WITHOUT_YAML = textwrap.dedent(
    """
    import importlib.abc, sys

    class Block(importlib.abc.MetaPathFinder):
        # Stands for a Python that lacks what the bindings import (pyyaml here).
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] == "yaml":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Block())
    from hpcbridge.cli import main
    sys.exit(main(["doctor"]))
    """
)


def test_doctor_names_the_package_the_bindings_lack(broker: Any, tmp_path: Path) -> None:
    flux = require_flux()
    env = {key: value for key, value in os.environ.items() if not key.startswith("HPCBRIDGE_")}
    env.update(
        HPCBRIDGE_SCHEDULER="flux",
        HPCBRIDGE_FLUX_COMMAND=flux,
        HPCBRIDGE_STATE_DIR=str(tmp_path / "state"),
        FLUX_URI=broker.uri,
    )
    result = subprocess.run(
        [sys.executable, "-c", DOCTOR_WITHOUT_YAML],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("--  flux bindings")]
    assert len(lines) == 1, result.stdout + result.stderr
    assert "No module named 'yaml'" in lines[0]
    assert "fix: pip install pyyaml" in lines[0]
    assert f"flux-python=={flux_version(flux)}" in lines[0]
