"""Which flux-core installs the Flux tests use (``find_flux_commands``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import flux as testing


def _install(root: Path, name: str) -> str:
    flux = root / name / "bin" / "flux"
    flux.parent.mkdir(parents=True)
    flux.write_text("#!/bin/sh\n")
    flux.chmod(0o755)
    return os.path.realpath(flux)


def test_installs_newest_first_by_parsed_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new, older = (_install(tmp_path, n) for n in ("flux-0.49", "flux-0.88", "flux-0.9"))
    monkeypatch.setattr(testing, "DEFAULT_GLOB", str(tmp_path / "flux-*" / "bin" / "flux"))
    assert testing.find_flux_commands({"PATH": str(tmp_path / "none")}) == [new, old, older]


def test_prefix_setting_names_exactly_the_releases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _install(tmp_path, "flux-0.49")
    _install(tmp_path, "flux-0.88")
    monkeypatch.setattr(testing, "DEFAULT_GLOB", str(tmp_path / "flux-*" / "bin" / "flux"))
    env = {
        "PATH": str(tmp_path / "flux-0.88" / "bin"),
        "HPCBRIDGE_TEST_FLUX_PREFIXES": str(tmp_path / "flux-0.49"),
    }
    assert testing.find_flux_commands(env) == [old]
