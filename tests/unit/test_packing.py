"""The pack request, the allocation's script and the placement and renewal rules
(``hpcbridge.packing``); the cores of an instance's R."""

from __future__ import annotations

import json

import pytest

from hpcbridge.errors import ResourceError
from hpcbridge.packing import (
    ALLOCATION_NAME,
    Pack,
    allocation_script,
    due_for_renewal,
    room,
    takes_more,
)
from hpcbridge.schedulers.flux.command_line import parse_cores


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


def test_a_flux_batch_allocation_only_keeps_its_instance_alive() -> None:
    script = allocation_script("/opt/flux/bin/flux", 2, inside="flux")
    assert script.startswith("#!/bin/sh\n") and script.endswith("exec sleep inf\n")
    assert "srun" not in script and "flux start" not in script


def test_a_task_is_sent_only_where_two_task_times_and_the_margin_are_left() -> None:
    # a task sent now waits at most one task time behind another, then runs one
    assert takes_more(time_left=130, task_time=30, margin=60)
    assert not takes_more(time_left=119, task_time=30, margin=60)


def test_the_next_allocation_is_asked_for_one_start_time_before_the_old_one_stops() -> None:
    # the old one stops taking tasks under 120 s left; the last start took 40 s
    assert not due_for_renewal(time_left=161, task_time=30, margin=60, lead=40)
    assert due_for_renewal(time_left=159, task_time=30, margin=60, lead=40)


def test_an_instance_takes_two_tasks_per_core() -> None:
    assert room(cores=4, in_flight=0) == 8
    assert room(cores=4, in_flight=7) == 1
    assert room(cores=4, in_flight=9) == 0
    assert room(cores=0, in_flight=0) == 2  # R unread: one core assumed


@pytest.mark.parametrize(
    "r_lite, cores",
    [
        ([{"rank": "0", "children": {"core": "0-1"}}], 2),
        ([{"rank": "0-3", "children": {"core": "0-7"}}], 32),
        ([{"rank": "0,2", "children": {"core": "0-3,6"}}, {"rank": "1", "children": {}}], 10),
        ([], 0),
    ],
)
def test_the_cores_of_an_instance_are_counted_from_its_r(r_lite: list, cores: int) -> None:
    document = {"version": 1, "execution": {"R_lite": r_lite, "expiration": 0}}
    assert parse_cores(json.dumps(document)) == cores
