"""Allocation packing on a Flux system (issues 37, 46): ``--pack`` on a Flux instance holds
batch jobs, each an instance of its own, and feeds the sweep's tasks into them as plain
jobs; every task COMPLETED once, inside the batch job's instance, and nothing is left
running in the outer instance afterwards - whichever way the client stops.  A batch job
holds whole nodes, or ``cpus_per_node``, and its instance sees exactly that.  The outer
instance is a test broker of its own (16 cores declared), through each driver."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from hpcbridge.model import JobState
from hpcbridge.packing import Pack, run_packed
from hpcbridge.packing.request import ALLOCATION_NAME
from hpcbridge.schedulers.flux.instance_answers import parse_cores
from hpcbridge.store.jobs import JobStore
from tests.conftest import REPO
from tests.support import pack_stops
from tests.support.cli import stoppable
from tests.support.flux_cases import active_jobs, adapter_on, start_instance, write_script

pytestmark = pytest.mark.flux

TASKS = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    instance = start_instance(tmp_path_factory.mktemp("flux-packing"))
    yield instance
    instance.stop()


@pytest.mark.parametrize("driver", ["native", "cli"])
def test_a_sweep_runs_in_a_batch_job_of_its_own_and_nothing_is_left(
    driver: str, broker: Any, tmp_path: Path
) -> None:
    outer = adapter_on(broker, driver, tmp_path)
    ran = tmp_path / "ran"
    task = write_script(tmp_path / "scripts", "task.sh", f'echo "$1 $FLUX_URI" >> {ran}\n')
    finals = run_packed(
        outer,
        [(task, [str(index)]) for index in range(TASKS)],
        {"time": "30s"},
        Pack.parse("nodes=1,time=5,count=1"),
        flux_command=broker.flux,
        poll_interval=0.5,
        timeout=240,
    )
    assert [status.state for status in finals] == [JobState.COMPLETED] * TASKS
    rows = [line.split() for line in ran.read_text().splitlines()]
    assert sorted(int(index) for index, _ in rows) == list(range(TASKS))  # each once
    uris = {uri for _, uri in rows}
    assert len(uris) == 1 and broker.uri not in uris  # in the batch job's own instance
    assert active_jobs(broker) == ""  # the batch job was released
    outer.close()


def test_the_command_shows_the_batch_job_it_would_hold(broker: Any, tmp_path: Path) -> None:
    task = write_script(tmp_path / "scripts", "task.sh", "echo never\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HPCBRIDGE_STATE_DIR": str(tmp_path / "state"),
        "HPCBRIDGE_FLUX_URI": broker.uri,
        "HPCBRIDGE_FLUX_COMMAND": broker.flux,
    }
    argv = [sys.executable, "-m", "hpcbridge", "submit-many", "--scheduler", "flux", task]
    argv += ["--time", "1m", "--dry-run", "--pack"]
    shown = subprocess.run(
        [*argv, "time=10,count=2"], env=env, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    assert "each running: exec sleep inf" in shown.stdout
    assert "batch" in shown.stdout and ALLOCATION_NAME in shown.stdout
    batch = next(line for line in shown.stdout.splitlines() if " batch " in line)
    assert " -N1 --exclusive " in batch  # whole nodes by default
    shared = subprocess.run(
        [*argv, "time=10,cpus_per_node=2"], env=env, capture_output=True, text=True, timeout=120
    )
    assert shared.returncode == 0, shared.stderr
    batch = next(line for line in shared.stdout.splitlines() if " batch " in line)
    assert " -n1 -N1 -c2 " in batch and "--exclusive" not in batch
    assert active_jobs(broker) == ""  # a dry run holds nothing


@pytest.mark.parametrize("spec, cores", [("time=5,cpus_per_node=1", 1), ("time=5", 16)])
def test_a_batch_job_holds_what_the_pack_asks_and_its_instance_sees_that(
    spec: str, cores: int, broker: Any, tmp_path: Path
) -> None:
    """``cpus_per_node=1``: one core, one task at a time; whole nodes: the outer node's
    16 (declared) cores."""
    outer = adapter_on(broker, "cli", tmp_path)
    ran, r = tmp_path / "ran", tmp_path / "R"
    task = write_script(
        tmp_path / "scripts",
        "task.sh",
        f'started=$(date +%s.%N)\n[ "$1" != 0 ] || {shlex.quote(broker.flux)} resource R > {r}\n'
        f'sleep 0.5\necho "$started $(date +%s.%N)" >> {ran}\n',
    )
    finals = run_packed(
        outer,
        [(task, [str(index)]) for index in range(3)],
        {"time": "30s"},
        Pack.parse(spec),
        flux_command=broker.flux,
        poll_interval=0.5,
        timeout=240,
    )
    outer.close()
    assert [status.state for status in finals] == [JobState.COMPLETED] * 3
    assert parse_cores(r.read_text()) == cores
    if cores == 1:
        rows = [line.split() for line in ran.read_text().splitlines()]
        spans = sorted((float(started), float(ended)) for started, ended in rows)
        for earlier, later in zip(spans, spans[1:]):
            assert later[0] >= earlier[1], f"two tasks at once: {spans}"
    assert active_jobs(broker) == ""


def test_every_way_out_of_the_client_releases_the_batch_job(broker: Any, tmp_path: Path) -> None:
    def command(folder: Path, task: str) -> Tuple[List[str], Dict[str, str]]:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "HPCBRIDGE_STATE_DIR": str(folder / "state"),
            "HPCBRIDGE_FLUX_URI": broker.uri,
            "HPCBRIDGE_FLUX_COMMAND": broker.flux,
            "HPCBRIDGE_MIN_POLL_INTERVAL": "0",
        }
        args = folder / "args"
        args.write_text("".join(f"{index}\n" for index in range(pack_stops.TASKS)))
        argv = [sys.executable, "-m", "hpcbridge", "submit-many", "--scheduler", "flux", task]
        return argv + ["--args-file", str(args), "--time", "1m", "--poll-interval", "0.5"], env

    def gone(job_id: str) -> bool:
        listed = broker.run(["jobs", "--no-header", "-o", "{state}", job_id])
        assert listed.returncode == 0, listed.stderr
        return listed.stdout.strip() == "INACTIVE"

    clients = pack_stops.start(command, tmp_path, "time=10,cpus_per_node=1")
    took = pack_stops.stop_each(clients, gone)
    assert set(took) == set(pack_stops.WAYS)
    print("batch job inactive after (s):", {way: round(t, 1) for way, t in took.items()})


def test_an_interrupted_pack_settles_and_its_ended_tasks_need_no_flux(
    broker: Any, tmp_path: Path
) -> None:
    """Ctrl-C of an unnamed pack while tasks run (issue 46, 3-4): its batch job is released
    and the tasks it held are recorded at once - those that ended as they ended, the
    others CANCELLED, their instance gone; ``jobs`` shows them so without a warning or a
    stale mark, and status, wait, cancel and logs of them run with no flux command."""
    ran, gate = tmp_path / "ran", tmp_path / "gate"
    task = write_script(
        tmp_path / "scripts",
        "task.sh",
        f'echo "task $1"\necho "$1" >> {ran}\n[ "$1" -lt 2 ] && exit 0\n'
        f"while [ ! -e {gate} ]; do sleep 0.2; done\n",
    )
    args = tmp_path / "args"
    args.write_text("".join(f"{index}\n" for index in range(8)))
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HPCBRIDGE_STATE_DIR": str(tmp_path / "state"),
        "HPCBRIDGE_FLUX_URI": broker.uri,
        "HPCBRIDGE_FLUX_COMMAND": broker.flux,
        "HPCBRIDGE_MIN_POLL_INTERVAL": "0",
        # flux.util sets SIGINT to SIG_DFL while the bindings block (a Ctrl-C there kills
        # the client outright unless hpcbridge keeps its handler): the CLI driver's client
        # always gets it as KeyboardInterrupt
        "HPCBRIDGE_FLUX_DRIVER": "cli",
    }
    command = [sys.executable, "-m", "hpcbridge"]
    argv = [*command, "submit-many", "--scheduler", "flux", task, "--args-file", str(args)]
    argv += ["--time", "30s", "--pack", "time=5", "--poll-interval", "0.5"]
    # its SIGINT at the default, whatever the suite's was
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    client = subprocess.Popen(argv, env=env, preexec_fn=stoppable, **pipes)
    deadline = time.monotonic() + 240
    while not ran.exists() or len(ran.read_text().split()) < 3 or recorded(tmp_path) < 3:
        # 0 and 1 ended, and one held is running, its job recorded
        assert client.poll() is None, client.communicate()
        assert time.monotonic() < deadline, "no task ran"
        time.sleep(0.2)
    client.send_signal(signal.SIGINT)
    _, err = client.communicate(timeout=120)
    assert client.returncode == 130, err.decode()
    assert active_jobs(broker) == ""
    gate.touch()  # a task the release left behind would end now: none may

    def cli(*args: str, flux: str = broker.flux) -> Any:
        here = {**env, "HPCBRIDGE_FLUX_COMMAND": flux}
        return subprocess.run([*command, *args], env=here, capture_output=True, text=True)

    store = JobStore(tmp_path / "state" / "jobs.db")
    tasks = [record for record in store.list() if record.kind == "plain"]
    states = sorted(record.state for record in tasks)
    assert states.count("COMPLETED") == 2 and set(states) == {"COMPLETED", "CANCELLED"}, tasks
    lost = next(record.job_id for record in tasks if record.state == "CANCELLED")
    done = next(record.job_id for record in tasks if record.state == "COMPLETED")
    listed = cli("jobs", "--json")  # the tasks, or their pack's line: none asked, none stale
    assert listed.returncode == 0 and "WARNING" not in listed.stderr, listed.stderr
    entries = json.loads(listed.stdout)
    assert not [entry for entry in entries if entry.get("stale")], entries
    no_flux = str(tmp_path / "no-flux-here")
    status = cli("status", lost, "--json", flux=no_flux)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["native_state"] == "(instance gone)", status.stdout
    assert cli("wait", lost, "--timeout", "40", flux=no_flux).returncode == 1
    cancelled = cli("cancel", lost, flux=no_flux)
    assert "already ended CANCELLED" in cancelled.stdout, cancelled.stderr
    logs = cli("logs", done, flux=no_flux)
    assert logs.returncode == 0 and logs.stdout.startswith("task "), logs.stderr


def recorded(tmp_path: Path) -> int:
    """How many packed tasks (plain Flux jobs) the case's job store holds."""
    path = tmp_path / "state" / "jobs.db"
    if not path.exists():
        return 0
    return sum(record.kind == "plain" for record in JobStore(path).list())
