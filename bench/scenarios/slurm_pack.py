"""Allocation packing from a login node (issue 37): a sweep of N one-second tasks run to
the end, seconds (lower is better).

The same sweep three ways on the Slurm test cluster, one after the other:

- raw ``sbatch --array`` of the one-second script, then ``squeue`` once a second until
  none of its tasks is left (the baseline: Slurm runs every task);
- hpcbridge ``submit_many`` to Slurm (one array) and ``wait_all``;
- hpcbridge ``run_packed`` (what ``submit-many --pack`` runs): two allocations of 4 CPUs
  (the node's 8 between them, as the array has), each a Flux instance over its CPUs, the
  tasks sent in as plain Flux jobs, the allocations released at the end - their start and
  release are in its time.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

from ..common import (
    Skip,
    row,
    scancel,
    scenario_result,
    skipped_row,
    skipped_scenario,
    slurm_available,
    trivial_script,
)
from .flux_common import find_flux
from .slurm_common import hpcbridge_adapter

NAME = "slurm_pack"
TITLE = "Allocation packing (issue 37): N one-second tasks run to the end, seconds"

RAW = "raw sbatch --array + squeue until done"
ARRAY = "hpcbridge submit_many (Slurm array) + wait_all"
PACKED = "hpcbridge --pack nodes=1,time=15,count=2,cpus_per_node=4 (Flux in each)"
KINDS = {RAW: "raw", ARRAY: "hpcbridge", PACKED: "hpcbridge"}
PACK = "nodes=1,time=15,count=2,cpus_per_node=4"


def _raw(script: str, count: int, workdir: Path, extra: Sequence[str] = ()) -> float:
    started = time.perf_counter()
    argv = ["sbatch", "--parsable", f"--array=0-{count - 1}", "--job-name=hpcbb-pack-raw"]
    argv += list(extra)
    argv += ["--output=/dev/null", "--time=5", f"--chdir={workdir}", script]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"sbatch --array failed: {done.stderr.strip()[:200]}")
    array = done.stdout.strip().split(";")[0]
    try:
        while True:
            left = subprocess.run(
                ["squeue", "-h", "-j", array, "-o", "%i"], capture_output=True, text=True
            )
            if left.returncode == 0 and not left.stdout.strip():
                return time.perf_counter() - started
            time.sleep(1.0)
    finally:
        scancel([array])


def _array(script: str, count: int, workdir: Path) -> float:
    from hpcbridge.model import JobState

    adapter = hpcbridge_adapter(workdir)
    started = time.perf_counter()
    ids = adapter.submit_many([script] * count, {"time": "5m"})
    try:
        finals = adapter.wait_all(ids, poll_interval=1.0, timeout=1800)
        elapsed = time.perf_counter() - started
    finally:
        scancel(ids)
        adapter.close()
    _all_completed([status.state is JobState.COMPLETED for status in finals.values()], count)
    return elapsed


def packed(script: str, count: int, workdir: Path, flux_command: str, pack: str = PACK) -> float:
    """Seconds for ``run_packed`` of ``count`` copies of ``script`` into ``pack``."""
    from hpcbridge.model import JobState
    from hpcbridge.packing import Pack, run_packed

    adapter = hpcbridge_adapter(workdir)
    started = time.perf_counter()
    try:
        finals = run_packed(
            adapter,
            [script] * count,
            {"time": "60s"},
            Pack.parse(pack),
            flux_command=flux_command,
            poll_interval=1.0,
            timeout=1800,
        )
        elapsed = time.perf_counter() - started
    finally:
        adapter.close()
    _all_completed([status.state is JobState.COMPLETED for status in finals], count)
    return elapsed


def _all_completed(completed: List[bool], count: int) -> None:
    if len(completed) != count or not all(completed):
        raise RuntimeError(f"{completed.count(True)} of {count} tasks COMPLETED")


def run(quick: bool, workdir: Path) -> Dict[str, Any]:
    reason = slurm_available()
    if reason:
        return skipped_scenario(NAME, TITLE, reason)
    count = 20 if quick else 500
    script = trivial_script(workdir, "one-second.sh", "sleep 1")
    rows = []
    for name, measure in (
        (RAW, lambda: _raw(script, count, workdir)),
        (ARRAY, lambda: _array(script, count, workdir)),
        (PACKED, lambda: packed(script, count, workdir, find_flux()[0])),
    ):
        try:
            rows.append(row(name, [measure()], kind=KINDS[name]))
        except (Skip, RuntimeError) as exc:
            rows.append(skipped_row(name, str(exc), kind=KINDS[name]))
    return scenario_result(
        NAME,
        TITLE,
        unit="s",
        higher_is_better=False,
        baseline=RAW,
        rows=rows,
        params={"tasks": count, "task": "sleep 1", "pack": PACK, "rounds": 1},
        notes=[
            "The test cluster is one node that declares 8 CPUs on this machine's cores: "
            "Slurm runs 8 array tasks at a time, while each allocation's Flux instance "
            "gets its 4 CPUs as far as the machine has them (its broker bound to the first "
            "4 it may run on: TaskPlugin=task/none confines nothing) and runs one task per "
            "core.",
            "The packed time includes asking for both allocations, starting Flux in them, "
            "reaching each (flux uri slurm:ID) and releasing them.",
        ],
        why={
            PACKED: "the Flux instances run one task per real core, fewer than the CPUs "
            "Slurm declares on this test node",
        },
    )
