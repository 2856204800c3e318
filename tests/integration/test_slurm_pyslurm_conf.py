"""pyslurm and SLURM_CONF: the process's is the one libslurm reads, the settings' the one
meant.  With the wrong one in the process (or none), the native driver is refused with
one line and the CLI driver sends the job to the right cluster: never a process exit,
never the other cluster.  Each case runs in a child process, as libslurm may end it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Dict, Optional

import pytest

from tests.support.slurm_clusters import TARGETS, cluster_env, run_slurm, target_skip_reason

pytestmark = pytest.mark.slurm

CHILD = textwrap.dedent(
    """
    import sys
    from hpcbridge.settings.config import Settings
    from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
    root, script, name = sys.argv[1:4]
    try:
        adapter = RealSlurmAdapter(
            remote_workdir=root,
            settings=Settings.from_env(state_dir=root + "/state", scheduler="slurm"),
        )
        session = adapter.open()  # the named step that chooses the driver
    except Exception as exc:
        print("REFUSED", type(exc).__name__, exc)
        sys.exit(3)
    print("DRIVER", session.driver.name, session.choice.reason)
    print("JOB", adapter.submit_job(script, {"job_name": name}))
    """
)


@pytest.fixture(scope="module")
def clusters() -> Dict[str, Dict[str, str]]:
    new = cluster_env(TARGETS["25.11-native"].state)
    reason = target_skip_reason(TARGETS["25.11-native"], new)
    if reason:
        pytest.skip(reason)
    old = cluster_env(TARGETS["22.05-cli"].state)
    assert new is not None
    return {"new": new, "old": old or {}}


def run_child(
    tmp_path: Path, new: Dict[str, str], process_conf: Optional[str], driver: str
) -> subprocess.CompletedProcess:
    script = tmp_path / "hello.sh"
    script.write_text("#!/bin/sh\necho hello\n")
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("SLURM_", "HPCBRIDGE_"))
    }
    env.update(
        PATH=new["PATH"],  # the 25.11 commands
        HPCBRIDGE_COMMAND_ENV=f"SLURM_CONF={new['SLURM_CONF']}",
        HPCBRIDGE_SLURM_DRIVER=driver,
    )
    if process_conf:
        env["SLURM_CONF"] = process_conf
    name = f"hpcb-conf-{uuid.uuid4().hex[:8]}"
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), str(script), name],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    result.job_name = name  # type: ignore[attr-defined]
    return result


def the_other_conf(clusters: Dict[str, Dict[str, str]], tmp_path: Path) -> str:
    """Debian's cluster's slurm.conf, or a stand-in naming another cluster."""
    if clusters["old"].get("SLURM_CONF"):
        return clusters["old"]["SLURM_CONF"]
    other = tmp_path / "other.conf"
    other.write_text("ClusterName=other\nSlurmctldHost=localhost\n")
    return str(other)


@pytest.mark.parametrize("process", ["other-cluster", "unset"])
def test_native_refused_with_one_line(
    clusters: Dict[str, Dict[str, str]], tmp_path: Path, process: str
) -> None:
    conf = the_other_conf(clusters, tmp_path) if process == "other-cluster" else None
    result = run_child(tmp_path, clusters["new"], conf, "native")
    assert result.returncode == 3, result.stdout + result.stderr  # never libslurm's exit 1
    refused = [line for line in result.stdout.splitlines() if line.startswith("REFUSED")]
    assert len(refused) == 1 and "SLURM_CONF" in refused[0], result.stdout
    assert clusters["new"]["SLURM_CONF"] in refused[0]
    assert "fatal" not in result.stderr


def test_auto_sends_the_job_to_the_settings_cluster(
    clusters: Dict[str, Dict[str, str]], tmp_path: Path
) -> None:
    result = run_child(tmp_path, clusters["new"], the_other_conf(clusters, tmp_path), "auto")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "DRIVER cli" in result.stdout and "SLURM_CONF" in result.stdout
    job_id = result.stdout.split("JOB", 1)[1].split()[0]
    name = result.job_name  # type: ignore[attr-defined]
    found = (
        run_slurm(["scontrol", "show", "job", job_id], clusters["new"], timeout=30).stdout
        + run_slurm(
            ["sacct", "-X", "-n", "-P", f"--name={name}", "--format=JobID"],
            clusters["new"],
            timeout=30,
        ).stdout
    )
    assert name in found or job_id in found.split(), found
    if clusters["old"]:
        elsewhere = run_slurm(
            ["sacct", "-X", "-n", "-P", f"--name={name}", "--format=JobID"], clusters["old"]
        ).stdout
        assert elsewhere.strip() == ""


def test_in_process_unknown_id_and_doctor(
    clusters: Dict[str, Dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpcbridge.schedulers.slurm import doctor
    from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
    from hpcbridge.settings.config import Settings

    for name in ("SLURM_CONF", "PATH"):
        monkeypatch.setenv(name, clusters["new"][name])
    settings = Settings.from_env(env={}, state_dir=str(tmp_path / "state"), scheduler="slurm")
    adapter = RealSlurmAdapter(remote_workdir=str(tmp_path), settings=settings, driver="auto")
    assert adapter.open().driver.name == "native", adapter.open().choice
    assert adapter.open().choice.reason.startswith("pyslurm 25.11")
    answer = adapter.open().driver.query(["987654321"])["987654321"]
    assert answer.state.value == "UNKNOWN"
    checks = {check.name: check for check in doctor.checks(settings, None)}
    assert checks["pyslurm"].ok and checks["slurm driver"].detail.startswith("native (")
