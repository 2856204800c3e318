"""Flux asked for where no instance runs (no FLUX_URI, no system instance): exit 7
("not usable from here") at once, naming FLUX_URI and HPCBRIDGE_FLUX_URI, nothing
staged - not a minute of retries ending in "flux submit refused the job"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.cli import hpcbridge
from tests.support.flux_cases import require_flux

SYSTEM_SOCKET = Path("/run/flux/local")


@pytest.mark.parametrize("driver", ["auto", "cli"])
def test_no_instance_is_not_usable_from_here(
    state_dir: Path, make_script, monkeypatch: pytest.MonkeyPatch, driver: str, tmp_path: Path
) -> None:
    flux = require_flux()
    if SYSTEM_SOCKET.exists():
        pytest.skip(f"a Flux system instance runs here ({SYSTEM_SOCKET})")
    monkeypatch.delenv("FLUX_URI", raising=False)
    env = {
        "PATH": f"{Path(flux).parent}{os.pathsep}{os.environ['PATH']}",
        "HPCBRIDGE_FLUX_COMMAND": flux,
        "HPCBRIDGE_FLUX_DRIVER": driver,
        "PYTHONPATH": str(REPO),
        "HPCBRIDGE_REMOTE_WORKDIR": str(tmp_path / "jobs"),
    }
    result = hpcbridge("submit", make_script("true"), "--scheduler", "flux", env=env)
    assert result.returncode == 7, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("hpcbridge: error: no Flux instance to submit to"), result.stderr
    assert "FLUX_URI" in line and "HPCBRIDGE_FLUX_URI" in line
    assert "refused" not in result.stderr
    staged = tmp_path / "jobs"
    assert not staged.exists() or not any(staged.iterdir())  # nothing staged
