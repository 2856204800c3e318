"""The REST driver's submission whose answer is lost ends with exactly one job, found
again by its key (the job's comment): a real fault on a Slurm 25.11 cluster of this
module's own with slurmrestd on its JWT listener.

slurmctld is paused with SIGSTOP while ``POST job/submit`` waits for its answer: the
request slurmrestd passed on waits in slurmctld's socket.  Two things then happen, by the
client's timeout (the command timeout):

* under slurmctld's ``MessageTimeout`` (4 s here): no answer comes back in time, the
  client gives up on it (a reply lost on the way back);
* past it (the default, 60 s): slurmrestd answers first, an error of its own
  (``slurm_submit_batch_job``'s "Socket timed out on send/recv operation", seen after
  ``MessageTimeout``).

Either way slurmctld, resumed, makes the job from that request; the driver must find it
by its key and hand back its id - never send the submission again while the job may
still come, never call it refused.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Dict, Iterator

import pytest

from hpcbridge.model import JobState
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from hpcbridge.settings.config import Settings
from hpcbridge.store.jobs import JobStore
from hpcbridge.transports.local import LocalExecutor
from tests.integration.test_exactly_once import (
    MESSAGE_TIMEOUT,
    jobs_with_key,
    key_of,
    paused_controller,
    write_script,
)
from tests.support.slurm_clusters import (
    PREFIX,
    own_cluster,
    run_slurm,
    skip_without_slurmrestd,
    slurmrestd,
)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
USER = "hpcbtest"  # slurmrestd's user (containers/slurmrestd: it refuses root)
NAME, PORT = "ronce", 17340
STATE = f"/tmp/hpcbridge-slurm-{NAME}"
LISTEN = f"127.0.0.1:{PORT + 3}"
#: the client's timeout -> what the driver sees of the submission while slurmctld is paused
LOST = {4.0: "did not answer in time", 60.0: "Socket timed out on send/recv operation"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    """The cluster (no slurmdbd: slurmctld's ``jobs/`` finds the key) and slurmrestd on
    its JWT listener: its environment with ``url`` and root's token in ``SLURM_JWT``."""
    skip_without_slurmrestd()
    cluster = own_cluster(NAME, PORT, prefix=PREFIX, users=USER, jwt=True)
    with cluster as env, slurmrestd(STATE, LISTEN) as urls:
        made = run_slurm(["scontrol", "token", "username=root", "lifespan=3600"], env)
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip().partition("=")[2]
        yield {**env, "url": urls["tcp"], "SLURM_JWT": token}


@pytest.mark.parametrize("timeout", list(LOST), ids=["client-timeout", "slurmrestd-error"])
def test_answer_lost_to_a_paused_controller_is_found_by_its_key(
    timeout: float,
    cluster: Dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("SLURM_JWT", cluster["SLURM_JWT"])
    settings = Settings.from_env(
        env={},
        state_dir=str(tmp_path / "state"),
        scheduler="slurm",
        slurm_rest_url=cluster["url"],
        command_timeout=timeout,
        poll_interval=1.0,
        min_poll_interval=0.0,  # the cluster is the test's own
    )
    adapter = RealSlurmAdapter(
        executor=LocalExecutor(default_timeout=60),
        settings=settings,
        store=JobStore(tmp_path / "state" / "jobs.db"),
        command_env={"SLURM_CONF": cluster["SLURM_CONF"]},
        driver="rest",
    )
    script = write_script(tmp_path / "scripts")
    driver = adapter.open().driver
    assert driver.name == "rest"
    # the version and the cluster's name asked now: the pause is the submission's alone
    driver.api_version()
    driver.config()
    resumed = paused_controller(cluster, MESSAGE_TIMEOUT + 6)
    try:
        with caplog.at_level(logging.INFO, logger="hpcbridge"):
            job_id = adapter.submit_job(script)
    finally:
        resumed.join()
    assert "the submission's answer was lost" in caplog.text
    assert LOST[timeout] in caplog.text
    key = key_of(adapter, job_id)
    assert jobs_with_key(cluster, key) == [job_id]  # exactly one job, the one handed back
    record = adapter.store.get(job_id, "slurm", adapter.host_label)
    assert record is not None and record.job_id == job_id
    final = adapter.wait_all([job_id], poll_interval=1, timeout=120)
    assert final[job_id].state is JobState.COMPLETED
    adapter.store.close()
