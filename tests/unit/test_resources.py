import math
from datetime import timedelta

import pytest

from hpcbridge import ResourceError, Resources
from hpcbridge.resources import RESOURCE_KEYS


def test_keys_begin_with_the_seed_table():
    assert set(RESOURCE_KEYS[:12]) == {
        "partition",
        "qos",
        "account",
        "constraint",
        "time",
        "nodes",
        "ntasks",
        "cpus_per_task",
        "mem",
        "gpus",
        "job_name",
        "output",
    }


def test_resource_error_is_a_value_error():
    with pytest.raises(ValueError):
        Resources.from_mapping({"nodes": 0})


def test_valid_request():
    resources = Resources.from_mapping(
        {
            "partition": "debug",
            "qos": "normal",
            "account": "proj",
            "constraint": "haswell",
            "time": "2:00:00",
            "nodes": 2,
            "ntasks": "4",
            "cpus_per_task": 8,
            "mem": "4G",
            "gpus": 0,
            "job_name": "train",
        }
    )
    assert resources.time == 7200
    assert resources.ntasks == 4
    assert resources.gpus == 0
    assert resources.mem == "4G"


@pytest.mark.parametrize(
    "key, hint",
    [
        ("node", "nodes"),
        ("cpus", "cpus_per_task"),
        ("jobname", "job_name"),
        ("partiton", "partition"),
    ],
)
def test_unknown_key_suggests(key, hint):
    with pytest.raises(ResourceError, match=f"did you mean '{hint}'") as info:
        Resources.from_mapping({key: 1})
    assert info.value.key == key


def test_unknown_key_without_close_match():
    with pytest.raises(ResourceError, match="unknown resource key"):
        Resources.from_mapping({"colour": "blue"})


@pytest.mark.parametrize("key", ["nodes", "ntasks", "cpus_per_task"])
@pytest.mark.parametrize("value", [0, -1, "0", "-3", 1.5, "two", True, None.__class__])
def test_bad_counts(key, value):
    with pytest.raises(ResourceError) as info:
        Resources.from_mapping({key: value})
    assert key in str(info.value)


def test_gpus_zero_is_fine_negative_is_not():
    assert Resources.from_mapping({"gpus": 0}).gpus == 0
    with pytest.raises(ResourceError, match="gpus"):
        Resources.from_mapping({"gpus": -1})


@pytest.mark.parametrize(
    "given, expected",
    [
        ("4G", "4G"),
        ("4g", "4G"),
        ("500M", "500M"),
        ("500", "500M"),
        (500, "500M"),
        ("1T", "1T"),
        ("4GB", "4G"),
        ("1.5G", "1536M"),
        ("64K", "64K"),
    ],
)
def test_memory_forms(given, expected):
    assert Resources.from_mapping({"mem": given}).mem == expected


@pytest.mark.parametrize("given", ["lots", "4Q", "-1G", "0", "G", "4 G B X", True, 1.5])
def test_malformed_memory(given):
    with pytest.raises(ResourceError, match="mem"):
        Resources.from_mapping({"mem": given})


@pytest.mark.parametrize("given", [90, 1.5, "abc", "1:99", "0"])
def test_bad_time(given):
    with pytest.raises(ResourceError, match="time"):
        Resources.from_mapping({"time": given})


def test_time_forms():
    assert Resources.from_mapping({"time": timedelta(minutes=5)}).time == 300
    assert math.isinf(Resources.from_mapping({"time": "UNLIMITED"}).time)


@pytest.mark.parametrize("key", ["partition", "qos", "account", "constraint", "job_name"])
def test_text_keys(key):
    with pytest.raises(ResourceError, match=key):
        Resources.from_mapping({key: "   "})
    with pytest.raises(ResourceError, match=key):
        Resources.from_mapping({key: 5})


def test_hostile_names_are_kept_literally():
    name = "x; touch /tmp/owned $(id) `id` 'q' \"d\"\nnewline"
    assert Resources.from_mapping({"job_name": name}).job_name == name


def test_defaults_are_overridden_and_validated():
    resources = Resources.from_mapping({"nodes": 3}, defaults={"nodes": "1", "partition": "debug"})
    assert resources.nodes == 3
    assert resources.partition == "debug"
    with pytest.raises(ResourceError, match="nodes"):
        Resources.from_mapping({}, defaults={"nodes": "zero"})


def test_none_and_empty_mean_not_asked():
    assert Resources.from_mapping({"partition": None, "qos": ""}).to_dict() == {}


@pytest.mark.parametrize("time", ["2m", "90.5s", "UNLIMITED", "3-00:00:00"])
def test_a_request_as_stored_validates_back_to_itself(time: str) -> None:
    """What a sweep stores of a step (``as_request``) is the same request when read."""
    asked = Resources.from_mapping({"time": time, "mem": "4G", "nodes": 2, "job_name": "x"})
    assert Resources.from_mapping(asked.as_request()) == asked
