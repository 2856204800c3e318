"""The bench runner on tiny counts, so that it cannot rot.

Runs ``python -m bench --quick --only startup,slurm_submit --out TMP`` once and
checks the JSON, the Markdown and the chart it writes: their structure only,
never a timing.  The Slurm part skips, with the reason, when the test cluster
is not running (``bash containers/slurm/start.sh``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = ["startup", "slurm_submit"]


def _run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> Dict[str, Any]:
    out = tmp_path_factory.mktemp("bench-out")
    done = _run("--quick", "--only", ",".join(SCENARIOS), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((out / "latest.json").read_text())
    return {"out": out, "results": results, "stdout": done.stdout}


def _scenario(results: Dict[str, Any], name: str) -> Dict[str, Any]:
    found = [s for s in results["scenarios"] if s["name"] == name]
    assert len(found) == 1, f"{name} not in {[s['name'] for s in results['scenarios']]}"
    return found[0]


def _check_rows(scenario: Dict[str, Any]) -> None:
    assert scenario["unit"] and isinstance(scenario["higher_is_better"], bool)
    assert isinstance(scenario["params"], dict) and scenario["params"].get("rounds")
    assert scenario["rows"], "a measured scenario has rows"
    kinds = {row["kind"] for row in scenario["rows"]}
    assert "raw" in kinds and "hpcbridge" in kinds
    for row in scenario["rows"]:
        assert row["contender"] and row["kind"] in ("raw", "hpcbridge", "peer", "other")
        if row.get("skipped"):
            assert isinstance(row["skipped"], str) and row["skipped"]
            continue
        assert set(row) >= {"median", "min", "max", "samples", "speed_vs_baseline"}
        assert len(row["samples"]) == scenario["params"]["rounds"]
        assert row["min"] <= row["median"] <= row["max"]
        assert row["speed_vs_baseline"] > 0
    baseline = [r for r in scenario["rows"] if r["contender"] == scenario["baseline"]]
    assert baseline and baseline[0]["speed_vs_baseline"] == pytest.approx(1.0)


def test_files_and_record(quick_run):
    out, results = quick_run["out"], quick_run["results"]
    assert results["quick"] is True
    assert results["selected"] == SCENARIOS
    assert [s["name"] for s in results["scenarios"]] == SCENARIOS
    machine = results["machine"]
    assert machine["cpu_count"] >= 1 and machine["python"] and machine["os"]
    assert results["versions"]["hpcbridge"]
    assert results["runtime_s"] >= 0
    for scenario in results["scenarios"]:
        assert scenario["status"] in ("ok", "skipped"), scenario.get("reason")
        if scenario["status"] == "skipped":
            assert scenario["reason"]
    markdown = (out / "latest.md").read_text()
    assert markdown.startswith("## Results")
    assert "Machine:" in markdown and "Versions:" in markdown and "### Skipped" in markdown
    for scenario in results["scenarios"]:
        assert f"(`{scenario['name']}`)" in markdown
    assert (out / "latest.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## Results" in quick_run["stdout"]


def test_startup_scenario(quick_run):
    scenario = _scenario(quick_run["results"], "startup")
    assert scenario["status"] == "ok"
    _check_rows(scenario)
    names = {row["contender"] for row in scenario["rows"]}
    assert {"python -c pass", "python -c 'import hpcbridge'", "hpcbridge --help"} <= names
    markdown = (quick_run["out"] / "latest.md").read_text()
    assert "| contender | median ms | min-max | speed vs baseline |" in markdown


@pytest.mark.slurm
def test_slurm_submit_scenario(quick_run):
    scenario = _scenario(quick_run["results"], "slurm_submit")
    if scenario["status"] == "skipped":
        pytest.skip(f"Slurm test cluster absent: {scenario['reason']}")
    _check_rows(scenario)
    # the shared cluster's rows (the 25.11 group's, skipped in --quick, have a group)
    rows = {row["contender"]: row for row in scenario["rows"] if not row["group"]}
    assert rows["raw sbatch loop"]["jobs"] == scenario["params"]["jobs"]
    for name in ("hpcbridge submit_job loop", "hpcbridge submit_many (array)"):
        assert not rows[name].get("skipped"), rows[name].get("skipped")
    markdown = (quick_run["out"] / "latest.md").read_text()
    assert "| contender | median jobs/s |" in markdown
    for row in scenario["rows"]:  # a loss is said, with its reason
        if row.get("loses_to"):
            assert "**hpcbridge loses**" in markdown


def test_unknown_scenario_is_refused():
    done = _run("--only", "no_such_scenario", timeout=60)
    assert done.returncode == 2
    assert "unknown scenario" in done.stderr


def test_list():
    done = _run("--list", timeout=60)
    assert done.returncode == 0
    for name in ("startup", "slurm_submit", "slurm_bulk", "slurm_status", "flux_submit"):
        assert name in done.stdout
