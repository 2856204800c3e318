"""A Flux site of four nodes: an instance of ``flux start --test-size=4`` on this host
(four brokers, each seeing the host's cores), driven as a site's system instance
(issue 50).  ``--nodes 2`` plain jobs run a task on two brokers; ``--nodes 2`` batch jobs
are instances of two brokers whose launcher's step runs on both, and one rank's failing
task is the job's FAILED end and exit code once the other rank's task ended too; a sweep
under ``max_queued`` spreads over the nodes; a pack of ``nodes=2`` (``--scheduler flux``) is
one batch job, an instance of two brokers whose capacity is both brokers' cores, its tasks
on both, released at the end.  Through the bindings and the CLI; passes on flux-core 0.88,
0.49 and 0.26 - but the pack, which needs ``flux uri`` (0.26 has none) - the Flux lane runs
it with each, one release per process.
"""

from __future__ import annotations

import logging
import os
import shlex
from pathlib import Path
from typing import Iterator, List

import pytest

from hpcbridge.engine.sweeping import Sweep
from hpcbridge.model import JobState
from hpcbridge.packing import Pack, run_packed
from hpcbridge.schedulers.flux.instance_answers import parse_cores
from tests.support.flux import FluxInstance, flux_version
from tests.support.flux_cases import (
    active_jobs,
    adapter_on,
    instance_spans,
    require_flux,
    write_script,
)
from tests.support.spans import most_at_once

pytestmark = pytest.mark.flux

NODES = 4

#: a batch job's launcher step over its two brokers; the task on rank 1 fails at once
ONE_RANK_FAILS = """$HPCBRIDGE_LAUNCHER -N 2 -n 2 sh -c '
if [ "$(flux getattr rank)" = 1 ]; then echo "fails on 1"; exit 3; fi
sleep 2; echo "ends later on $(flux getattr rank)"'
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FluxInstance]:
    workdir = tmp_path_factory.mktemp("flux-nodes")
    instance = FluxInstance(require_flux(), workdir=str(workdir), size=NODES).start()
    yield instance
    instance.stop()


def ranks_said(log: str) -> List[str]:
    return sorted(line.split()[-1] for line in log.splitlines() if line.startswith("rank "))


def test_the_site_is_four_nodes_of_the_hosts_cores(site: FluxInstance) -> None:
    assert site.check(["getattr", "size"]).strip() == str(NODES)
    # each broker's R, summed (flux resource R is 0.88's; resource.R in the KVS every release's)
    assert parse_cores(site.check(["kvs", "get", "resource.R"])) == NODES * (os.cpu_count() or 1)


@pytest.mark.parametrize("driver", ["native", "cli"])
def test_a_plain_job_of_two_nodes_runs_on_two_brokers(
    driver: str, site: FluxInstance, tmp_path: Path
) -> None:
    adapter = adapter_on(site, driver, tmp_path, nested=False)
    script = write_script(tmp_path, "plain.sh", 'echo "rank $(flux getattr rank)"\n')
    try:
        job_id = adapter.submit_job(script, {"nodes": 2, "time": "60s"})
        status = adapter.wait(job_id, timeout=120)
        log = adapter.get_job_logs(job_id)
    finally:
        adapter.close()
    assert status.state is JobState.COMPLETED, log
    assert len(set(ranks_said(log))) == 2, log  # one task on each of two brokers


@pytest.mark.parametrize("driver", ["native", "cli"])
def test_a_batch_job_of_two_nodes_launches_on_both(
    driver: str, site: FluxInstance, tmp_path: Path
) -> None:
    adapter = adapter_on(site, driver, tmp_path, nested=True)
    body = (
        'echo "size $(flux getattr size)"\n'
        "$HPCBRIDGE_LAUNCHER -N 2 -n 2 sh -c 'echo \"rank $(flux getattr rank)\"'\n"
    )
    script = write_script(tmp_path, "batch.sh", body)
    try:
        job_id = adapter.submit_job(script, {"nodes": 2, "time": "60s"})
        status = adapter.wait(job_id, timeout=120)
        log = adapter.get_job_logs(job_id)
    finally:
        adapter.close()
    assert status.state is JobState.COMPLETED, log
    assert "size 2" in log.splitlines() and ranks_said(log) == ["0", "1"], log


@pytest.mark.parametrize("driver", ["native", "cli"])
def test_one_ranks_failure_is_the_batch_jobs_end_and_exit_code(
    driver: str, site: FluxInstance, tmp_path: Path
) -> None:
    adapter = adapter_on(site, driver, tmp_path, nested=True)
    script = write_script(tmp_path, "fails.sh", ONE_RANK_FAILS)
    try:
        job_id = adapter.submit_job(script, {"nodes": 2, "time": "60s"})
        status = adapter.wait(job_id, timeout=120)
        log = adapter.get_job_logs(job_id)
    finally:
        adapter.close()
    assert status.state is JobState.FAILED and status.exit_code == 3, (status, log)
    # the end reported is the job's: rank 0's task had ended too when it was
    assert "fails on 1" in log and "ends later on 0" in log, log


def test_a_sweep_under_max_queued_spreads_over_the_nodes(
    site: FluxInstance, tmp_path: Path
) -> None:
    adapter = adapter_on(site, "native", tmp_path, nested=False)
    ran = shlex.quote(str(tmp_path / "ran"))
    task = write_script(tmp_path, "task.sh", f'echo "$1 $(flux getattr rank)" >> {ran}\nsleep 1\n')
    count, cap = 24, 6
    sweep = Sweep(adapter, "flux-nodes", max_queued=cap)
    sweep.add([(task, [str(index)]) for index in range(count)], {"time": "60s"})
    try:
        final = sweep.wait(poll_interval=0.5, timeout=300)
    finally:
        adapter.close()
    assert {status.state for status in final.values()} == {JobState.COMPLETED}
    rows = [line.split() for line in (tmp_path / "ran").read_text().splitlines()]
    assert sorted(int(index) for index, _ in rows) == list(range(count))  # each once
    assert len({rank for _, rank in rows}) > 1, rows  # more than one node took tasks
    # the sweep's own jobs: a batch job of an earlier case may end among them
    assert most_at_once(instance_spans(site, ids=final)) <= cap


@pytest.mark.parametrize("driver", ["native", "cli"])
def test_a_pack_of_two_nodes_is_one_instance_over_both(
    driver: str, site: FluxInstance, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if site.run(["uri", "--help"]).returncode != 0:
        # a pack reaches each batch job's instance by its job id (`flux uri`)
        pytest.skip(
            f"flux-core {flux_version(site.flux)} has no `flux uri`: a batch job's "
            "instance is not reached by its job id, so no pack runs on its site"
        )
    outer = adapter_on(site, driver, tmp_path)
    flux = shlex.quote(site.flux)
    ran, r = tmp_path / "ran", tmp_path / "R"
    task = write_script(
        tmp_path / "scripts",
        "task.sh",
        # its R (a task's KVS namespace is its own job's: the instance's is "primary")
        f'[ "$1" != 0 ] || env -u FLUX_KVS_NAMESPACE {flux} kvs get resource.R > {r}\n'
        f'echo "$1 $FLUX_URI $({flux} getattr rank) $({flux} getattr size)" >> {ran}\nsleep 1\n',
    )
    count = 16
    try:
        with caplog.at_level(logging.INFO, logger="hpcbridge"):
            finals = run_packed(
                outer,
                [(task, [str(index)]) for index in range(count)],
                {"time": "30s"},
                Pack.parse("nodes=2,time=5,count=1"),
                flux_command=site.flux,
                poll_interval=0.5,
                timeout=240,
            )
    finally:
        outer.close()
    assert [status.state for status in finals] == [JobState.COMPLETED] * count
    rows = [line.split() for line in ran.read_text().splitlines()]
    assert sorted(int(index) for index, _, _, _ in rows) == list(range(count))  # each once
    # one batch job's instance of two brokers (FLUX_URI is the task's broker's, none the
    # site's), tasks on both
    assert {size for _, _, _, size in rows} == {"2"}, rows
    brokers = {(uri, rank) for _, uri, rank, _ in rows}
    assert sorted(rank for _, rank in brokers) == ["0", "1"] and site.uri not in dict(brokers)
    # its R holds both brokers' cores, and the pack fed it as that many
    cores = 2 * (os.cpu_count() or 1)
    assert parse_cores(r.read_text()) == cores, r.read_text()
    assert f": {cores} of {cores} core(s) up" in caplog.text, caplog.text
    assert active_jobs(site) == ""  # released
