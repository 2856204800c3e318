"""``submit --dry-run`` on Flux, through the bindings and through the commands: the
lines that are not notes (``#``) end with the command that would be run, ``flux batch``
for ``--nested`` and ``flux submit`` for ``--no-nested`` (issue 32 point 10i: with the
CLI driver the flux guide's pipe showed a note)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.cli import hpcbridge
from tests.support.flux_cases import native_bindings_or_skip, require_flux, start_instance

pytestmark = [pytest.mark.flux]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    instance = start_instance(tmp_path_factory.mktemp("flux-dry-run"), flux=require_flux())
    yield instance
    instance.stop()


@pytest.mark.parametrize("driver", ["native", "cli"])
@pytest.mark.parametrize(("flag", "verb"), [("--nested", "batch"), ("--no-nested", "submit")])
def test_the_last_line_that_is_no_note_is_the_command(
    broker: Any, driver: str, flag: str, verb: str, state_dir: Path, tmp_path: Path
) -> None:
    if driver == "native":
        native_bindings_or_skip(broker.flux)
    env = {
        "HPCBRIDGE_SCHEDULER": "flux",
        "HPCBRIDGE_FLUX_URI": str(broker.uri),
        "HPCBRIDGE_FLUX_COMMAND": broker.flux,
        "HPCBRIDGE_FLUX_DRIVER": driver,
        "HPCBRIDGE_REMOTE_WORKDIR": str(tmp_path / "jobs"),
        "PYTHONPATH": str(REPO),
    }
    dry = hpcbridge(
        "submit", str(REPO / "examples" / "hello.sh"), "-t", "1m", flag, "--dry-run", env=env
    )
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert any(line.startswith(f"# {driver} driver: ") for line in lines), dry.stdout
    words = shlex.split([line for line in lines if not line.startswith("#")][-1])
    while "=" in words[0]:  # FLUX_URI=... before the command
        words.pop(0)
    assert os.path.basename(words[0]) == "flux" and words[1] == verb, dry.stdout
    assert "-t60s" in words and "--job-name=hello.sh" in words
    assert not (tmp_path / "jobs").exists()  # nothing staged
