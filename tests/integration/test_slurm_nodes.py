"""Jobs and packs of several nodes on a Slurm 25.11 cluster of four (issue 50).

The module starts a cluster of its own: nodes ``n1``..``n4`` on this one host, a slurmd
each (``containers/slurm/start.sh`` with ``HPCBRIDGE_SLURM_NODES=4``; the Slurm under
``HPCBRIDGE_TEST_SLURM_PREFIX`` built with ``--enable-multiple-slurmd``), each node
declared with the host's cores and the test GPUs, and stops it at the end - so it runs in
any order.  The batch jobs' cases run with the CLI driver, the pyslurm driver (where
pyslurm 25.11 is installed: it loads the client library it was built against, the same
release) and the REST driver (slurmrestd with auth/jwt, the token in ``SLURM_JWT``).  The
launcher's tasks say on which node they run (``SLURMD_NODENAME``): every node has this
host's name.

With flux-core on this machine (the main release in one pass, each older one in a pass of
its own, ``HPCBRIDGE_TEST_FLUX_CORE_ONLY``, on a cluster of its own): a pack of two nodes is
one Flux instance over both (its brokers join through Slurm's PMI, its tasks run on both
ranks, its R holds both nodes' cores), a sweep longer than its allocation goes on in the
next one, each task inside an allocation's time, and when one node's broker is killed mid-
sweep only that node's tasks are sent again, once, and the pack feeds the instance as the
node left (its cores up); a nested broker over a two-node job is reached as ``slurm:ID``
(rank 0), locally and over SSH (the loopback sshd, the job the SSH user's), and runs jobs of
two nodes; ``doctor`` says what a pack holds.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from hpcbridge.model import JobState
from hpcbridge.packing import Pack, run_packed
from hpcbridge.packing.request import ALLOCATION_NAME
from hpcbridge.resources import parse_duration
from hpcbridge.schedulers.flux.instance_answers import parse_cores
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from tests.support.cli import hpcbridge_in
from tests.support.flux import flux_version
from tests.support.flux_cases import require_flux, write_script
from tests.support.slurm_clusters import (
    PREFIX,
    make_adapter,
    own_cluster,
    run_slurm,
    skip_without_slurmrestd,
    slurmrestd,
)

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


#: CI runs the older flux-core releases' cases (HPCBRIDGE_TEST_FLUX_CORE_ONLY) beside the
#: main release's: each pass has a cluster of its own
CORE_ONLY = os.environ.get("HPCBRIDGE_TEST_FLUX_CORE_ONLY") == "1"
NAME, PORT = ("nodes4old", 17380) if CORE_ONLY else ("nodes4", 17310)
#: slurmrestd's address (the cluster's ports: PORT .. PORT + 1 + NODES)
LISTEN = f"127.0.0.1:{PORT + 8}"


@pytest.fixture(scope="module")
def four_nodes() -> Iterator[Dict[str, str]]:
    cluster = own_cluster(NAME, PORT, prefix=PREFIX, nodes=NODES, cpus=CPUS, jwt=True)
    with cluster as env, pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)  # the commands the adapter runs reach it
        yield env


@pytest.fixture(scope="module")
def rest(four_nodes: Dict[str, str]) -> Iterator[Dict[str, str]]:
    """The REST driver's settings for the cluster: slurmrestd on ``LISTEN`` (auth/jwt), and
    a token of root's, the jobs' user, for ``SLURM_JWT`` (set only while a case of the REST
    driver runs: sbatch and pyslurm would authenticate with it, and pass it on to the job,
    whose srun slurmd then refuses)."""
    skip_without_slurmrestd()
    with slurmrestd(f"/tmp/hpcbridge-slurm-{NAME}", LISTEN):
        made = run_slurm(["scontrol", "token", "username=root", "lifespan=3600"], four_nodes)
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip().partition("=")[2]
        yield {"HPCBRIDGE_SLURM_REST_URL": f"http://{LISTEN}", "SLURM_JWT": token}


@pytest.fixture(params=["cli", "native", "rest"])
def adapter(
    request: pytest.FixtureRequest,
    four_nodes: Dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[RealSlurmAdapter]:
    driver = request.param
    settings = {**four_nodes, "HPCBRIDGE_SLURM_DRIVER": driver}
    if driver == "rest":
        settings.update(request.getfixturevalue("rest"))
        monkeypatch.setenv("SLURM_JWT", settings.pop("SLURM_JWT"))  # the driver reads it
    if driver == "native":
        try:
            version = importlib.metadata.version("pyslurm")
        except importlib.metadata.PackageNotFoundError:
            pytest.skip(
                "pyslurm is not installed (scripts/test.sh installs the wheel built for 25.11)"
            )
        if not version.startswith("25.11."):
            pytest.skip(f"pyslurm {version} is not built for Slurm 25.11")
    made = make_adapter(settings, tmp_path)
    try:
        yield made
    finally:
        made.store.close()


def flux_reaching_slurm_jobs() -> str:
    """This run's ``flux``; skips for a release without ``flux uri`` (0.26)."""
    flux = require_flux()
    if subprocess.run([flux, "uri", "--help"], capture_output=True).returncode != 0:
        pytest.skip(
            f"flux-core {flux_version(flux)} has no `flux uri`: neither a pack nor slurm:ID "
            "reaches the Flux instance of a Slurm job"
        )
    return flux


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


#: each task says its node's CPUs, GPUs and memory per CPU as Slurm gave them
PER_NODE = (
    "$HPCBRIDGE_LAUNCHER sh -c 'echo \"node $SLURMD_NODENAME cpus=$SLURM_CPUS_ON_NODE "
    "gpus=$CUDA_VISIBLE_DEVICES mem=$SLURM_MEM_PER_CPU\"'\n"
)


def test_whole_nodes_gpus_and_memory_per_cpu_hold_on_each_node(
    adapter: RealSlurmAdapter, four_nodes: Dict[str, str], tmp_path: Path
) -> None:
    asked = {"nodes": 2, "exclusive": True, "gpus_per_node": 2, "mem_per_cpu": "100M"}
    job_id = adapter.submit_job(script(tmp_path, PER_NODE), {**asked, "time": "60"})
    status = adapter.wait(job_id, poll_interval=1, timeout=120)
    shown = run_slurm(["scontrol", "--oneliner", "show", "job", job_id], four_nodes)
    log = adapter.get_job_logs(job_id)
    assert status.state is JobState.COMPLETED, log
    nodes = sorted(line.split()[1:] for line in log.splitlines() if line.startswith("node "))
    # each node whole (all its CPUs), both its GPUs, the memory per CPU asked
    assert len(nodes) == 2 and len({node[0] for node in nodes}) == 2, log
    assert all(node[1:] == [f"cpus={CPUS}", "gpus=0,1", "mem=100"] for node in nodes), log
    # the controller's record: per node, and the allocation's sum over both (without
    # slurmdbd no GPU, and under CR_Core no memory, is counted in AllocTRES)
    record = dict(word.split("=", 1) for word in shown.stdout.split() if "=" in word)
    assert record["NumNodes"] == "2" and record["OverSubscribe"] == "NO", shown.stdout
    assert record["MinMemoryCPU"] == "100M", shown.stdout
    assert record["TresPerNode"].replace("gpu=", "gpu:") == "gres/gpu:2", shown.stdout
    alloc = dict(item.split("=", 1) for item in record["AllocTRES"].split(","))
    assert alloc["node"] == "2" and alloc["cpu"] == str(2 * CPUS), shown.stdout


def packs_left(env: Dict[str, str], settle: float = 60.0) -> str:
    """The pack allocations still queued once those being cancelled had ``settle`` s."""
    deadline = time.monotonic() + settle
    while True:
        listed = run_slurm(["squeue", "-h", "-n", ALLOCATION_NAME, "-o", "%i %T %N"], env)
        assert listed.returncode == 0, listed.stderr
        if not listed.stdout.strip() or time.monotonic() > deadline:
            return str(listed.stdout.strip())
        time.sleep(1.0)


@pytest.mark.flux
def test_a_pack_of_two_nodes_is_one_instance_over_both(
    four_nodes: Dict[str, str], tmp_path: Path
) -> None:
    flux = flux_reaching_slurm_jobs()
    slurm = make_adapter({**four_nodes, "HPCBRIDGE_SLURM_DRIVER": "cli"}, tmp_path)
    ran, r = tmp_path / "ran", tmp_path / "R"
    quoted = shlex.quote(flux)
    task = write_script(
        tmp_path / "scripts",
        "task.sh",
        # its R in the instance's KVS ("primary": a task's namespace is its job's); every
        # release has it there, `flux resource R` only 0.88
        f'[ "$1" != 0 ] || env -u FLUX_KVS_NAMESPACE {quoted} kvs get resource.R > {r}\n'
        f'echo "$1 $({quoted} getattr rank) $({quoted} getattr size)" >> {ran}\nsleep 1\n',
    )
    count = 16
    try:
        finals = run_packed(
            slurm,
            [(task, [str(index)]) for index in range(count)],
            {"time": "20s"},
            Pack.parse("nodes=2,time=3m,count=1"),
            flux_command=flux,
            poll_interval=0.5,
            timeout=240,
        )
    finally:
        slurm.close()
    assert [status.state for status in finals] == [JobState.COMPLETED] * count
    rows = [line.split() for line in ran.read_text().splitlines()]
    assert sorted(int(index) for index, _, _ in rows) == list(range(count))  # each once
    assert {size for _, _, size in rows} == {"2"}, rows  # one instance of two brokers
    assert {rank for _, rank, _ in rows} == {"0", "1"}, rows  # tasks on both nodes
    # its capacity: each node's broker on the CPUs Slurm gave it there, summed
    assert parse_cores(r.read_text()) == 2 * CPUS, r.read_text()
    assert packs_left(four_nodes) == ""


@pytest.mark.flux
def test_a_sweep_longer_than_a_two_node_allocation_goes_on_in_the_next(
    four_nodes: Dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Allocations of two nodes for a minute, ~70 s of work: the next one is asked for
    before the first stops taking tasks (the cluster has the two other nodes for it),
    each instance spans both of its nodes, each task starts and ends inside its
    allocation's time (none is started where it cannot end), none is lost, none is left."""
    flux = flux_reaching_slurm_jobs()
    slurm = make_adapter({**four_nodes, "HPCBRIDGE_SLURM_DRIVER": "cli"}, tmp_path)
    ran = tmp_path / "ran"
    rank = f"$({shlex.quote(flux)} getattr rank)"
    task = write_script(
        tmp_path / "scripts",
        "task.sh",
        f"started=$(date +%s.%N)\nsleep 4\n"
        f'echo "$1 $FLUX_URI {rank} $started $(date +%s.%N)" >> {ran}\n',
    )
    count, done = 70, threading.Event()
    spans: Dict[str, Tuple[float, float]] = {}
    watcher = threading.Thread(target=watch_spans, args=(four_nodes, spans, done))
    watcher.start()
    try:
        with caplog.at_level(logging.INFO, logger="hpcbridge"):
            finals = run_packed(
                slurm,
                [(task, [str(index)]) for index in range(count)],
                {"time": "8s"},
                Pack.parse("nodes=2,time=1,count=1"),
                flux_command=flux,
                poll_interval=0.5,
                timeout=400,
                outer_time_margin=5.0,
            )
    finally:
        done.set()
        watcher.join()
        slurm.close()
    assert [status.state for status in finals] == [JobState.COMPLETED] * count
    rows = [line.split() for line in ran.read_text().splitlines()]
    assert sorted(int(row[0]) for row in rows) == list(range(count))  # each once
    # FLUX_URI is the task's broker's: two per instance, one on each node
    brokers = {(uri, on) for _, uri, on, _, _ in rows}
    first, second = ({uri for uri, on in brokers if on == r} for r in ("0", "1"))
    asked = re.findall(r"pack: allocation (\d+) asked for", caplog.text)
    assert len(first) == len(second) >= 2 and len(asked) >= 2, (brokers, asked)
    assert "lost" not in caplog.text
    assert sorted(spans) == sorted(asked), (spans, asked)
    for index, uri, _, started, ended in rows:
        assert any(
            began <= float(started) and float(ended) <= end for began, end in spans.values()
        ), f"task {index} in {uri} ran outside every allocation's time: {spans}"
    assert packs_left(four_nodes) == ""


def watch_spans(
    env: Dict[str, str], spans: Dict[str, Tuple[float, float]], done: threading.Event
) -> None:
    """Until ``done``: each running pack allocation's start and the end its time limit
    gives it, by job id, as the controller says (read while it runs: the cluster keeps
    no accounting, and forgets an ended job after MinJobAge)."""
    while not done.wait(1.0):
        listed = run_slurm(
            ["squeue", "-h", "-n", ALLOCATION_NAME, "-t", "R", "-o", "%i %S %l"], env
        )
        for line in listed.stdout.splitlines():
            job_id, start, limit = line.split()
            began = datetime.fromisoformat(start).timestamp()
            spans[job_id] = (began, began + parse_duration(limit))


def broker_of(slurm_job: str, node_id: str) -> Optional[int]:
    """The pid of the flux-broker that Slurm job ``slurm_job`` runs on its node
    ``node_id`` (0, 1, ...: its step's SLURM_NODEID), from the processes' environment."""
    for entry in Path("/proc").iterdir():
        try:
            # a broker names itself flux-broker-<rank>
            broker = (entry / "comm").read_text().startswith("flux-broker")
            if not entry.name.isdigit() or not broker:
                continue
            words = (entry / "environ").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        env = dict(word.split("=", 1) for word in words if "=" in word)
        if env.get("SLURM_JOB_ID") == slurm_job and env.get("SLURM_NODEID") == node_id:
            return int(entry.name)
    return None


def kill_second_broker_once_busy(env: Dict[str, str], ran: Path, killed: List[int]) -> None:
    """Once a task runs on rank 1 of the pack's instance, SIGKILL that rank's broker."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        rows = [line.split() for line in ran.read_text().splitlines()] if ran.exists() else []
        if any(row[0] == "start" and row[2:] == ["1"] for row in rows):
            listed = run_slurm(["squeue", "-h", "-n", ALLOCATION_NAME, "-o", "%i"], env)
            pid = broker_of(listed.stdout.strip(), "1")
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
        time.sleep(0.2)


@pytest.mark.flux
def test_a_nodes_broker_killed_loses_only_its_tasks_sent_again_once(
    four_nodes: Dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    flux = flux_reaching_slurm_jobs()
    slurm = make_adapter({**four_nodes, "HPCBRIDGE_SLURM_DRIVER": "cli"}, tmp_path)
    ran = tmp_path / "ran"
    rank = f"$({shlex.quote(flux)} getattr rank)"
    task = write_script(
        tmp_path / "scripts",
        "task.sh",
        f'echo "start $1 {rank}" >> {ran}\nsleep 3\necho "end $1 {rank}" >> {ran}\n',
    )
    count, killed = 10, []
    killer = threading.Thread(target=kill_second_broker_once_busy, args=(four_nodes, ran, killed))
    killer.start()
    try:
        with caplog.at_level(logging.INFO, logger="hpcbridge"):
            finals = run_packed(
                slurm,
                [(task, [str(index)]) for index in range(count)],
                {"time": "20s"},
                Pack.parse("nodes=2,time=3m,count=1"),
                flux_command=flux,
                poll_interval=0.5,
                timeout=240,
            )
    finally:
        killer.join()
        slurm.close()
    assert killed, "no task ran on rank 1: no broker was killed"
    ends = [(status.state, status.reason) for status in finals]
    assert [state for state, _ in ends] == [JobState.COMPLETED] * count, ends
    again = [int(index) for index in re.findall(r"pack: task (\d+) \S+ lost \(", caplog.text)]
    assert again and len(again) == len(set(again)), caplog.text  # each sent again once
    # the lost node's cores no longer count: counted again once a task was lost with it,
    # the rest is fed as one node's (its R still holds both; `flux resource list` of this
    # instance lists only the rank left, up).  What was counted before the loss depends on
    # when the brokers joined (the kill may come before a count saw both).
    after = caplog.text.partition(" lost (")[2]
    counted = re.findall(r"pack: allocation \S+: (\d+) of \d+ core\(s\) up", after)
    assert counted[-1:] == [str(CPUS)], after
    # a task whose broker was killed may still end, its rank unknown: "end 5"
    rows = [line.split() for line in ran.read_text().splitlines() if len(line.split()) == 3]
    ends = sorted(int(row[1]) for row in rows if row[0] == "end")
    assert ends == list(range(count)), rows  # each ended once where a broker saw it
    for index in again:  # lost on rank 1 (started there, or placed there unstarted)
        starts = [row[2] for row in rows if row[:2] == ["start", str(index)]]
        assert len(starts) == 1 or starts[0] == "1", (index, rows)
        assert [row[2] for row in rows if row[:2] == ["end", str(index)]] == ["0"], rows
    assert packs_left(four_nodes) == ""


@pytest.mark.flux
def test_doctor_says_what_a_pack_holds(four_nodes: Dict[str, str], tmp_path: Path) -> None:
    env = {**os.environ, **four_nodes, "HPCBRIDGE_FLUX_COMMAND": flux_reaching_slurm_jobs()}
    env["HPCBRIDGE_STATE_DIR"] = str(tmp_path / "state")
    said = subprocess.run(
        [sys.executable, "-m", "hpcbridge", "doctor", "--scheduler", "slurm"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    packing = [line for line in said.stdout.splitlines() if "slurm packing" in line]
    assert len(packing) == 1 and packing[0].startswith("ok"), said.stdout + said.stderr
    assert f"{NODES} node(s) of {CPUS} CPUs" in packing[0], packing
    assert f"Flux instance of N x {CPUS} cores" in packing[0] and "pmi2" not in packing[0]


@pytest.fixture
def nested(four_nodes: Dict[str, str], tmp_path: Path) -> Iterator[Tuple[Dict[str, str], str]]:
    """The environment of ``hpcbridge`` reaching a Flux instance that ``srun`` starts over
    a two-node Slurm job (one broker per node, joined by pmi2) through ``slurm:ID``, and
    the URI ``hpcbridge uri slurm:ID`` gave."""
    flux = flux_reaching_slurm_jobs()
    env = {**os.environ, **four_nodes, "PATH": f"{four_nodes['PATH']}:{Path(flux).parent}"}
    instance = f"srun --ntasks-per-node=1 --mpi=pmi2 {shlex.quote(flux)} start sleep inf"
    submitted = run_slurm(
        ["sbatch", "--parsable", "-N2", "-t2", f"-o{tmp_path}/flux-%j.out", "--wrap", instance],
        env,
    )
    assert submitted.returncode == 0, submitted.stderr
    slurm_job = submitted.stdout.strip()
    try:
        uri, deadline = "", time.monotonic() + 90
        while not uri and time.monotonic() < deadline:
            found = hpcbridge_in(env, "uri", f"slurm:{slurm_job}")
            uri = found.stdout.strip() if found.returncode == 0 else ""
            time.sleep(0 if uri else 1)
        assert uri, f"no Flux URI for slurm:{slurm_job}: {found.stderr}"
        env.update(
            HPCBRIDGE_SCHEDULER="flux",
            HPCBRIDGE_FLUX_URI=f"slurm:{slurm_job}",
            HPCBRIDGE_FLUX_COMMAND=flux,
            HPCBRIDGE_STATE_DIR=str(tmp_path / "state"),
            HPCBRIDGE_MIN_POLL_INTERVAL="0",
        )
        yield env, uri
    finally:
        run_slurm(["scancel", slurm_job], env)


@pytest.mark.flux
def test_a_nested_broker_over_two_nodes_runs_jobs_of_two_nodes(
    nested: Tuple[Dict[str, str], str], tmp_path: Path
) -> None:
    env, uri = nested
    flux = env["HPCBRIDGE_FLUX_COMMAND"]
    # slurm:ID is rank 0's URI, of an instance of both nodes
    asked = {**env, "FLUX_URI": uri}
    said = [run_slurm([flux, "getattr", name], asked).stdout.strip() for name in ("rank", "size")]
    assert said == ["0", "2"], said
    plain = write_script(tmp_path, "plain.sh", f'echo "rank $({flux} getattr rank)"\n')
    batch = write_script(tmp_path, "batch.sh", "$HPCBRIDGE_LAUNCHER -N 2 flux getattr rank\n")
    ranks = {}
    for kind, path in (("--no-nested", plain), ("--nested", batch)):
        ran = hpcbridge_in(env, "submit", "--nodes", "2", "-t", "1m", kind, path, "--json")
        assert ran.returncode == 0, ran.stderr
        job_id = json.loads(ran.stdout)["job_id"]
        waited = hpcbridge_in(env, "wait", job_id, "--poll-interval", "0.5")
        logs = hpcbridge_in(env, "logs", job_id)
        assert waited.returncode == 0, waited.stdout + waited.stderr + logs.stdout
        # only the tasks' lines: 0.49's brokers also log jobtap errors into a batch job's output
        ranks[kind] = sorted(re.findall(r"^(?:rank )?(\d+)$", logs.stdout, re.MULTILINE))
    # a plain job: a task on each broker of the instance; a batch job: its own instance's
    # brokers, one on each of the two nodes, each run a task of its launcher's step
    assert ranks == {"--no-nested": ["0", "1"], "--nested": ["0", "1"]}, ranks


@pytest.mark.flux
@pytest.mark.ssh
def test_over_ssh_slurm_id_is_rank_0_of_a_two_node_instance(
    four_nodes: Dict[str, str], ssh_server: Any, tmp_path: Path
) -> None:
    """The SSH user's two-node job runs a Flux instance (one broker per node, pmi2); from
    here, over SSH, ``slurm:ID`` reaches rank 0 of it and a ``--nodes 2`` plain job runs a
    task on each of its brokers (the instance is the SSH user's: only its owner may use it)."""
    flux = flux_reaching_slurm_jobs()
    user, conf = ssh_server.user, four_nodes["SLURM_CONF"]
    folder = Path(tempfile.mkdtemp(prefix="hpcbridge-nodes-ssh-"))
    shutil.chown(folder, user, user)
    paths = f"{PREFIX}/bin:{Path(flux).parent}:/usr/bin:/bin"
    instance = f"srun --ntasks-per-node=1 --mpi=pmi2 {shlex.quote(flux)} start sleep inf"
    as_user = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={conf}", f"PATH={paths}"]
    submitted = run_slurm(
        [
            *as_user,
            "sbatch",
            "--parsable",
            "-N2",
            "-t2",
            f"-o{folder}/flux-%j.out",
            "--wrap",
            instance,
        ],
        four_nodes,
    )
    assert submitted.returncode == 0, submitted.stderr
    slurm_job = submitted.stdout.strip()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HPCBRIDGE_STATE_DIR": str(tmp_path / "state"),
        "HPCBRIDGE_TRANSPORT": "ssh",
        "HPCBRIDGE_SSH_HOST": ssh_server.host,
        "HPCBRIDGE_SSH_PORT": str(ssh_server.port),
        "HPCBRIDGE_SSH_USER": user,
        "HPCBRIDGE_SSH_KEY": str(ssh_server.key),
        "HPCBRIDGE_SSH_KNOWN_HOSTS": str(ssh_server.known_hosts),
        "HPCBRIDGE_COMMAND_ENV": f"SLURM_CONF={conf} PATH={paths}",
        "HPCBRIDGE_REMOTE_WORKDIR": str(folder / "jobs"),
        "HPCBRIDGE_SCHEDULER": "flux",
        "HPCBRIDGE_FLUX_URI": f"slurm:{slurm_job}",
        "HPCBRIDGE_FLUX_COMMAND": flux,
        "HPCBRIDGE_MIN_POLL_INTERVAL": "0",
    }
    try:
        uri, deadline = "", time.monotonic() + 90
        while not uri and time.monotonic() < deadline:
            found = hpcbridge_in(env, "uri", f"slurm:{slurm_job}")
            uri = found.stdout.strip() if found.returncode == 0 else ""
            time.sleep(0 if uri else 1)
        assert uri, f"no Flux URI for slurm:{slurm_job} over SSH: {found.stderr}"
        asked = [*as_user, f"FLUX_URI={uri}", flux, "getattr"]
        said = [run_slurm([*asked, name], four_nodes).stdout.strip() for name in ("rank", "size")]
        assert said == ["0", "2"], (uri, said)  # rank 0's URI, of an instance of both nodes
        plain = write_script(tmp_path, "plain.sh", f'echo "rank $({flux} getattr rank)"\n')
        ran = hpcbridge_in(
            env, "submit", "--nodes", "2", "-t", "1m", "--no-nested", plain, "--json"
        )
        assert ran.returncode == 0, ran.stderr
        job_id = json.loads(ran.stdout)["job_id"]
        waited = hpcbridge_in(env, "wait", job_id, "--poll-interval", "0.5")
        logs = hpcbridge_in(env, "logs", job_id)
        assert waited.returncode == 0, waited.stdout + waited.stderr + logs.stdout
        assert sorted(logs.stdout.replace("rank ", "").split()) == ["0", "1"], logs.stdout
    finally:
        run_slurm(["scancel", slurm_job], four_nodes)
        shutil.rmtree(folder, ignore_errors=True)
