"""``hpcbridge cost`` against what Slurm 22.05's ``sacct`` charged (issue 46, Done-when 3): a
store with an ``--exclusive`` Slurm job, a named pack (its Slurm allocation and the Flux
tasks in it) and mock jobs.  The CPU-hours are sacct's ``CPUTimeRAW`` (within 1 %), the
pack is counted once - its allocation, its tasks under it - the mock jobs stand apart; the
charge is kept in the records, so a later run asks no scheduler; filters pick each part.

Needs the Slurm test cluster (containers/slurm) and flux-core on this machine (the pack's
allocation runs a Flux instance on the node, which is this machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from hpcbridge.store.jobs import JobStore
from tests.support.flux_cases import require_flux, write_script
from tests.support.slurm_clusters import TARGETS, cluster_for, run_slurm

pytestmark = [pytest.mark.flux, pytest.mark.slurm]

TASKS = 4


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    yield from cluster_for(TARGETS["22.05-cli"])


def command(env: Dict[str, str], *args: str, timeout: float = 300) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "hpcbridge", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sacct_cpu_seconds(env: Dict[str, str], job_ids: List[str]) -> Dict[str, float]:
    """What sacct itself says: CPUTimeRAW of each job's allocation row."""
    asked = run_slurm(
        ["sacct", "-X", "-P", "-n", f"--jobs={','.join(job_ids)}", "-o", "JobID,CPUTimeRAW"], env
    )
    assert asked.returncode == 0, asked.stderr
    rows = (line.split("|") for line in asked.stdout.split())
    return {job_id: float(seconds) for job_id, seconds in rows}


def test_cost_is_what_sacct_charged_each_job_once_mock_apart(
    cluster: Dict[str, str], tmp_path: Path
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("HPCBRIDGE_")},
        **cluster,
        "HPCBRIDGE_STATE_DIR": str(tmp_path / "state"),
        "HPCBRIDGE_FLUX_COMMAND": require_flux(),
        "HPCBRIDGE_MIN_POLL_INTERVAL": "0",
        "HPCBRIDGE_CPU_COST_PER_HOUR": "3600",  # a CPU-second costs 1
    }
    scripts = tmp_path / "scripts"
    nap = write_script(scripts, "nap.sh", "sleep 5\n")
    exclusive = command(
        env, "submit", nap, "--scheduler", "slurm", "--exclusive", "--time", "2", "--wait"
    )
    assert exclusive.returncode == 0, exclusive.stderr
    exclusive_id = exclusive.stdout.split()[0]
    args = tmp_path / "args"
    args.write_text("".join(f"{index}\n" for index in range(TASKS)))
    task = write_script(scripts, "task.sh", 'sleep 1\necho "task $1"\n')
    packed = command(
        env,
        "submit-many",
        task,
        "--scheduler",
        "slurm",
        "--args-file",
        str(args),
        "--time",
        "1m",
        "--pack",
        "time=10",
        "--sweep",
        "pk",
        "--poll-interval",
        "0.5",
    )
    assert packed.returncode == 0, packed.stderr
    for _ in range(2):
        hello = command(
            env, "submit", nap, "--scheduler", "mock", "--wait", "--poll-interval", "0.3"
        )
        assert hello.returncode == 0, hello.stderr

    answer = command(env, "cost", "--json")
    assert answer.returncode == 0, answer.stderr
    cost = json.loads(answer.stdout)
    by_id = {row["job_id"]: row for row in cost["jobs"]}
    assert {row["scheduler"] for row in cost["jobs"]} == {"slurm"}  # tasks only under it
    [allocation] = [row for row in cost["jobs"] if row.get("tasks")]
    assert len(allocation["tasks"]) == TASKS
    assert {task["scheduler"] for task in allocation["tasks"]} == {"flux"}
    slurm_ids = sorted(by_id)
    assert slurm_ids == sorted([exclusive_id, allocation["job_id"]]), slurm_ids
    charged = sacct_cpu_seconds(cluster, slurm_ids)
    for job_id in slurm_ids:
        row = by_id[job_id]
        assert row["basis"] == "charged", row
        assert row["cpu_hours"] == pytest.approx(charged[job_id] / 3600, rel=0.01), (row, charged)
    # the exclusive job paid the whole node: more CPUs than the one task it ran
    assert charged[exclusive_id] > 5 * 1.5, charged
    total = sum(charged.values()) / 3600
    assert cost["total"]["cpu_hours"] == pytest.approx(total, rel=0.01)
    assert cost["total"]["cost"] == pytest.approx(total * 3600, rel=0.01)
    print(f"cost vs sacct (CPU-h): {json.dumps({i: by_id[i]['cpu_hours'] for i in slurm_ids})}")
    print(f"sacct CPUTimeRAW/3600: {json.dumps({i: charged[i] / 3600 for i in slurm_ids})}")
    # mock jobs apart, charged nothing, not in the TOTAL
    assert len(cost["mock_jobs"]) == 2 and cost["mock_total"]["cost"] == 0
    assert cost["mock_total"]["cpu_hours"] > 0

    # kept in the records: with no Slurm command to run, the charge is still there
    store = JobStore(tmp_path / "state" / "jobs.db")
    kept = store.get(exclusive_id, scheduler="slurm")
    assert kept is not None and kept.charged_cpu_seconds == charged[exclusive_id]
    store.close()
    offline = {**env, "HPCBRIDGE_COMMAND_ENV": f"PATH={tmp_path / 'nothing'}"}
    for flags in (["--cached"], []):  # every job ended: not even a refresh asks Slurm
        again = command(offline, "cost", "--json", *flags)
        assert again.returncode == 0 and "not known now" not in again.stderr, again.stderr
        rows = json.loads(again.stdout)["jobs"]
        assert {row["job_id"]: (row["basis"], row["cpu_hours"]) for row in rows} == {
            job_id: ("charged", by_id[job_id]["cpu_hours"]) for job_id in slurm_ids
        }

    # filters
    mock_only = json.loads(command(env, "cost", "--json", "--scheduler", "mock").stdout)
    assert mock_only["jobs"] == [] and len(mock_only["mock_jobs"]) == 2
    pack_only = json.loads(command(env, "cost", "--json", "--sweep", "pk").stdout)
    assert [row["job_id"] for row in pack_only["jobs"]] == [allocation["job_id"]]
    assert len(pack_only["jobs"][0]["tasks"]) == TASKS and pack_only["mock_jobs"] == []
    later = json.loads(command(env, "cost", "--json", "--since", "2999-01-01").stdout)
    assert later["jobs"] == [] and later["mock_jobs"] == []
    table = command(env, "cost").stdout.splitlines()
    assert [line.split()[0] for line in table if line.startswith("TOTAL")] == ["TOTAL"]
