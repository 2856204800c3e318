"""`hpcbridge doctor` checks for Flux, against a scripted `flux`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hpcbridge import Settings
from hpcbridge.schedulers.flux.doctor import checks
from hpcbridge.transports.base import CommandResult
from tests.support.fake_flux import NAMED, FakeFlux


def test_checks_report_driver_versions_and_queues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "flux", None)
    monkeypatch.delenv("HPCBRIDGE_FLUX_COMMAND", raising=False)
    settings = Settings.from_env(env={}, state_dir=str(tmp_path), scheduler="flux")
    found = {check.name: check for check in checks(settings, FakeFlux(config=NAMED))}
    assert found["flux commands"].ok and "0.88.0" in found["flux commands"].detail
    assert found["flux driver"].detail.startswith("cli (flux bindings unusable")
    assert found["flux adapter version"].detail.startswith("0.88 (broker 0.88.0")
    assert found["flux queues"].detail == "debug, batch (default batch)"
    assert not found["flux bindings"].ok


def test_checks_without_flux(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HPCBRIDGE_FLUX_COMMAND", raising=False)
    executor = FakeFlux()
    executor.handlers["version"] = lambda argv, _: CommandResult(argv, 127, "", "flux: not found")
    settings = Settings.from_env(env={}, state_dir=str(tmp_path))
    [only] = checks(settings, executor)
    assert not only.ok and "flux not found" in only.detail and "not the selected" in only.detail
