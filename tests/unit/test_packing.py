"""The pack request, the allocation's script and the placement and renewal rules
(``hpcbridge.packing``); the cores of an instance's R."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Dict

import pytest

from hpcbridge.engine.feeding import LOOK_AGAIN
from hpcbridge.errors import ResourceError
from hpcbridge.model import JobState, JobStatus
from hpcbridge.packing.request import (
    ALLOCATION_NAME,
    INSTANCE_START,
    Pack,
    due_for_renewal,
    packed_task_time,
    room,
    split_resources,
    takes_more,
)
from hpcbridge.packing.script import BROKER, allocation_runs, allocation_script
from hpcbridge.packing.settling import lost_with_node
from hpcbridge.packing.state import COUNT_AGAIN, Held
from hpcbridge.schedulers.flux.instance_answers import parse_capacity, parse_cores


def test_a_full_request_is_read() -> None:
    pack = Pack.parse("nodes=2, time=1:30:00,count=3,partition=debug,account=proj")
    assert pack == Pack(time=5400.0, nodes=2, count=3, partition="debug", account="proj")
    assert pack.allocation_resources() == {
        "nodes": 2,
        "time": "1:30:00",
        "job_name": ALLOCATION_NAME,
        "exclusive": True,  # whole nodes unless cpus_per_node says how many CPUs
        "partition": "debug",
        "account": "proj",
    }
    assert Pack.parse(pack.text()) == pack


def test_cpus_per_node_holds_one_task_of_that_many_cpus_on_each_shared_node() -> None:
    pack = Pack.parse("nodes=2,time=10,cpus_per_node=3,exclusive=0")
    assert pack.allocation_resources() == {
        "nodes": 2,
        "ntasks": 2,
        "cpus_per_task": 3,
        "time": "0:10:00",
        "job_name": ALLOCATION_NAME,
    }
    assert Pack.parse(pack.text()) == pack
    assert Pack.parse("time=10,exclusive=1").allocation_resources()["exclusive"] is True


def test_the_commands_allocation_keys_reach_the_allocation_and_the_rest_the_tasks() -> None:
    given, tasks = split_resources(
        {
            "time": "60s",
            "cpus_per_task": 1,
            "partition": "debug",
            "exclusive": True,
            "constraint": "fast",
            "native": {"slurm": ["--comment=x"], "flux": ["--setattr=a=1"]},
        },
        "slurm",
    )
    assert given == {
        "partition": "debug",
        "exclusive": True,
        "constraint": "fast",
        "native": {"slurm": ["--comment=x"]},
    }
    assert tasks == {"time": "60s", "cpus_per_task": 1, "native": {"flux": ["--setattr=a=1"]}}
    resources = Pack.parse("time=10").allocation_resources(given)
    assert resources["partition"] == "debug" and resources["exclusive"] is True
    assert resources["native"] == {"slurm": ["--comment=x"]}


@pytest.mark.parametrize(
    "text, given, said",
    [
        ("time=10,cpus_per_node=2", {"exclusive": True}, "give one of them"),
        ("time=10,partition=a", {"partition": "b"}, "partition given twice"),
    ],
)
def test_the_commands_keys_that_contradict_the_pack_are_refused(
    text: str, given: Dict[str, Any], said: str
) -> None:
    with pytest.raises(ResourceError, match=said):
        Pack.parse(text).allocation_resources(given)


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
        ("time=30,exclusive=0", "exclusive=0 needs cpus_per_node"),
        ("time=30,exclusive=1,cpus_per_node=2", "give one of them"),
        ("time=30,exclusive=maybe", "exclusive=maybe: 1 or 0"),
        ("time=30,cpus_per_node=0", "cpus_per_node=0: a whole number"),
    ],
)
def test_a_bad_request_says_what_to_write(text: str, said: str) -> None:
    with pytest.raises(ResourceError, match=said) as caught:
        Pack.parse(text)
    assert "--pack nodes=1,time=30,count=2" in str(caught.value)


def test_the_allocation_runs_one_broker_per_node_and_quotes_the_command() -> None:
    script = allocation_script("/opt/flux 0.88/bin/flux", 3)
    assert script.startswith("#!/bin/sh\n")
    # the brokers of three nodes join one instance through Slurm's PMI
    assert "exec srun --nodes=3 --ntasks-per-node=1 --cpu-bind=none --mpi=pmi2 sh -c " in script
    assert script.endswith(" hpcbridge-pack '/opt/flux 0.88/bin/flux'\n")
    shared = allocation_runs("/opt/flux", 1, cpus_per_node=2)
    assert shared.startswith("srun --nodes=1 --ntasks-per-node=1 --cpu-bind=none --mpi=none ")
    assert "--cpus-per-task=2 taskset -c" in shared and shared.endswith("start sleep inf")


@pytest.mark.parametrize(
    "given, node, cpus",
    [("1", "0", 1), ("64", "0", None), ("64(x2),1", "2", 1), ("64(x2),1", "1", None)],
)
def test_each_broker_runs_on_as_many_cpus_as_slurm_gave_its_node(
    tmp_path: Path, given: str, node: str, cpus: Any
) -> None:
    """Its node's count in SLURM_JOB_CPUS_PER_NODE, from the CPUs it may run on (no more
    than there are: None)."""
    flux = tmp_path / "flux"
    flux.write_text('#!/bin/sh\necho "$@"\ngrep Cpus_allowed_list /proc/self/status\n')
    flux.chmod(0o755)
    env = {**os.environ, "SLURM_JOB_CPUS_PER_NODE": given, "SLURM_NODEID": node}
    ran = subprocess.run(
        ["sh", "-c", BROKER, "hpcbridge-pack", str(flux)], env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    said, allowed = ran.stdout.splitlines()
    assert said == "start sleep inf"
    expected = cpus or len(os.sched_getaffinity(0))
    assert len(_cpu_list(allowed.split(":")[1].strip())) == expected


def test_a_broker_with_no_cpu_count_says_so_and_starts_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "SLURM_JOB_CPUS_PER_NODE": ""}
    ran = subprocess.run(
        ["sh", "-c", BROKER, "hpcbridge-pack", "/bin/false"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 1 and "no CPU of this allocation found" in ran.stderr


def _cpu_list(text: str) -> list:
    cpus = []
    for span in text.split(","):
        low, _, high = span.partition("-")
        cpus += range(int(low), int(high or low) + 1)
    return cpus


def test_a_flux_batch_allocation_only_keeps_its_instance_alive() -> None:
    script = allocation_script("/opt/flux/bin/flux", 2, inside="flux")
    assert script.startswith("#!/bin/sh\n") and script.endswith("exec sleep inf\n")
    assert "srun" not in script and "flux start" not in script


def test_a_task_is_sent_only_where_two_task_times_and_the_margin_are_left() -> None:
    # a task sent now waits at most one task time behind another, then runs one
    assert takes_more(time_left=130, task_time=30, margin=60)
    assert not takes_more(time_left=119, task_time=30, margin=60)


def test_a_task_that_fits_its_allocations_whole_time_only_is_refused_saying_what_fits() -> None:
    # 3 minutes hold two 60 s tasks and the 60 s margin to the second, but an allocation
    # is reached once its instance has started: with less left, it would never take one
    with pytest.raises(ResourceError) as caught:
        packed_task_time(60, Pack.parse("time=3"), margin=60)
    said = str(caught.value)
    assert "for the allocation's Flux instance to start" in said, said
    assert "ask for --pack time=0:03:30 or more, or a shorter --time" in said, said
    assert packed_task_time(60, Pack.parse("time=0:03:30"), margin=60) == 60
    assert packed_task_time(45, Pack.parse("time=3"), margin=60) == 45
    # what passes is sent into an allocation reached as late as the start allowed
    assert takes_more(time_left=210 - INSTANCE_START, task_time=60, margin=60)


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


def test_the_cores_up_are_those_free_or_allocated_of_flux_resource_list() -> None:
    # a killed broker's rank is down (its R still holds it): 0.88 and 0.49 said this
    assert parse_capacity("free 2\nallocated 0\ndown 2\n") == (2, 4)
    assert parse_capacity("free 1\nallocated 3\ndown 0\n") == (4, 4)
    assert parse_capacity("") == (0, 0)
    with pytest.raises(ValueError):
        parse_capacity("free lots\n")


def test_an_instances_cores_up_are_counted_until_whole_and_again_after_a_loss() -> None:
    held = Held("a1", 0.0)
    assert held.capacity_due(0.0)  # never counted
    assert held.counted((0, 4), 1.0) == "0 of 4 core(s) up" and held.capacity_due(1.1)
    assert held.counted((2, 4), 2.0) == "2 of 4 core(s) up"  # a broker still joining
    assert not held.capacity_due(2.0 + COUNT_AGAIN - 0.1) and held.capacity_due(2.0 + COUNT_AGAIN)
    assert held.counted((4, 4), 10.0) == "4 of 4 core(s) up" and held.cores == 4
    assert not held.capacity_due(10.0 + COUNT_AGAIN)  # whole: looked at again far less often
    assert held.capacity_due(10.0 + LOOK_AGAIN)
    assert held.counted((4, 4), 50.0) == ""  # nothing changed, nothing said
    assert held.counted(None, 51.0) == "" and held.cores == 4  # not said: kept
    held.counted_at = float("-inf")  # a task was lost with its node
    assert held.capacity_due(52.0)
    assert held.counted((2, 4), 52.0) == "2 of 4 core(s) up" and held.cores == 2
    held.counted_at = float("-inf")  # another loss, the count unchanged: said all the same
    assert held.counted((2, 4), 53.0) == "2 of 4 core(s) up"
    assert held.counted((2, 4), 56.0) == ""


def test_a_task_whose_node_left_the_instance_is_lost_and_no_other() -> None:
    """Flux's words for a job whose broker rank was lost: it is sent again, not ended."""
    node = JobStatus("f1", JobState.FAILED, 1, reason="exec: node failure on vm (rank 1)")
    assert lost_with_node(node)
    # 0.49's words for the same loss
    shell = "exec: lost contact with job shell on broker vm (rank 1)"
    assert lost_with_node(JobStatus("f5", JobState.FAILED, reason=shell))
    assert not lost_with_node(JobStatus("f2", JobState.FAILED, 3, reason="exit 3"))
    assert not lost_with_node(JobStatus("f3", JobState.CANCELLED, reason="exec: node failure"))
    assert not lost_with_node(JobStatus("f4", JobState.COMPLETED, 0))
