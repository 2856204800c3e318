"""The settings reference cannot drift from what config.py and settings/variables.py read."""

import re
from dataclasses import fields

from hpcbridge import Settings
from hpcbridge.resources import RESOURCE_KEYS
from hpcbridge.schedulers.native_options import NATIVE_SCHEDULERS
from tests.conftest import REPO

REFERENCE = (REPO / "docs" / "settings.md").read_text()


def _variables_read_by_config():
    sources = [
        REPO / "hpcbridge" / "settings" / "config.py",
        REPO / "hpcbridge" / "settings" / "variables.py",
    ]
    source = "\n".join(path.read_text() for path in sources)
    names = set(re.findall(r'"([A-Z][A-Z_]+)"', source))
    prefixes = {"HPCBRIDGE_", "EXAMLOPS_HPC_", "EXAMLOPS_SLURM_"}
    return {name for name in names if name not in prefixes}


def test_every_variable_is_documented():
    for name in _variables_read_by_config() - {"XDG_STATE_HOME", "HOME"}:  # standards, not ours
        variable = name if name.startswith(("HPCBRIDGE_", "EXAMLOPS_")) else f"HPCBRIDGE_{name}"
        if name.endswith("COST_PER_HOUR"):
            variable = f"HPCBRIDGE_{name}"
        assert variable in REFERENCE, f"{variable} is read by the settings but not documented"


def test_every_variable_the_package_names_is_documented():
    """Variables read (or set for jobs) outside the settings too: the store's local folder,
    the wrapper's."""
    named = set()
    for path in (REPO / "hpcbridge").rglob("*.py"):
        named |= set(re.findall(r'"(HPCBRIDGE_[A-Z][A-Z_0-9]*)"', path.read_text()))
    missing = sorted(name for name in named if f"`{name}`" not in REFERENCE)
    assert not missing, f"named in hpcbridge/ but not in docs/settings.md: {missing}"


def test_every_keyword_is_documented():
    for field in fields(Settings):
        if field.name in ("sources", "resource_defaults"):  # not settings: what was read
            continue
        assert f"`{field.name}`" in REFERENCE, field.name


def test_every_resource_default_is_documented():
    for key in RESOURCE_KEYS:
        if key != "native":  # given per scheduler: HPCBRIDGE_SLURM_OPTIONS, _FLUX_OPTIONS
            assert f"`HPCBRIDGE_{key.upper()}`" in REFERENCE, key
    for scheduler in NATIVE_SCHEDULERS:
        assert f"`HPCBRIDGE_{scheduler.upper()}_OPTIONS`" in REFERENCE, scheduler


def test_documented_error_example_is_real(monkeypatch):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "hpcbridge", "submit", str(REPO / "examples/hello.sh")],
        capture_output=True,
        text=True,
        env={"HPCBRIDGE_SCHEDULER": "pbs", "PATH": "/usr/bin:/bin"},
    )
    assert result.stderr.strip() in REFERENCE
