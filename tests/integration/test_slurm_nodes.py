"""Jobs of several nodes on a Slurm 25.11 cluster of four (issue 50).

The module starts a cluster of its own: nodes ``n1``..``n4`` on this one host, a slurmd
each (``containers/slurm/start.sh`` with ``HPCBRIDGE_SLURM_NODES=4``; the Slurm under
``HPCBRIDGE_TEST_SLURM_PREFIX`` built with ``--enable-multiple-slurmd``), each node
declared with the host's cores, and stops it at the end - so it runs in any order.  Every
case runs with the CLI driver and with the pyslurm driver (where pyslurm 25.11 is
installed: it loads the client library it was built against, the same release).  The
launcher's tasks say on which node they run (``SLURMD_NODENAME``): every node has this
host's name.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from hpcbridge.model import JobState
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from tests.support.slurm_clusters import PREFIX, make_adapter, own_cluster

pytestmark = [pytest.mark.slurm]

NODES = 4
#: each node is declared with the host's cores (jobs are not pinned to them)
CPUS = os.cpu_count() or 1

#: every task of the step prints where it runs
WHERE = "$HPCBRIDGE_LAUNCHER sh -c 'echo \"task $SLURM_PROCID on $SLURMD_NODENAME\"'\n"

#: the task on the step's second node fails at once; the first node's ends later
ONE_NODE_FAILS = """$HPCBRIDGE_LAUNCHER sh -c '
if [ "$SLURM_NODEID" = 1 ]; then echo "fails on $SLURMD_NODENAME"; exit 3; fi
sleep 3; echo "ends later on $SLURMD_NODENAME"'
"""


@pytest.fixture(scope="module")
def four_nodes() -> Iterator[Dict[str, str]]:
    cluster = own_cluster("nodes4", 17310, prefix=PREFIX, nodes=NODES, cpus=CPUS)
    with cluster as env, pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)  # the commands the adapter runs reach it
        yield env


@pytest.fixture(params=["cli", "native"])
def adapter(
    request: pytest.FixtureRequest, four_nodes: Dict[str, str], tmp_path: Path
) -> Iterator[RealSlurmAdapter]:
    driver = request.param
    if driver == "native":
        try:
            version = importlib.metadata.version("pyslurm")
        except importlib.metadata.PackageNotFoundError:
            pytest.skip(
                "pyslurm is not installed (scripts/test.sh installs the wheel built for 25.11)"
            )
        if not version.startswith("25.11."):
            pytest.skip(f"pyslurm {version} is not built for Slurm 25.11")
    made = make_adapter({**four_nodes, "HPCBRIDGE_SLURM_DRIVER": driver}, tmp_path)
    try:
        yield made
    finally:
        made.store.close()


def script(folder: Path, body: str) -> Path:
    path = folder / "job.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def tasks_by_node(log: str) -> Dict[str, List[str]]:
    """The lines ``task <rank> on <node>`` of a job's output, by node."""
    found: Dict[str, List[str]] = {}
    for line in log.splitlines():
        words = line.split()
        if len(words) == 4 and words[0] == "task" and words[2] == "on":
            found.setdefault(words[-1], []).append(line)
    return found


def test_the_cluster_has_four_nodes(four_nodes: Dict[str, str]) -> None:
    assert four_nodes["HPCBRIDGE_SLURM_NODE"] == f"n[1-{NODES}]"
    assert four_nodes["HPCBRIDGE_SLURM_NODES"] == str(NODES)


def test_two_nodes_run_the_launcher_step_on_both(adapter: RealSlurmAdapter, tmp_path: Path) -> None:
    job_id = adapter.submit_job(script(tmp_path, WHERE), {"nodes": 2, "time": "60"})
    status = adapter.wait(job_id, poll_interval=1, timeout=120)
    log = adapter.get_job_logs(job_id)
    assert status.state is JobState.COMPLETED and status.exit_code == 0, log
    by_node = tasks_by_node(log)
    assert len(by_node) == 2 and set(by_node) <= {f"n{i}" for i in range(1, NODES + 1)}, log
    assert all(len(lines) == 1 for lines in by_node.values()), log


def test_two_tasks_per_node_on_two_nodes(adapter: RealSlurmAdapter, tmp_path: Path) -> None:
    # no scheduler-neutral key for tasks per node: sbatch's own option
    asked = {"nodes": 2, "time": "60", "native": {"slurm": ["--ntasks-per-node=2"]}}
    job_id = adapter.submit_job(script(tmp_path, WHERE), asked)
    status = adapter.wait(job_id, poll_interval=1, timeout=120)
    log = adapter.get_job_logs(job_id)
    assert status.state is JobState.COMPLETED and status.exit_code == 0, log
    by_node = tasks_by_node(log)
    assert len(by_node) == 2 and all(len(lines) == 2 for lines in by_node.values()), log
    ranks = sorted(line.split()[1] for lines in by_node.values() for line in lines)
    assert ranks == ["0", "1", "2", "3"], log


def test_one_nodes_failure_is_the_jobs_end_and_exit_code(
    adapter: RealSlurmAdapter, tmp_path: Path
) -> None:
    job_id = adapter.submit_job(script(tmp_path, ONE_NODE_FAILS), {"nodes": 2, "time": "60"})
    status = adapter.wait(job_id, poll_interval=1, timeout=120)
    log = adapter.get_job_logs(job_id)
    assert status.state is JobState.FAILED and status.exit_code == 3, (status, log)
    failed = [line.split()[-1] for line in log.splitlines() if line.startswith("fails on ")]
    later = [line.split()[-1] for line in log.splitlines() if line.startswith("ends later on ")]
    # the end reported is the job's, not the failed node's: the other node's task had
    # ended too when it was
    assert len(failed) == 1 and len(later) == 1 and failed != later, log
