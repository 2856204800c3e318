import math
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcbridge.resources import DurationError, format_fsd, format_slurm_time, parse_duration


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("30", 30 * 60),  # M
        ("5:30", 5 * 60 + 30),  # M:S
        ("2:00:00", 7200),  # H:M:S
        ("100:00:00", 360000),  # hours may exceed a day
        ("1-0", 86400),  # D-H
        ("1-2", 86400 + 7200),
        ("2-3:04", 2 * 86400 + 3 * 3600 + 4 * 60),  # D-H:M
        ("1-02:03:04", 86400 + 2 * 3600 + 3 * 60 + 4),  # D-H:M:S
        ("0:02", 2),
        ("90s", 90),  # Flux durations need a unit
        ("15m", 900),
        ("1.5h", 5400),
        ("2d", 172800),
        ("500ms", 0.5),
    ],
)
def test_every_time_form(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["UNLIMITED", "unlimited", "infinite", "inf"])
def test_unlimited(text):
    assert math.isinf(parse_duration(text))
    assert format_slurm_time(parse_duration(text)) == "UNLIMITED"


def test_timedelta():
    assert parse_duration(timedelta(hours=2)) == 7200


@pytest.mark.parametrize("value", [90, 1.5, True])
def test_bare_numbers_are_refused(value):
    with pytest.raises(DurationError, match="ambiguous"):
        parse_duration(value)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "1:2:3:4",
        "1-",
        "-5",
        "1:60",
        "1:60:00",
        "1-24",
        "1-1:60",
        "5x",
        "0",
        "0s",
        "0:00",
        "1.5",
        "h",
    ],
)
def test_bad_times_are_refused(text):
    with pytest.raises(DurationError):
        parse_duration(text)


def test_negative_timedelta_refused():
    with pytest.raises(DurationError):
        parse_duration(timedelta(seconds=-1))


def test_seed_example_translations():
    seconds = parse_duration("2:00:00")
    assert format_slurm_time(seconds) == "2:00:00"
    assert format_fsd(seconds) == "7200s"


def test_formats():
    assert format_slurm_time(59) == "0:00:59"
    assert format_slurm_time(86400 + 61) == "1-00:01:01"
    assert format_slurm_time(0.2) == "0:00:01"  # Slurm takes whole seconds: rounded up
    assert format_fsd(0.5) == "0.5s"


@given(st.integers(min_value=1, max_value=10 * 365 * 86400))
def test_slurm_roundtrip(seconds):
    assert parse_duration(format_slurm_time(seconds)) == seconds


@given(st.integers(min_value=1, max_value=10 * 365 * 86400))
def test_fsd_roundtrip(seconds):
    assert parse_duration(format_fsd(seconds)) == seconds


@given(st.integers(0, 400), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_slurm_forms_agree(days, hours, minutes, secs):
    total = ((days * 24 + hours) * 60 + minutes) * 60 + secs
    if total == 0:
        return
    assert parse_duration(f"{days}-{hours}:{minutes}:{secs}") == total
    assert parse_duration(f"{days * 24 + hours}:{minutes}:{secs}") == total
