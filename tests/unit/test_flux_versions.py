"""Version policies: chosen by parsed version, overridable, old releases refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcbridge.errors import ConfigurationError, SchedulerUnavailableError
from hpcbridge.schedulers.flux.instance import (
    POLICY_0_26,
    POLICY_0_49,
    POLICY_0_88,
    choose_policy,
    parse_flux_version_output,
    parse_version,
    policy_by_name,
    policy_for_version,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "flux"


def test_parsed_comparison_not_string_comparison() -> None:
    # "0.9" > "0.49" > "0.88" as strings; as versions 0.9 < 0.49 < 0.88.
    assert parse_version("0.9") < parse_version("0.49") < parse_version("0.88.0")
    assert "0.9" > "0.49"


@pytest.mark.parametrize(
    ("version", "policy"),
    [
        ("0.88.0", POLICY_0_88),
        ("0.49.0", POLICY_0_49),
        ("0.50.0-12-g3d9c4b2", POLICY_0_49),
        ("v0.49.0", POLICY_0_49),
        ("0.48.0", POLICY_0_26),
        ("0.26.0", POLICY_0_26),
        ("0.30", POLICY_0_26),
        ("1.0.0", POLICY_0_88),
    ],
)
def test_policy_for_version(version: str, policy: object) -> None:
    assert policy_for_version(version) is policy


@pytest.mark.parametrize("old", ["0.25.0", "0.9.0", "0.17"])
def test_older_than_026_is_refused_clearly(old: str) -> None:
    with pytest.raises(SchedulerUnavailableError, match="too old.*0.26"):
        policy_for_version(old)


def test_policies_differ_only_where_flux_does() -> None:
    assert POLICY_0_26.batch_command == ("mini", "batch")
    assert POLICY_0_26.cancel_command == ("job", "cancel")
    assert not POLICY_0_26.queues and not POLICY_0_26.jobs_json
    assert POLICY_0_49.batch_command == ("batch",)
    assert POLICY_0_49.cancel_command == ("cancel",)
    assert POLICY_0_49.queues and POLICY_0_49.jobs_json and POLICY_0_49.config_rpc


def test_override_wins_and_is_explained() -> None:
    policy, reason = choose_policy("0.88.0", "0.26")
    assert policy is POLICY_0_26 and "0.26" in reason
    policy, reason = choose_policy("0.88.0", None)
    assert policy is POLICY_0_88 and "0.88.0" in reason
    policy, reason = choose_policy("0.88.0", "auto")
    assert policy is POLICY_0_88
    policy, _ = choose_policy(None, None)
    assert policy is POLICY_0_88


@pytest.mark.parametrize(
    ("name", "policy"),
    [
        ("0.26.0", POLICY_0_26),
        ("0.49", POLICY_0_49),
        ("0.60", POLICY_0_49),
        ("latest", POLICY_0_88),
    ],
)
def test_policy_by_name(name: str, policy: object) -> None:
    assert policy_by_name(name) is policy


@pytest.mark.parametrize("bad", ["nonsense", "0.1"])
def test_bad_override_is_a_configuration_error(bad: str) -> None:
    with pytest.raises(ConfigurationError):
        policy_by_name(bad)


def test_flux_version_output_recorded_088() -> None:
    found = parse_flux_version_output((DATA / "version_0.88.txt").read_text())
    assert found["commands"] == found["broker"] == found["libflux-core"] == "0.88.0"


def test_flux_version_output_without_broker() -> None:
    found = parse_flux_version_output((DATA / "version_0.26.handwritten.txt").read_text())
    assert found["commands"] == "0.26.0" and "broker" not in found
    found = parse_flux_version_output((DATA / "version_0.49.handwritten.txt").read_text())
    assert policy_for_version(found["broker"]) is POLICY_0_49
