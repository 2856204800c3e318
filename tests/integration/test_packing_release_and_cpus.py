"""Allocation packing on Slurm 22.05 and 25.11 (issue 46): every way out of the client
releases the allocations - INT, TERM, HUP, and SIGKILL followed by ``cancel NAME`` or
``wait NAME`` of the name an unnamed pack is given - and a pack uses what Slurm gave it:
``cpus_per_node=1`` is one CPU (sacct's AllocCPUS), its Flux one core, one task at a time;
whole nodes by default (``--exclusive``), their Flux over the CPUs sacct shows that the
machine has (the test node declares more CPUs than there are).  The ways out and whole
nodes run on 22.05 only: on 25.11, test_slurm_nodes' packs of two whole nodes are released
at their end and their R is each node's allocated CPUs, summed.

Needs the Slurm test clusters (containers/slurm) and flux-core on this machine (the
allocations' node is this machine)."""

from __future__ import annotations

import logging
import os
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from hpcbridge.model import JobState
from hpcbridge.packing import Pack, run_packed
from hpcbridge.packing.request import ALLOCATION_NAME
from hpcbridge.schedulers.flux.instance_answers import parse_cores
from tests.support import pack_stops
from tests.support.flux_cases import require_flux, write_script
from tests.support.slurm_clusters import TARGETS, cluster_for, make_adapter, run_slurm

pytestmark = [pytest.mark.flux, pytest.mark.slurm]


@pytest.fixture(scope="module", params=["22.05-cli", "25.11-cli"])
def cluster(request: pytest.FixtureRequest) -> Iterator[Dict[str, str]]:
    yield from cluster_for(TARGETS[request.param])


def once_on_22_05(request: pytest.FixtureRequest, why: str) -> None:
    """Cases whose 25.11 run test_slurm_nodes' allocations of two nodes prove (``why``)."""
    if request.node.callspec.params["cluster"] != "22.05-cli":
        pytest.skip(f"run on 22.05-cli; on 25.11 test_slurm_nodes proves {why}")


def in_queue(cluster: Dict[str, str]) -> List[str]:
    listed = run_slurm(["squeue", "-h", "-n", ALLOCATION_NAME, "-o", "%i"], cluster)
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.split()


def test_the_dry_run_shows_what_the_allocation_holds_and_the_options_it_takes(
    cluster: Dict[str, str], tmp_path: Path
) -> None:
    """Whole nodes by default; ``cpus_per_node`` instead; the command's allocation keys
    and Slurm options go to the allocation, not to the tasks."""
    task = write_script(tmp_path / "scripts", "task.sh", "echo never\n")
    env = {**os.environ, **cluster, "HPCBRIDGE_STATE_DIR": str(tmp_path / "state")}
    argv = [sys.executable, "-m", "hpcbridge", "submit-many", "--scheduler", "slurm", task]
    argv += ["--time", "1m", "--dry-run", "--pack"]
    whole = run_slurm([*argv, "time=10"], env, timeout=60)
    assert whole.returncode == 0, whole.stderr
    sbatch = next(line for line in whole.stdout.splitlines() if line.startswith("sbatch"))
    assert "--nodes=1" in sbatch and "--exclusive" in sbatch, whole.stdout
    shared = run_slurm(
        [*argv, "time=10,cpus_per_node=2", "--partition", "debug", "--slurm-option=--nice=5"],
        env,
        timeout=60,
    )
    assert shared.returncode == 0, shared.stderr
    sbatch = next(line for line in shared.stdout.splitlines() if line.startswith("sbatch"))
    for flag in ("--ntasks=1", "--cpus-per-task=2", "--partition=debug", "--nice=5"):
        assert flag in sbatch, shared.stdout
    assert "--exclusive" not in sbatch
    assert "--cpus-per-task=2 taskset" in shared.stdout  # each broker on its CPUs


def test_every_way_out_of_the_client_releases_the_allocation(
    cluster: Dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # the ways out are the client's; the release they end in (scancel) is the one a pack's
    # end makes, which the 25.11 cluster of four nodes sees
    once_on_22_05(request, "that a pack's allocations are released (scancel)")
    flux = require_flux()

    def command(folder: Path, task: str) -> Tuple[List[str], Dict[str, str]]:
        env = {
            **os.environ,
            **cluster,
            "HPCBRIDGE_STATE_DIR": str(folder / "state"),
            "HPCBRIDGE_FLUX_COMMAND": flux,
            "HPCBRIDGE_MIN_POLL_INTERVAL": "0",
        }
        args = folder / "args"
        args.write_text("".join(f"{index}\n" for index in range(pack_stops.TASKS)))
        argv = [sys.executable, "-m", "hpcbridge", "submit-many", "--scheduler", "slurm", task]
        return argv + ["--args-file", str(args), "--time", "1m", "--poll-interval", "0.5"], env

    # one CPU each: the five allocations share the test node
    clients = pack_stops.start(command, tmp_path, "time=10,cpus_per_node=1")
    took = pack_stops.stop_each(clients, lambda job_id: job_id not in in_queue(cluster))
    assert set(took) == set(pack_stops.WAYS)
    print("allocation gone from squeue after (s):", {way: round(t, 1) for way, t in took.items()})


def allocation_cpus(cluster: Dict[str, str], job_id: str) -> int:
    """sacct's AllocCPUS of the allocation (once slurmdbd has it)."""
    deadline = time.monotonic() + 60
    while True:
        listed = run_slurm(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "AllocCPUS"], cluster)
        if listed.stdout.strip():
            return int(listed.stdout.split()[0])
        assert time.monotonic() < deadline, listed.stderr
        time.sleep(0.5)


def packed(
    cluster: Dict[str, str], tmp_path: Path, spec: str, count: int, caplog: pytest.LogCaptureFixture
) -> Tuple[List[Tuple[float, float]], int, int]:
    """``count`` tasks of a second each in a pack of ``spec``: their (start, end) as each
    wrote them, the cores of its Flux instance's R, and sacct's AllocCPUS."""
    flux = require_flux()
    slurm = make_adapter(cluster, tmp_path)
    ran, r = tmp_path / "ran", tmp_path / "R"
    task = write_script(
        tmp_path / "scripts",
        "task.sh",
        f'started=$(date +%s.%N)\n[ "$1" != 0 ] || {shlex.quote(flux)} resource R > {r}\n'
        f'sleep 1\necho "$started $(date +%s.%N)" >> {ran}\n',
    )
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        finals = run_packed(
            slurm,
            [(task, [str(index)]) for index in range(count)],
            {"time": "60s"},
            Pack.parse(spec),
            flux_command=flux,
            poll_interval=0.5,
            timeout=240,
        )
    slurm.close()
    assert [status.state for status in finals] == [JobState.COMPLETED] * count
    asked = re.findall(r"pack: allocation (\d+) asked for", caplog.text)
    assert len(asked) == 1, caplog.text
    rows = [line.split() for line in ran.read_text().splitlines()]
    spans = sorted((float(started), float(ended)) for started, ended in rows)
    cores, allocated = parse_cores(r.read_text()), allocation_cpus(cluster, asked[0])
    print(f"pack {spec}: sacct AllocCPUS {allocated}, its Flux's R {cores} core(s)")
    return spans, cores, allocated


def test_a_pack_of_one_cpu_per_node_holds_one_and_runs_one_task_at_a_time(
    cluster: Dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spans, cores, allocated = packed(cluster, tmp_path, "time=10,cpus_per_node=1", 4, caplog)
    assert (allocated, cores) == (1, 1)
    for earlier, later in zip(spans, spans[1:]):
        assert later[0] >= earlier[1], f"two tasks at once: {spans}"


def test_a_whole_node_pack_gives_its_flux_the_cpus_slurm_allocated_that_exist(
    cluster: Dict[str, str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
) -> None:
    """The test node declares more CPUs than the machine has: Flux gets those of the
    allocation it can run on (its broker bound to them), never more than sacct shows."""
    once_on_22_05(request, "whole nodes' R: each node's allocated CPUs, summed")
    _, cores, allocated = packed(cluster, tmp_path, "time=10", 1, caplog)
    machine = len(os.sched_getaffinity(0))
    assert cores == min(allocated, machine), f"AllocCPUS {allocated}, machine {machine}"
