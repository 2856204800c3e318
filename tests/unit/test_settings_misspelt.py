"""A misspelt ``HPCBRIDGE_*`` variable gets one warning naming the nearest known one - not
a refusal, other tools may share the prefix - and ``native`` given as a list says how to
write it (issue 46, item 8)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from hpcbridge.errors import ResourceError
from hpcbridge.resources import Resources
from hpcbridge.settings import variables
from hpcbridge.settings.config import Settings
from hpcbridge.settings.variables import known_variables, misspelt

SETTINGS_DOC = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def test_the_nearest_known_variable_is_named() -> None:
    env = {
        "HPCBRIDGE_SCHEDULAR": "slurm",
        "HPCBRIDGE_SSH_HOSTS": "login1",
        "HPCBRIDGE_SCHEDULER": "mock",  # known
        "HPCBRIDGE_FROBNICATE_WIDGETS": "1",  # another tool's, like no setting
        "HPCBRIDGE_TEST_FLUX_PREFIXES": "/opt/flux",  # the test harness's
        "OTHER_SCHEDULAR": "x",  # not the prefix
    }
    assert misspelt(env) == [
        ("HPCBRIDGE_SCHEDULAR", "HPCBRIDGE_SCHEDULER"),
        ("HPCBRIDGE_SSH_HOSTS", "HPCBRIDGE_SSH_HOST"),
    ]


def test_every_documented_variable_is_known() -> None:
    """The known names come from the settings table: no documented variable is warned of."""
    documented = set(re.findall(r"`HPCBRIDGE_([A-Z0-9_]+)`", SETTINGS_DOC.read_text()))
    documented.discard("X")  # the doc's placeholder for any setting
    assert len(documented) > 20
    assert documented <= set(known_variables()), documented - set(known_variables())


def test_one_warning_per_variable_and_the_setting_is_ignored(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(variables, "_warned", set())
    caplog.set_level(logging.WARNING, logger="hpcbridge")
    env = {"HPCBRIDGE_SCHEDULAR": "slurm"}
    first = Settings.from_env(env)
    Settings.from_env(env)
    assert first.scheduler == "mock"  # ignored, not refused
    warnings = [r.getMessage() for r in caplog.records if "SCHEDULAR" in r.getMessage()]
    assert warnings == [
        "HPCBRIDGE_SCHEDULAR is not a setting of hpcbridge and is ignored: "
        "did you mean HPCBRIDGE_SCHEDULER?"
    ]


def test_native_as_a_list_says_it_takes_a_dict_and_shows_the_form() -> None:
    with pytest.raises(ResourceError) as caught:
        Resources.from_mapping({"native": ["--nice=5"]})
    message = str(caught.value)
    assert "takes a dict" in message and "native={'slurm': ['--nice=5']}" in message
    assert "--slurm-option" in message
    assert "no scheduler" not in message
    # the forms that are right still are
    assert Resources.from_mapping({"native": {"slurm": ["--nice=5"]}}).native == (
        ("slurm", ("--nice=5",)),
    )
