"""Slurm ids, array specs, states, exit codes and times: pure parsers."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcbridge.model import JobState
from hpcbridge.schedulers.slurm import ids, status

UTC = timezone.utc


# -- state map --------------------------------------------------------------


@pytest.mark.parametrize(
    ("native", "state"),
    [
        ("PENDING", JobState.PENDING),
        ("CONFIGURING", JobState.PENDING),
        ("REQUEUED", JobState.PENDING),
        ("REQUEUE_HOLD", JobState.PENDING),
        ("REQUEUE_FED", JobState.PENDING),
        ("RESV_DEL_HOLD", JobState.PENDING),
        ("RUNNING", JobState.RUNNING),
        ("COMPLETING", JobState.RUNNING),
        ("STAGE_OUT", JobState.RUNNING),
        ("SIGNALING", JobState.RUNNING),
        ("SUSPENDED", JobState.RUNNING),
        ("STOPPED", JobState.RUNNING),
        ("RESIZING", JobState.RUNNING),
        ("COMPLETED", JobState.COMPLETED),
        ("FAILED", JobState.FAILED),
        ("NODE_FAIL", JobState.FAILED),
        ("BOOT_FAIL", JobState.FAILED),
        ("OUT_OF_MEMORY", JobState.FAILED),
        ("SPECIAL_EXIT", JobState.FAILED),
        ("LAUNCH_FAILED", JobState.FAILED),
        ("PREEMPTED", JobState.FAILED),
        ("CANCELLED", JobState.CANCELLED),
        ("CANCELLED by 0", JobState.CANCELLED),
        ("CANCELLED by 1000", JobState.CANCELLED),
        ("CANCELLED+", JobState.CANCELLED),
        ("REVOKED", JobState.CANCELLED),
        ("TIMEOUT", JobState.TIMEOUT),
        ("DEADLINE", JobState.TIMEOUT),
        ("CD", JobState.COMPLETED),
        ("PD", JobState.PENDING),
        ("TO", JobState.TIMEOUT),
        ("running", JobState.RUNNING),
    ],
)
def test_state_map(native: str, state: JobState) -> None:
    assert status.map_state(native) is state


@pytest.mark.parametrize("native", ["", "   ", "FROBNICATED", "UPDATE_DB", "N/A"])
def test_unknown_states_stay_unknown(native: str) -> None:
    assert status.map_state(native) is JobState.UNKNOWN


@given(st.text(max_size=30))
def test_state_map_is_total(native: str) -> None:
    assert isinstance(status.map_state(native), JobState)


def test_every_long_state_has_a_compact_code_mapping_to_it() -> None:
    for long_name in status.COMPACT_STATES.values():
        assert long_name in status.STATE_MAP


# -- exit codes, times ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("0:0", 0),
        ("3:0", 3),
        ("0:9", 137),
        ("0:15", 143),
        ("1:15", 143),
        ("255:0", 255),
        ("", None),
        ("x", None),
        ("7", 7),
    ],
)
def test_parse_exit_code(text: str, code: object) -> None:
    assert status.parse_exit_code(text) == code


@pytest.mark.parametrize(
    ("text", "code"),
    [("0", 0), ("768", 3), ("9", 137), ("15", 143), ("65280", 255), ("", None), ("3:0", 3)],
)
def test_parse_wait_status(text: str, code: object) -> None:
    # squeue -O exit_code prints the raw wait(2) status: 768 for "exit 3".
    assert status.parse_wait_status(text) == code


@given(st.integers(min_value=0, max_value=255), st.integers(min_value=0, max_value=64))
def test_wait_status_and_exit_code_agree(code: int, signal: int) -> None:
    wait_status = signal if signal else code << 8
    expected = 128 + signal if signal else code
    assert status.parse_wait_status(str(wait_status)) == expected
    assert status.parse_exit_code(f"{0 if signal else code}:{signal}") == expected


@pytest.mark.parametrize("text", ["Unknown", "None", "N/A", "NONE", "", "(null)", "garbage"])
def test_parse_time_nothing(text: str) -> None:
    assert status.parse_time(text) is None


def test_parse_time_is_local_and_aware() -> None:
    moment = status.parse_time("2026-11-29T15:32:57")
    assert moment is not None and moment.tzinfo is not None
    assert moment.replace(tzinfo=None) == datetime(2026, 11, 29, 15, 32, 57)
    assert moment == datetime(2026, 11, 29, 15, 32, 57).astimezone()


def test_parse_time_in_a_given_zone() -> None:
    zone = timezone(timedelta(hours=2))
    moment = status.parse_time("2026-11-29T15:32:57", zone)
    assert moment == datetime(2026, 11, 29, 13, 32, 57, tzinfo=UTC)


# -- ids and arrays -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8", ["8"]),
        ("13_1", ["13_1"]),
        ("13_[3-6%2]", ["13_3", "13_4", "13_5", "13_6"]),
        ("14_[3-5]", ["14_3", "14_4", "14_5"]),
        ("19_[1,3,5-6]", ["19_1", "19_3", "19_5", "19_6"]),
        ("20_[0-8:4]", ["20_0", "20_4", "20_8"]),
        ("2;hpcbridge", ["2"]),
        ("", []),
    ],
)
def test_expand_job_id(text: str, expected: list) -> None:
    assert ids.expand_job_id(text) == expected


@given(st.lists(st.integers(min_value=0, max_value=5000), min_size=1, max_size=40, unique=True))
def test_expand_array_spec_roundtrip(indices: list) -> None:
    indices = sorted(indices)
    text = ",".join(str(index) for index in indices)
    assert ids.expand_array_spec(f"[{text}%3]") == indices


@given(st.integers(0, 1000), st.integers(0, 1000))
def test_expand_range(first: int, length: int) -> None:
    assert ids.expand_array_spec(f"{first}-{first + length}") == list(
        range(first, first + length + 1)
    )


def test_malformed_spec_expands_to_nothing() -> None:
    assert ids.expand_array_spec("[a-b]") == []
    assert ids.expand_array_spec("5-3") == []


def test_split_job_id() -> None:
    assert ids.split_job_id("123_4") == ("123", 4)
    assert ids.split_job_id("123") == ("123", None)


def test_job_list_dedups_and_collapses_big_arrays() -> None:
    asked = [f"9_{index}" for index in range(200)] + ["5", "5", "7_1"]
    assert ids.job_list(asked) == ["9", "5", "7_1"]
    assert ids.job_list(["9_1", "9_2"]) == ["9_1", "9_2"]


@pytest.mark.parametrize("typed", ["123", " 123 ", "123_4", "123;cluster"])
def test_job_id_of_takes_what_users_type(typed: str) -> None:
    assert ids.job_id_of(typed) in ("123", "123_4")


@pytest.mark.parametrize("bad", ["abc", "", "123_[1-3]", "12.x", "ƒCFKYzj"])
def test_job_id_of_refuses_text_that_is_no_slurm_id(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a Slurm job id"):
        ids.job_id_of(bad)
