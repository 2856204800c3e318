"""Banks on a real flux-accounting (issue 35): 0.60.0 beside flux-core 0.88 and 0.23.1
beside 0.49, set up as a site would (``tests.support.flux_accounting``), both drivers.

A bank the user is in runs and the job carries it; no bank is the user's default; a
bank the user is not in is refused while planning - nothing staged, the command's exit
3 - where Flux would refuse it later; a sweep larger than the bank's
``max_active_jobs`` (60 under 10) finishes with every job COMPLETED and never more
active than that, the cap read from flux-accounting before anything is sent.

Jobs run as this process's user where the plugin runs them; on flux-core 0.49 it fails
every job of root's (a flux-core bug, see ``tests.support.flux_accounting``), and they
run as the SSH test user - in an instance of its own, through the CLI over SSH.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from hpcbridge.errors import JobSubmissionError
from hpcbridge.model import JobState
from hpcbridge.schedulers.flux.adapter import FluxAdapter
from hpcbridge.schedulers.flux.ids import decimal_job_id
from tests.support.flux import release_of
from tests.support.flux_accounting import (
    MAX_ACTIVE_JOBS,
    MAX_RUNNING_JOBS,
    MEMBER_BANK,
    STRANGERS_BANK,
    AccountingInstance,
    start_accounting_instance,
)
from tests.support.flux_cases import (
    adapter_on,
    flux_params,
    instance_spans,
    make_adapter,
    require_flux,
    write_script,
)
from tests.support.spans import most_at_once
from tests.support.ssh import make_executor

pytestmark = pytest.mark.flux

SWEEP = 60


@pytest.fixture(scope="module", params=flux_params())
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AccountingInstance]:
    flux = str(request.param or require_flux())
    instance = start_accounting_instance(tmp_path_factory.mktemp("flux-banks"), flux)
    yield instance
    instance.stop()


@pytest.fixture(params=["native", "cli"])
def adapter(
    request: pytest.FixtureRequest, site: AccountingInstance, tmp_path: Path
) -> FluxAdapter:
    """An adapter of this process's user: it plans, and asks the banks."""
    return adapter_on(site, request.param, tmp_path, nested=False)


@pytest.fixture(scope="module")
def job_site(
    site: AccountingInstance, request: pytest.FixtureRequest
) -> Iterator[AccountingInstance]:
    """Where jobs run: ``site``, or where its plugin fails this user's jobs, an instance
    of the SSH test user's."""
    if not site.refused:
        yield site
        return
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip(
            f"{site.flux}: the plugin fails this user's jobs ({site.refused}); "
            "another user's instance needs root and runuser"
        )
    ssh_server = request.getfixturevalue("ssh_server")
    workdir = Path(tempfile.mkdtemp(prefix="hpcb-flux-banks-", dir="/tmp"))
    workdir.chmod(0o755)  # the SSH user's instance reads its configuration here
    guest = start_accounting_instance(workdir, site.flux, user=ssh_server.user)
    try:
        assert not guest.refused, f"the plugin fails {guest.user}'s jobs too: {guest.refused}"
        yield guest
    finally:
        guest.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(params=["native", "cli"])
def job_adapter(
    request: pytest.FixtureRequest,
    site: AccountingInstance,
    job_site: AccountingInstance,
    tmp_path: Path,
) -> Iterator[FluxAdapter]:
    """An adapter whose jobs run: this process's, or the SSH user's CLI over SSH."""
    if job_site is site:
        yield adapter_on(site, request.param, tmp_path, nested=False)
        return
    if request.param == "native":
        pytest.skip(f"jobs run as {job_site.user} on {site.flux}: reached over SSH, CLI only")
    made = make_adapter(
        "cli",
        job_site.uri,
        tmp_path / "state",
        executor=make_executor(request.getfixturevalue("ssh_server"), default_timeout=60.0),
        remote_workdir=request.getfixturevalue("ssh_remote_dir"),
        flux_command=job_site.flux,
        nested=False,
    )
    yield made
    made.close()


def bank_of(site: AccountingInstance, job_id: str) -> Any:
    """The bank the instance charged: the jobspec's, as flux-accounting updated it."""
    eventlog = site.instance.check(["job", "eventlog", decimal_job_id(job_id)])
    updated = [line for line in eventlog.splitlines() if "attributes.system.bank" in line]
    if updated:  # the plugin filled in the default bank
        return updated[-1].split('attributes.system.bank="', 1)[1].split('"', 1)[0]
    jobspec = json.loads(site.instance.check(["job", "info", decimal_job_id(job_id), "jobspec"]))
    return jobspec["attributes"]["system"].get("bank")


def test_a_bank_the_user_is_in_runs_and_the_job_carries_it(
    job_adapter: FluxAdapter, job_site: AccountingInstance, tmp_path: Path
) -> None:
    script = write_script(tmp_path / "scripts", "bank.sh", "echo in the bank\n")
    job_id = job_adapter.submit_job(script, {"account": MEMBER_BANK, "time": "60s"})
    assert job_adapter.wait(job_id, poll_interval=0.5, timeout=60).state is JobState.COMPLETED
    assert bank_of(job_site, job_id) == MEMBER_BANK


def test_no_bank_is_the_users_default(
    job_adapter: FluxAdapter, job_site: AccountingInstance, tmp_path: Path
) -> None:
    script = write_script(tmp_path / "scripts", "default.sh", "echo default bank\n")
    job_id = job_adapter.submit_job(script, {"time": "60s"})
    final = job_adapter.wait(job_id, poll_interval=0.5, timeout=60)
    print(
        f"no bank: {final.state.value} {final.reason!r}, charged to {bank_of(job_site, job_id)!r}"
    )
    assert final.state is JobState.COMPLETED
    if release_of(job_site.flux) < (0, 88):
        # 0.23.1's plugin charges the default bank without writing it into the jobspec:
        # the job ran, so the user's default association admitted it.
        assert bank_of(job_site, job_id) is None
    else:
        # 0.60's plugin writes the bank it charged; it keeps a "root" bank for the
        # instance's owner (these tests run as it); anyone else gets their default.
        assert bank_of(job_site, job_id) in (MEMBER_BANK, "root")


def test_a_bank_the_user_is_not_in_is_refused_before_anything_is_staged(
    adapter: FluxAdapter, tmp_path: Path
) -> None:
    script = write_script(tmp_path / "scripts", "stranger.sh", "echo never\n")
    with pytest.raises(JobSubmissionError, match=f"no bank '{STRANGERS_BANK}' for you") as caught:
        adapter.submit_job(script, {"account": STRANGERS_BANK})
    assert MEMBER_BANK in str(caught.value) and "default" in str(caught.value)
    assert not (tmp_path / "jobs").exists()


def test_the_command_exits_3_for_a_strangers_bank(site: AccountingInstance, tmp_path: Path) -> None:
    script = write_script(tmp_path / "scripts", "stranger.sh", "echo never\n")
    env = {
        "PATH": f"{Path(site.flux).parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HPCBRIDGE_SCHEDULER": "flux",
        "HPCBRIDGE_FLUX_URI": site.uri or "",
        "HPCBRIDGE_FLUX_DRIVER": "cli",
        "HPCBRIDGE_STATE_DIR": str(tmp_path / "state"),
    }
    argv = [sys.executable, "-m", "hpcbridge", "submit", "--account", STRANGERS_BANK, script]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 3, done.stderr
    assert f"no bank '{STRANGERS_BANK}'" in done.stderr
    assert not list((tmp_path / "state" / "jobs").glob("*"))


def test_a_sweep_over_the_banks_cap_finishes_never_above_it(
    job_adapter: FluxAdapter, job_site: AccountingInstance, tmp_path: Path
) -> None:
    assert job_adapter.open().driver.queue_limit(MEMBER_BANK) == MAX_ACTIVE_JOBS
    script = write_script(tmp_path / "scripts", "step.sh", "sleep 0.3\n")
    before = len(instance_spans(job_site.instance))
    ids = job_adapter.submit_many([script] * SWEEP, {"account": MEMBER_BANK, "time": "60s"})
    finals = job_adapter.wait_all(ids, poll_interval=0.5, timeout=300)
    assert all(status.state is JobState.COMPLETED for status in finals.values())
    spans = instance_spans(job_site.instance)
    ours = spans[: len(spans) - before]
    assert len(ours) == SWEEP  # none refused: the cap was known before sending
    assert most_at_once(ours) <= MAX_ACTIVE_JOBS


def test_the_command_names_the_sweep_a_banks_cap_made(
    site: AccountingInstance, tmp_path: Path
) -> None:
    """More jobs than the bank's ``max_active_jobs``, no sweep asked for: the sweep made
    for the cap is named on stderr (issue 46.6), and ``wait``/``status`` take the name."""
    if site.refused:
        pytest.skip(f"{site.flux}: the plugin fails this user's jobs ({site.refused})")
    script = write_script(tmp_path / "scripts", "step.sh", "sleep 0.2\n")
    env = {
        "PATH": f"{Path(site.flux).parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HPCBRIDGE_SCHEDULER": "flux",
        "HPCBRIDGE_FLUX_URI": site.uri or "",
        "HPCBRIDGE_FLUX_DRIVER": "cli",
        "HPCBRIDGE_STATE_DIR": str(tmp_path / "state"),
        "HPCBRIDGE_MIN_POLL_INTERVAL": "0",
    }
    count = MAX_ACTIVE_JOBS + 2
    argv = [sys.executable, "-m", "hpcbridge", "submit-many", "--account", MEMBER_BANK]
    argv += ["--time", "60s", *[script] * count]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    named = re.search(
        rf"hpcbridge: sweep (sweep-[0-9a-f]{{8}}): fed as a sweep \(the scheduler takes at "
        rf"most {MAX_ACTIVE_JOBS} of your jobs at once\); if this command stops, "
        r"'hpcbridge wait \1' goes on with it",
        done.stderr,
    )
    assert named, done.stderr
    command = [sys.executable, "-m", "hpcbridge"]
    waited = subprocess.run(
        [*command, "wait", named[1], "--poll-interval", "0.5"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert waited.returncode == 0, waited.stderr
    status = subprocess.run(
        [*command, "status", named[1]], capture_output=True, text=True, env=env, timeout=120
    )
    assert f"sweep of {count}, fed: {count} COMPLETED" in status.stdout, status.stdout


def test_doctor_shows_the_users_banks_and_limits(adapter: FluxAdapter) -> None:
    banks = adapter.doctor_info()["banks"]
    assert banks == [
        {
            "bank": MEMBER_BANK,
            "default": True,
            "max_active_jobs": MAX_ACTIVE_JOBS,
            "max_running_jobs": MAX_RUNNING_JOBS,
        }
    ]
