"""``doctor`` in a Python that lacks what the Flux bindings load names every missing
package in one run (issue 32 point 10g), against a real broker of the default release.

The Python is a real one without those packages: a fresh venv without the system's
site-packages, with hpcbridge and its one dependency (packaging) on its path.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.flux_cases import require_flux, start_instance

pytestmark = [pytest.mark.flux]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    instance = start_instance(tmp_path_factory.mktemp("flux-doctor"), flux=require_flux())
    yield instance
    instance.stop()


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A venv with nothing installed, and a folder holding only ``packaging``."""
    import packaging

    root = tmp_path_factory.mktemp("bare")
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root / "venv")],
        check=True,
        timeout=120,
    )
    only = root / "only"
    only.mkdir()
    (only / "packaging").symlink_to(Path(packaging.__file__).parent)
    yield root


def _doctor(python: Path, path: str, broker: Any, tmp: Path) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HPCBRIDGE_", "FLUX_", "PYTHON"))
    }
    env.update(
        PYTHONPATH=path,
        HPCBRIDGE_STATE_DIR=str(tmp / "state"),
        HPCBRIDGE_FLUX_COMMAND=broker.flux,
        HPCBRIDGE_FLUX_URI=str(broker.uri),
    )
    return subprocess.run(
        [str(python), "-m", "hpcbridge", "doctor", "--scheduler", "flux"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def _missing_here(python: Path, modules: tuple) -> list:
    probe = (
        "import importlib.util, sys; "
        "print(*[m for m in sys.argv[1:] if not importlib.util.find_spec(m)])"
    )
    found = subprocess.run(
        [str(python), "-c", probe, *modules], capture_output=True, text=True, check=True
    )
    return found.stdout.split()


def test_every_package_the_bindings_lack_is_named_at_once(bare_python, broker, tmp_path):
    python = bare_python / "venv" / "bin" / "python"
    lacking = _missing_here(python, ("_cffi_backend", "yaml", "ply"))
    assert "_cffi_backend" in lacking and "yaml" in lacking, "the venv saw system packages"
    done = _doctor(python, f"{REPO}{os.pathsep}{bare_python / 'only'}", broker, tmp_path)
    lines = [line for line in done.stdout.splitlines() if line.split()[1:3] == ["flux", "bindings"]]
    assert len(lines) == 1, done.stdout + done.stderr
    wanted = {"_cffi_backend": "cffi", "yaml": "pyyaml", "ply": "ply"}
    named = lines[0].split("fix: pip install ", 1)[1].split(" (", 1)[0].split()
    assert sorted(named) == sorted(wanted[module] for module in lacking), lines[0]


def test_hpcbridge_without_its_dependency_says_which_and_does_not_hide_flux(
    bare_python, broker, tmp_path
):
    python = bare_python / "venv" / "bin" / "python"
    done = _doctor(python, str(REPO), broker, tmp_path)
    flux_lines = [line for line in done.stdout.splitlines() if line.split()[1:2] == ["flux"]]
    assert flux_lines, done.stdout  # was: no Flux line at all
    # the check that needs the package says so (the resource keys' line needs none)
    failing = [line for line in flux_lines if "No module named 'packaging'" in line]
    assert failing, done.stdout
    assert all("fix: pip install packaging" in line for line in failing), failing
    assert done.returncode != 0
