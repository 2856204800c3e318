"""The pack request, the allocation's script and the dealing (``hpcbridge.packing``)."""

from __future__ import annotations

import pytest

from hpcbridge.errors import ResourceError
from hpcbridge.packing import (
    ALLOCATION_NAME,
    Pack,
    allocation_script,
    split,
)


def test_a_full_request_is_read() -> None:
    pack = Pack.parse("nodes=2, time=1:30:00,count=3,partition=debug,account=proj")
    assert pack == Pack(time=5400.0, nodes=2, count=3, partition="debug", account="proj")
    assert pack.allocation_resources() == {
        "nodes": 2,
        "time": "1:30:00",
        "job_name": ALLOCATION_NAME,
        "partition": "debug",
        "account": "proj",
    }


def test_time_alone_is_one_allocation_of_one_node() -> None:
    assert Pack.parse("time=30") == Pack(time=1800.0)


@pytest.mark.parametrize(
    "text, said",
    [
        ("nodes=2", "time= is required"),
        ("time=30,nodes=0", "nodes=0: a whole number"),
        ("time=30,count=two", "count=two"),
        ("time=30,gpus=1", "unknown key 'gpus'"),
        ("time=30,time=40", "time given twice"),
        ("time=UNLIMITED", "needs an end"),
        ("time=soon", "time=soon"),
        ("time=30,,", "is not KEY=VALUE"),
    ],
)
def test_a_bad_request_says_what_to_write(text: str, said: str) -> None:
    with pytest.raises(ResourceError, match=said) as caught:
        Pack.parse(text)
    assert "--pack nodes=1,time=30,count=2" in str(caught.value)


def test_the_allocation_runs_one_broker_per_node_and_quotes_the_command() -> None:
    script = allocation_script("/opt/flux 0.88/bin/flux", 3)
    assert script.startswith("#!/bin/sh\n")
    assert "srun --nodes=3 --ntasks-per-node=1 --mpi=none '/opt/flux 0.88/bin/flux' start" in script


def test_split_deals_round_robin() -> None:
    assert split(list(range(7)), 3) == [[0, 3, 6], [1, 4], [2, 5]]
    with pytest.raises(ValueError):
        split([1], 0)
