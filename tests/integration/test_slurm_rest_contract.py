"""The Slurm contract (tests/integration/test_slurm_adapter.py's cases, imported: one
contract written once) on the REST driver, against a Slurm 25.11 cluster of this
module's own with slurmdbd and slurmrestd (containers/slurmrestd/start.sh), on three
targets:

* ``25.11-rest-socket``: the Unix socket, ``rest_auth/local``.  It answers only its own
  uid (slurmrestd refuses to run as root), so while these cases run this process is the
  daemon's user, hpcbtest (its real and effective ids; root's kept as the saved ones to
  come back to at the end): the jobs, their folders and the client are that user's.
* ``25.11-rest-jwt``: ``rest_auth/jwt`` on 127.0.0.1, a token of root's.
* ``25.11-rest-jwt-ssh``: the same with the SSH transport: files over SFTP to the
  loopback sshd as hpcbtest, the REST calls straight to the URL with hpcbtest's token.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Iterator

import pytest

import hpcbridge
from hpcbridge.model import JobState
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from tests.integration import test_slurm_adapter as contract
from tests.integration.test_slurm_adapter import wait_for_state
from tests.support.slurm_clusters import (
    PREFIX,
    Target,
    own_cluster,
    run_slurm,
    skip_without_slurmrestd,
    slurmrestd,
)

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
USER = "hpcbtest"  # slurmrestd's user (containers/slurmrestd), the SSH test user
NAME, PORT = "rcon", 17290
STATE = f"/tmp/hpcbridge-slurm-{NAME}"
LISTEN = f"127.0.0.1:{PORT + 3}"

TARGETS = {
    "25.11-rest-socket": Target("25.11-rest-socket", STATE, "rest"),
    "25.11-rest-jwt": Target("25.11-rest-jwt", STATE, "rest"),
    "25.11-rest-jwt-ssh": Target("25.11-rest-jwt-ssh", STATE, "rest", "ssh"),
}


@pytest.fixture(scope="module")
def restd() -> Iterator[Dict[str, str]]:
    """The cluster (slurmdbd too: the history, the caps) and its slurmrestd daemons:
    its environment with ``unix`` and ``tcp``, their URLs."""
    skip_without_slurmrestd()
    cluster = own_cluster(NAME, PORT, prefix=PREFIX, users=USER, jwt=True, accounting=True)
    with cluster as env, slurmrestd(STATE, LISTEN) as urls:
        yield {**env, **urls}


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A folder of the test user's, for every case's files (pytest's are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="hpcbridge-restc-"))
    entry = pwd.getpwnam(USER)
    os.chown(folder, entry.pw_uid, entry.pw_gid)
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def preload() -> None:
    """Every hpcbridge module and what a test's report loads, imported while root: this
    Python may live under root's home, which hpcbtest cannot read."""
    for name in ("difflib", "pprint", "encodings.latin_1", "encodings.idna", "unittest.mock"):
        importlib.import_module(name)
    for found in pkgutil.walk_packages(hpcbridge.__path__, "hpcbridge."):
        if not found.name.startswith("hpcbridge.integrations") and "__main__" not in found.name:
            with contextlib.suppress(Exception):  # a scheduler's bindings not installed
                importlib.import_module(found.name)


@contextlib.contextmanager
def as_user(name: str) -> Iterator[None]:
    """This process as ``name`` (real and effective ids; root kept as the saved ones, to
    come back to), so that a Unix socket's peer and the files it makes are that user's."""
    preload()
    entry, groups = pwd.getpwnam(name), os.getgroups()
    os.setgroups([entry.pw_gid])
    os.setresgid(entry.pw_gid, entry.pw_gid, 0)
    os.setresuid(entry.pw_uid, entry.pw_uid, 0)
    try:
        yield
    finally:
        os.setresuid(0, 0, 0)
        os.setresgid(0, 0, 0)
        os.setgroups(groups)


@pytest.fixture(scope="module", params=list(TARGETS))
def target(request: pytest.FixtureRequest) -> Target:
    return TARGETS[request.param]


@pytest.fixture(scope="module")
def cluster(target: Target, restd: Dict[str, str]) -> Iterator[Dict[str, str]]:
    """The cluster's environment with the target's URL (and token), set in the process
    while its cases run; on the socket, as its user."""
    socket = target.label.endswith("-socket")
    env = {name: value for name, value in restd.items() if name not in ("unix", "tcp")}
    env["HPCBRIDGE_SLURM_DRIVER"] = "rest"
    env["HPCBRIDGE_SLURM_REST_URL"] = restd["unix" if socket else "tcp"]
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("SLURM_JWT", raising=False)
        for name, value in env.items():
            patch.setenv(name, value)
        if not socket:  # the jobs' user: the one the files belong to
            user = USER if target.transport == "ssh" else "root"
            made = run_slurm(["scontrol", "token", f"username={user}", "lifespan=7200"], env)
            assert made.returncode == 0, made.stderr
            patch.setenv("SLURM_JWT", made.stdout.strip().partition("=")[2])
        with as_user(USER) if socket else contextlib.nullcontext():
            yield env


@pytest.fixture(scope="module")
def background_root(cluster: Dict[str, str], base: Path) -> Path:
    return Path(tempfile.mkdtemp(prefix="background-", dir=base))


@pytest.fixture
def tmp_path(cluster: Dict[str, str], base: Path) -> Path:
    """A case's folder, its user's (the socket's: hpcbtest)."""
    return Path(tempfile.mkdtemp(dir=base))


# -- the contract's cases, in its order (the slow checks last) --------------------------

adapter, background, script = contract.adapter, contract.background, contract.script
test_exit_zero_is_completed_with_times = contract.test_exit_zero_is_completed_with_times
test_exit_three_is_failed = contract.test_exit_three_is_failed
test_logs = contract.test_logs
test_train_wait_fetch_the_artifact = contract.test_train_wait_fetch_the_artifact
test_hostile_names_and_paths_are_literal = contract.test_hostile_names_and_paths_are_literal
test_running_job_cancelled = contract.test_running_job_cancelled
test_a_job_cancelled_right_after_its_submission_reads_as_cancelled = (
    contract.test_a_job_cancelled_right_after_its_submission_reads_as_cancelled
)
test_dependency_holds_the_child = contract.test_dependency_holds_the_child
test_failed_parent_cancels_the_child = contract.test_failed_parent_cancels_the_child
test_a_job_cancelled_while_pending_has_no_exit_code = (
    contract.test_a_job_cancelled_while_pending_has_no_exit_code
)
test_a_never_existing_parent_is_refused_and_nothing_submitted = (
    contract.test_a_never_existing_parent_is_refused_and_nothing_submitted
)
test_a_parent_that_already_failed_is_refused_a_completed_one_satisfied = (
    contract.test_a_parent_that_already_failed_is_refused_a_completed_one_satisfied
)
test_bad_submission_carries_slurms_message = contract.test_bad_submission_carries_slurms_message
test_never_existing_id_is_not_found_after_the_streak = (
    contract.test_never_existing_id_is_not_found_after_the_streak
)


def test_controller_restart_while_waiting(
    adapter: RealSlurmAdapter,
    script,
    cluster: Dict[str, str],
    target: Target,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The restart needs root (the socket's cases run as its user), and the REST calls
    # skip the SSH transport: the JWT target's run holds for all three.
    if target.label != "25.11-rest-jwt":
        pytest.skip("slurmrestd rides a restart of slurmctld out in 25.11-rest-jwt")
    # a slurmctld started with SLURM_JWT set would take the token as its own auth (fatal)
    monkeypatch.delenv("SLURM_JWT")  # the driver has it already
    contract.test_controller_restart_while_waiting(adapter, script, cluster, target)


test_two_hundred_jobs_array_two_commands_per_poll = (
    contract.test_two_hundred_jobs_array_two_commands_per_poll
)
test_submit_many_failing_task_and_task_cancel = (
    contract.test_submit_many_failing_task_and_task_cancel
)
test_array_tasks_ignore_an_inherited_task_index = (
    contract.test_array_tasks_ignore_an_inherited_task_index
)
test_array_task_zero_runs_long_while_task_one_is_cancelled = (
    contract.test_array_task_zero_runs_long_while_task_one_is_cancelled
)
test_exit_codes_of_128_and_above = contract.test_exit_codes_of_128_and_above
test_dependency_on_array_tasks = contract.test_dependency_on_array_tasks
test_purged_job_is_reported_from_sacct = contract.test_purged_job_is_reported_from_sacct
test_time_limit_gives_timeout = contract.test_time_limit_gives_timeout


# -- what the REST driver answers beyond the contract's cases (on 25.11-rest-jwt) -----------


def jwt_only(target: Target) -> None:
    if target.label != "25.11-rest-jwt":
        pytest.skip("a case of the REST driver's own rows: it runs in 25.11-rest-jwt")


def test_native_options_become_the_job_descriptions_fields(
    adapter: RealSlurmAdapter, script, target: Target
) -> None:
    jwt_only(target)
    # --hold: slurmctld holds the job (JobHeldUser); --nice: its priority is lowered
    job_id = adapter.submit_job(script("true"), {"native": {"slurm": ["--hold", "--nice=10"]}})
    status = adapter.get_job_status(job_id)
    assert (status.state, status.reason) == (JobState.PENDING, "JobHeldUser"), status
    shown = run_slurm(["scontrol", "show", "job", job_id], dict(os.environ))
    assert "Nice=10" in shown.stdout, shown.stdout
    adapter.cancel_job(job_id)


def test_a_native_option_without_a_field_exits_2_with_nothing_staged(
    cluster: Dict[str, str], target: Target, tmp_path: Path
) -> None:
    jwt_only(target)
    job = tmp_path / "job.sh"
    job.write_text("#!/bin/sh\ntrue\n")
    env = {**os.environ, "HPCBRIDGE_STATE_DIR": str(tmp_path / "state")}
    env.update(HPCBRIDGE_SCHEDULER="slurm", HPCBRIDGE_REMOTE_WORKDIR=str(tmp_path / "jobs"))
    argv = [sys.executable, "-m", "hpcbridge", "submit", "--slurm-option=--x11", str(job)]
    ran = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 2, ran.stderr
    assert "'--x11'" in ran.stderr and "HPCBRIDGE_SLURM_DRIVER=cli" in ran.stderr
    assert not (tmp_path / "jobs").exists() or not list((tmp_path / "jobs").iterdir())


def test_the_cap_on_queued_jobs_output_and_cluster_from_slurmrestd(
    adapter: RealSlurmAdapter, script, cluster: Dict[str, str], target: Target
) -> None:
    jwt_only(target)
    driver = adapter.open().driver
    assert driver.config() == {"ClusterName": cluster["HPCBRIDGE_SLURM_CLUSTER"]}
    job_id = adapter.submit_job(script("sleep 60"))
    assert wait_for_state(adapter, job_id, JobState.RUNNING).state is JobState.RUNNING
    assert driver.find_output(job_id) == adapter.log_path(job_id)
    adapter.cancel_job(job_id)
    assert driver.find_output("987654321") is None
    # root's associations: hpcb (no cap) and capped (MaxSubmitJobs 37, GrpSubmitJobs 43)
    sacctmgr = ["sacctmgr", "-i"]
    made = run_slurm([*sacctmgr, "add", "account", "capped"], cluster)
    assert made.returncode == 0, made.stderr
    try:
        limits = ["MaxSubmitJobs=37", "GrpSubmitJobs=43"]
        made = run_slurm([*sacctmgr, "add", "user", "root", "account=capped", *limits], cluster)
        assert made.returncode == 0, made.stderr
        assert driver.queue_limit("capped") == 37
        assert driver.queue_limit("hpcb") is None
        assert driver.queue_limit() == 37  # the smallest of all the user's
    finally:
        run_slurm([*sacctmgr, "delete", "user", "root", "account=capped"], cluster)
        run_slurm([*sacctmgr, "delete", "account", "capped"], cluster)
