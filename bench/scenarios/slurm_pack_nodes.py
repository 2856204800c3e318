"""Packing across nodes (issue 50): N one-second tasks into one two-node allocation,
seconds to the end (lower is better).

A Slurm 25.11 cluster of four nodes of its own on this machine (``containers/slurm``
with ``HPCBRIDGE_SLURM_NODES=4``, the Slurm under ``HPCBRIDGE_TEST_SLURM_PREFIX`` built
with ``--enable-multiple-slurmd``; started and stopped here), each node declared with
the machine's cores, and a partition ``two`` of nodes n1 and n2.  The same tasks two ways
on those two nodes, one after the other:

- raw ``sbatch --array`` of the one-second script in partition ``two``, then ``squeue``
  once a second until none of its tasks is left (the baseline: Slurm runs every task);
- hpcbridge ``run_packed`` (``submit-many --pack "nodes=2,time=15,partition=two"``): one
  allocation of both nodes, one Flux instance over them (a broker per node, joined by
  pmi2), the tasks sent in as plain Flux jobs, the allocation released at the end - its
  start and release are in the time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List

from ..common import (
    SLURM_PREFIX,
    Skip,
    load_env_file,
    row,
    scenario_result,
    skipped_row,
    skipped_scenario,
    trivial_script,
)
from .flux_common import find_flux
from .slurm_pack import _raw, packed

NAME = "slurm_pack_nodes"
TITLE = "Packing across nodes (issue 50): N one-second tasks on two nodes, seconds"

RAW = "raw sbatch --array on the two nodes + squeue until done"
PACKED = "hpcbridge --pack nodes=2,time=15,partition=two (one Flux instance over both)"
KINDS = {RAW: "raw", PACKED: "hpcbridge"}
PACK = "nodes=2,time=15,count=1,partition=two"
REPO = Path(__file__).resolve().parents[2]
CPUS = os.cpu_count() or 1


@contextlib.contextmanager
def four_nodes() -> Iterator[Dict[str, str]]:
    """``os.environ`` pointed at a four-node cluster of this scenario's own while the block
    runs (state /tmp/hpcbridge-slurm-benchnodes, ports 17360-17365); stopped after."""
    stamp = Path(SLURM_PREFIX) / ".hpcbridge-configure"
    if "--enable-multiple-slurmd" not in (stamp.read_text() if stamp.is_file() else ""):
        raise Skip(
            f"the Slurm under {SLURM_PREFIX} is not built with --enable-multiple-slurmd: "
            "bash scripts/build-schedulers.sh slurm-25.11"
        )
    if os.geteuid() != 0:
        raise Skip("a Slurm cluster of its own needs root (containers/slurm/start.sh)")
    state = "/tmp/hpcbridge-slurm-benchnodes"
    variables = {
        "HPCBRIDGE_SLURM_PREFIX": SLURM_PREFIX,
        "HPCBRIDGE_SLURM_STATE": state,
        "HPCBRIDGE_SLURM_ACCOUNTING": "0",
        "HPCBRIDGE_SLURM_CLUSTER": "hpcbbenchnodes",
        "HPCBRIDGE_SLURM_CTLD_PORT": "17360",
        "HPCBRIDGE_SLURM_SLURMD_PORT": "17361",
        "HPCBRIDGE_SLURM_DBD_PORT": "17365",
        "HPCBRIDGE_SLURM_NODES": "4",
        "HPCBRIDGE_SLURM_CPUS": str(CPUS),
        "HPCBRIDGE_SLURM_EXTRA_CONF": "PartitionName=two Nodes=n[1-2] MaxTime=INFINITE State=UP",
    }

    def script(action: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(REPO / "containers" / "slurm" / action)],
            env={**os.environ, **variables},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    script("stop.sh")
    started = script("start.sh")
    try:
        if started.returncode != 0:
            raise Skip(f"the four-node cluster did not start: {started.stderr.strip()[-300:]}")
        values = {k: v for k, v in load_env_file(Path(state) / "env.sh").items() if "$" not in v}
        values["PATH"] = f"{SLURM_PREFIX}/bin{os.pathsep}{os.environ.get('PATH', '')}"
        saved = {name: os.environ.get(name) for name in values}
        os.environ.update(values)
        try:
            yield values
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    finally:
        script("stop.sh")


class CountsSeen(logging.Filter):
    """On the ``hpcbridge`` logger, set to INFO: keeps the pack's counts of its instance's
    cores ("pack: allocation N: 4 of 4 core(s) up"), and lets on only the records the
    logger's level before let through."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level
        self.counts: List[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        found = re.search(r"(\d+ of \d+) core\(s\) up", record.getMessage())
        if found:
            self.counts.append(found.group(1))
        return record.levelno >= self.level


def run(quick: bool, workdir: Path) -> Dict[str, Any]:
    count = 20 if quick else 500
    script = trivial_script(workdir, "one-second.sh", "sleep 1")
    rows = []
    logger = logging.getLogger("hpcbridge")
    level, seen = logger.level, CountsSeen(logger.getEffectiveLevel())
    logger.addFilter(seen)
    logger.setLevel(min(seen.level, logging.INFO))
    try:
        with four_nodes():
            for name, measure in (
                (RAW, lambda: _raw(script, count, workdir, ["--partition=two"])),
                (PACKED, lambda: packed(script, count, workdir, find_flux()[0], PACK)),
            ):
                try:
                    rows.append(row(name, [measure()], kind=KINDS[name]))
                except (Skip, RuntimeError) as exc:
                    rows.append(skipped_row(name, str(exc), kind=KINDS[name]))
    except Skip as exc:
        return skipped_scenario(NAME, TITLE, str(exc))
    finally:
        logger.removeFilter(seen)
        logger.setLevel(level)
    return scenario_result(
        NAME,
        TITLE,
        unit="s",
        higher_is_better=False,
        baseline=RAW,
        rows=rows,
        params={"tasks": count, "task": "sleep 1", "pack": PACK, "nodes": 2, "rounds": 1},
        notes=[
            f"Four nodes on this machine, each declared with its {CPUS} cores: Slurm runs "
            f"{2 * CPUS} array tasks at a time on the two nodes; Flux sees {CPUS} cores per "
            f"node ({2 * CPUS} in the instance's R: each broker bound to its node's CPUs, "
            "which are the same cores of this one machine), one task per core.  The pack "
            f"counted: {', '.join(seen.counts) or 'nothing (no count logged)'} core(s) up.",
            "The packed time includes asking for the allocation, starting Flux on both "
            "nodes, reaching it (flux uri slurm:ID) and releasing it.",
        ],
    )
