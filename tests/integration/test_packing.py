"""Allocation packing (issue 37): a sweep's tasks run as plain Flux jobs in Slurm
allocations of the test cluster, each running a Flux instance, reached as ``slurm:<id>``;
every task COMPLETED once, both instances used, no allocation left after.  (A sweep
longer than its allocation's time going on in the next one, no task started where it
cannot end, is proven on allocations of two nodes by test_slurm_nodes.)

Needs the Slurm test cluster (containers/slurm) and flux-core on this machine (the
allocations' node is this machine)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from hpcbridge.errors import ResourceError
from hpcbridge.model import JobState
from hpcbridge.packing import Pack, run_packed
from hpcbridge.packing.allocations import AllocationError
from hpcbridge.packing.request import ALLOCATION_NAME
from hpcbridge.store.jobs import JobStore
from hpcbridge.store.packs import PackBook
from tests.support.cli import stoppable
from tests.support.flux_cases import require_flux, write_script
from tests.support.slurm_clusters import TARGETS, cluster_for, make_adapter, run_slurm

pytestmark = [pytest.mark.flux, pytest.mark.slurm]

TASKS = 40


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    yield from cluster_for(TARGETS["22.05-cli"])


def packs_in_queue(env: Dict[str, str], settle: float = 60.0) -> str:
    """The pack allocations still in the queue once those being cancelled (COMPLETING)
    had ``settle`` seconds to leave it."""
    deadline = time.monotonic() + settle
    while True:
        listed = run_slurm(["squeue", "-h", "-n", ALLOCATION_NAME, "-o", "%i %T"], env)
        assert listed.returncode == 0, listed.stderr
        if not listed.stdout.strip() or time.monotonic() > deadline:
            return str(listed.stdout.strip())
        time.sleep(1.0)


def args_file(tmp_path: Path, count: int) -> Path:
    """An ``--args-file`` of ``count`` lines: 0, 1, ..."""
    args = tmp_path / "args"
    args.write_text("".join(f"{index}\n" for index in range(count)))
    return args


def local_command(
    cluster: Dict[str, str], tmp_path: Path, task: str, count: int
) -> Tuple[List[str], Dict[str, str]]:
    """``hpcbridge submit-many TASK`` over ``count`` argument lines on the test cluster, and
    its environment: a state folder of the case's own, the flux found here, no poll floor."""
    env = {
        **os.environ,
        **cluster,
        "HPCBRIDGE_STATE_DIR": str(tmp_path / "state"),
        "HPCBRIDGE_FLUX_COMMAND": require_flux(),
        "HPCBRIDGE_MIN_POLL_INTERVAL": "0",
    }
    argv = [sys.executable, "-m", "hpcbridge", "submit-many", "--scheduler", "slurm", task]
    argv += ["--args-file", str(args_file(tmp_path, count)), "--time", "1m"]
    return argv + ["--poll-interval", "0.5"], env


def test_a_sweep_runs_in_two_allocations_and_none_is_left(
    cluster: Dict[str, str], tmp_path: Path
) -> None:
    flux = require_flux()
    slurm = make_adapter(cluster, tmp_path)
    ran = tmp_path / "ran"
    task = write_script(tmp_path / "scripts", "task.sh", f'echo "$1 $FLUX_URI" >> {ran}\n')
    pack = Pack.parse("nodes=1,time=10,count=2,cpus_per_node=1")
    finals = run_packed(
        slurm,
        [(task, [str(index)]) for index in range(TASKS)],
        {"time": "60s"},
        pack,
        flux_command=flux,
        poll_interval=0.5,
        timeout=300,
    )
    assert len(finals) == TASKS
    assert {status.state for status in finals} == {JobState.COMPLETED}
    rows = [line.split(" ", 1) for line in ran.read_text().splitlines()]
    assert sorted(int(index) for index, _ in rows) == list(range(TASKS))  # each once
    assert len({uri for _, uri in rows}) == 2, rows  # both instances took tasks
    assert packs_in_queue(cluster) == ""
    slurm.close()


def test_a_task_without_a_time_limit_or_too_long_is_refused_before_anything_is_held(
    cluster: Dict[str, str], tmp_path: Path
) -> None:
    slurm = make_adapter(cluster, tmp_path)
    task = write_script(tmp_path / "scripts", "task.sh", "echo never\n")
    for resources, said in (({}, "needs a time limit"), ({"time": "20m"}, "does not fit")):
        with pytest.raises(ResourceError, match=said):
            run_packed(slurm, [task], resources, Pack.parse("time=30"), flux_command="flux")
    assert packs_in_queue(cluster, settle=0) == ""
    slurm.close()


def test_an_allocation_that_cannot_start_flux_is_said_and_released(
    cluster: Dict[str, str], tmp_path: Path
) -> None:
    slurm = make_adapter(cluster, tmp_path)
    task = write_script(tmp_path / "scripts", "task.sh", "echo never\n")
    with pytest.raises(AllocationError, match="is flux on PATH on the compute nodes"):
        run_packed(
            slurm,
            [task],
            {"time": "60s"},
            Pack.parse("time=5"),
            flux_command=str(tmp_path / "no-flux-here"),
            timeout=120,
        )
    assert packs_in_queue(cluster) == ""
    slurm.close()


def test_the_command_packs_waits_and_says_each_end(cluster: Dict[str, str], tmp_path: Path) -> None:
    task = write_script(tmp_path / "scripts", "task.sh", 'echo "task $1"\n[ "$1" != 3 ]\n')
    argv, env = local_command(cluster, tmp_path, task, 6)
    shown = subprocess.run(
        [*argv, "--pack", "time=10,count=2", "--dry-run"], env=env, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    assert f"--job-name={ALLOCATION_NAME}" in shown.stdout and "flux start" in shown.stdout
    assert packs_in_queue(cluster) == ""  # a dry run holds nothing
    done = subprocess.run(
        [*argv, "--pack", "time=10,count=2,cpus_per_node=1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # task 3 fails: the command says each end and exits 1
    assert done.returncode == 1, done.stderr
    ends = [line.split() for line in done.stdout.splitlines()]
    assert sorted(state for _, state in ends) == ["COMPLETED"] * 5 + ["FAILED"], done.stdout
    assert packs_in_queue(cluster) == ""


@pytest.mark.ssh
def test_over_ssh_the_login_side_holds_the_allocations(
    cluster: Dict[str, str], ssh_server: Any, tmp_path: Path
) -> None:
    """The client's commands go by SSH: the allocations are the SSH user's (sacct says)."""
    flux = require_flux()
    task = write_script(tmp_path / "scripts", "task.sh", 'echo "task $1"\n')
    args = args_file(tmp_path, 6)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HPCBRIDGE_STATE_DIR": str(tmp_path / "state"),
        "HPCBRIDGE_TRANSPORT": "ssh",
        "HPCBRIDGE_SSH_HOST": ssh_server.host,
        "HPCBRIDGE_SSH_PORT": str(ssh_server.port),
        "HPCBRIDGE_SSH_USER": ssh_server.user,
        "HPCBRIDGE_SSH_KEY": str(ssh_server.key),
        "HPCBRIDGE_SSH_KNOWN_HOSTS": str(ssh_server.known_hosts),
        "HPCBRIDGE_COMMAND_ENV": f"SLURM_CONF={cluster['SLURM_CONF']}",
        "HPCBRIDGE_FLUX_COMMAND": flux,
        "HPCBRIDGE_MIN_POLL_INTERVAL": "0",
    }
    argv = [sys.executable, "-m", "hpcbridge", "submit-many", "--scheduler", "slurm", task]
    argv += ["--args-file", str(args), "--time", "1m", "--poll-interval", "0.5"]
    done = subprocess.run(
        [*argv, "--pack", "time=10,count=2,cpus_per_node=1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert [line.split()[1] for line in done.stdout.splitlines()] == ["COMPLETED"] * 6
    assert packs_in_queue(cluster) == ""
    owners = run_slurm(
        ["sacct", "-n", "-X", f"--name={ALLOCATION_NAME}", "-S", "now-10minutes", "-o", "User%32"],
        cluster,
    )
    assert ssh_server.user in owners.stdout.split(), owners.stdout


#: the command, its process ending at once (``os._exit``, as SIGKILL ends it: no cleanup)
#: once 6 tasks ran, right after it handed more to the instance and before their ids were
#: recorded: the worst moment to die
DIES_WHILE_SENDING = """
import os, runpy, sys
from pathlib import Path
from hpcbridge.packing import feeder
note, ran = feeder.PackRun._note, Path(os.environ["TEST_RAN"])
def dying(self, what, *args):
    if what == "sent" and ran.exists() and len(ran.read_text().split()) >= 6:
        os._exit(9)
    note(self, what, *args)
feeder.PackRun._note = dying
sys.argv[0] = "hpcbridge"
runpy.run_module("hpcbridge", run_name="__main__")
"""


def test_a_named_pack_whose_client_died_is_finished_by_wait(
    cluster: Dict[str, str], tmp_path: Path
) -> None:
    """``submit-many --pack … --sweep NAME`` dead mid-sweep - tasks ended, others in
    flight with their ids recorded, the ones it was handing over unrecorded, most unsent:
    ``wait NAME`` reaches the same allocation, follows what is in flight, adopts what went
    in (by its key), feeds the rest - every task run once, all COMPLETED, the allocation
    released."""
    ran = tmp_path / "ran"
    task = write_script(tmp_path / "scripts", "task.sh", f'sleep 1\necho "$1" >> {ran}\n')
    count, death = 40, "died"
    argv, env = local_command(cluster, tmp_path, task, count)
    argv += ["--pack", "time=10", "--sweep", death]
    argv[1:3] = ["-c", DIES_WHILE_SENDING]
    died = subprocess.run(
        argv, env={**env, "TEST_RAN": str(ran)}, capture_output=True, text=True, timeout=240
    )
    assert died.returncode == 9, died.stderr
    assert 6 <= len(ran.read_text().split()) < count, ran.read_text()  # it died mid-sweep
    left = [(t.state, bool(t.job_id)) for t in PackBook(JobStore(env_store(env))).tasks(death)]
    assert ("sent", True) in left and ("sending", False) in left, left
    assert packs_in_queue(cluster, settle=0) != ""  # its allocation outlives it
    said = cli(env, "status", death)
    assert said.returncode == 0, said.stderr
    assert re.match(rf"{death}: pack of {count} \(.+\), interrupted: ", said.stdout), said.stdout
    waited = subprocess.run(
        [sys.executable, "-m", "hpcbridge", "wait", death, "--poll-interval", "0.5"],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert waited.returncode == 0, waited.stderr
    # what went in was found by its key, nothing sent again for it
    assert re.search(
        r"\d+ task\(s\) a dead feeder was sending found in \d+, 0 sent again", waited.stderr
    ), waited.stderr
    ends = [line.split() for line in waited.stdout.splitlines()]
    assert [state for _, state in ends] == ["COMPLETED"] * count, waited.stdout
    assert sorted(int(index) for index in ran.read_text().split()) == list(range(count))
    assert packs_in_queue(cluster) == ""
    # `jobs` shows the pack as one line of counts, not its 40 Flux jobs one by one
    listed = subprocess.run(
        [sys.executable, "-m", "hpcbridge", "jobs", "--json", "--cached"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    entries = json.loads(listed.stdout)
    assert [entry.get("pack") for entry in entries if "pack" in entry] == [death], entries
    assert entries[[e.get("pack") for e in entries].index(death)]["counts"] == {"COMPLETED": 40}
    assert not [entry for entry in entries if entry.get("scheduler") == "flux"], entries


def env_store(env: Dict[str, str]) -> Path:
    """The job store of the command run in ``env``."""
    return Path(env["HPCBRIDGE_STATE_DIR"]) / "jobs.db"


def test_cancel_name_stops_a_pack_fed_elsewhere_and_releases_its_allocation(
    cluster: Dict[str, str], tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    task = write_script(tmp_path / "scripts", "task.sh", f'echo "$1" >> {ran}\nsleep 30\n')
    argv, env = local_command(cluster, tmp_path, task, 20)
    argv += ["--pack", "time=10", "--sweep", "to-cancel"]
    client = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while not ran.exists():
        assert client.poll() is None, client.communicate()
        assert time.monotonic() < deadline, "no task ran"
        time.sleep(0.2)
    cancelled = subprocess.run(
        [sys.executable, "-m", "hpcbridge", "cancel", "to-cancel"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cancelled.returncode == 0, cancelled.stderr
    counted = re.search(
        r"pack to-cancel cancelled: 1 allocation\(s\) released; (\d+) task\(s\) in them "
        r"cancelled, (\d+) not sent \(and now never will be\), 0 had already ended",
        cancelled.stdout,
    )
    assert counted, cancelled.stdout
    running, unsent = int(counted[1]), int(counted[2])
    assert running > 0 and running + unsent == 20, cancelled.stdout
    out, err = client.communicate(timeout=120)
    assert client.returncode == 1, err  # its tasks did not complete
    ends = [line.rsplit(" ", 1) for line in out.decode().splitlines()]
    assert [state for _, state in ends] == ["CANCELLED"] * 20, out.decode()
    # the tasks it had sent by their ids, the others said to be never sent (issue 46.5)
    assert sum(shown == "(never sent)" for shown, _ in ends) == unsent, out.decode()
    assert "was cancelled by" in err.decode()
    assert packs_in_queue(cluster) == ""


def cli(env: Dict[str, str], *args: str, timeout: float = 120) -> Any:
    """The command in ``env``, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "hpcbridge", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_an_interrupted_pack_settles_and_is_told_truly_without_flux(
    cluster: Dict[str, str], tmp_path: Path
) -> None:
    """Ctrl-C of a named pack while tasks run (issue 46, 3-5): its allocation is released
    and the tasks that were in it are recorded at once - CANCELLED, their instance gone,
    or as their wrapper saw them end; status, wait, cancel, logs and jobs tell so with no
    flux command at hand; ``status NAME`` and ``jobs NAME`` say the pack is interrupted
    and which tasks are not sent; ``wait NAME`` finishes it, and its allocation is then
    shown COMPLETED, released (not the CANCELLED Slurm says)."""
    ran, gate = tmp_path / "ran", tmp_path / "gate"
    task = write_script(
        tmp_path / "scripts",
        "task.sh",
        f'echo "task $1"\necho "$1" >> {ran}\n[ "$1" -lt 2 ] && exit 0\n'
        f"while [ ! -e {gate} ]; do sleep 0.2; done\n",
    )
    count = 12
    argv, env = local_command(cluster, tmp_path, task, count)
    # flux.util sets SIGINT to SIG_DFL while the bindings block: the CLI driver's client
    # always gets the Ctrl-C as KeyboardInterrupt
    env["HPCBRIDGE_FLUX_DRIVER"] = "cli"
    client = subprocess.Popen(
        [*argv, "--pack", "time=10", "--sweep", "settle"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=stoppable,  # its SIGINT at the default, whatever the suite's was
    )
    deadline = time.monotonic() + 240
    while not ran.exists() or len(ran.read_text().split()) < 3 or recorded(tmp_path) < 3:
        # 0 and 1 ended, and one held is running, its job recorded
        assert client.poll() is None, client.communicate()
        assert time.monotonic() < deadline, "no task ran"
        time.sleep(0.2)
    client.send_signal(signal.SIGINT)
    _, err = client.communicate(timeout=120)
    assert client.returncode == 130, err.decode()
    assert held_in_queue(cluster, tmp_path, "settle") == ""

    flux_jobs = [
        r for r in JobStore(tmp_path / "state" / "jobs.db").list() if r.scheduler == "flux"
    ]
    states = sorted(record.state for record in flux_jobs)
    assert states.count("COMPLETED") == 2 and "CANCELLED" in states, states
    assert set(states) == {"COMPLETED", "CANCELLED"}, states  # nothing left unsettled
    lost = next(record for record in flux_jobs if record.state == "CANCELLED")
    done = next(record for record in flux_jobs if record.state == "COMPLETED")

    no_flux = {**env, "HPCBRIDGE_FLUX_COMMAND": str(tmp_path / "no-flux-here")}
    status = cli(no_flux, "status", lost.job_id, "--json")
    assert status.returncode == 0, status.stderr
    told = json.loads(status.stdout)
    assert told["state"] == "CANCELLED" and "was released before it ended" in told["reason"]
    waited = cli(no_flux, "wait", lost.job_id, "--timeout", "40")
    assert waited.returncode == 1 and "CANCELLED" in waited.stderr, waited.stderr
    cancelled = cli(no_flux, "cancel", lost.job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "already ended CANCELLED" in cancelled.stdout, cancelled.stdout
    logs = cli(no_flux, "logs", done.job_id)
    assert logs.returncode == 0 and logs.stdout.startswith("task "), logs.stderr

    listed = cli(no_flux, "jobs", "--json")
    assert listed.returncode == 0, listed.stderr
    entries = json.loads(listed.stdout)
    [pack] = [entry for entry in entries if entry.get("pack") == "settle"]
    assert pack["state"] == "interrupted" and pack["counts"] == {"COMPLETED": 2, "waiting": 10}
    assert not [entry for entry in entries if entry.get("stale")], entries
    [allocation] = [entry for entry in entries if entry.get("kind", "") is None]  # Slurm's
    assert allocation["state"] == "CANCELLED", allocation  # released mid-work: stopped
    said = cli(no_flux, "status", "settle")
    assert said.returncode == 0, said.stderr
    assert "interrupted: 2 COMPLETED, 10 waiting" in said.stdout, said.stdout
    assert "'hpcbridge wait settle' goes on with it" in said.stdout
    tasks = json.loads(cli(no_flux, "jobs", "settle", "--json").stdout)
    assert [entry["task"] for entry in tasks] == list(range(count))
    assert [entry["state"] for entry in tasks[:2]] == ["COMPLETED"] * 2 and tasks[0]["job_id"]
    assert {(entry["job_id"], entry["state"]) for entry in tasks[2:]} == {(None, "waiting")}

    gate.touch()
    resumed = cli(env, "wait", "settle", "--poll-interval", "0.5", timeout=400)
    assert resumed.returncode == 0, resumed.stderr
    assert [line.split()[1] for line in resumed.stdout.splitlines()] == ["COMPLETED"] * count
    assert held_in_queue(cluster, tmp_path, "settle") == ""
    entries = json.loads(cli(env, "jobs", "--json").stdout)
    allocations = [entry for entry in entries if entry.get("kind", "") is None]  # Slurm's
    assert allocations[-1]["state"] == "COMPLETED", allocations  # the last one: its work done
    assert allocations[-1]["native_state"] == "(released by its pack)"
    assert "COMPLETED (released)" in cli(env, "jobs").stdout
    said = cli(env, "status", "settle")
    assert re.match(r"settle: pack of 12 \(.+\), done: 12 COMPLETED$", said.stdout), said.stdout


def test_a_killed_packs_tasks_settle_once_their_allocation_ends(
    cluster: Dict[str, str], tmp_path: Path
) -> None:
    """SIGKILL of a named pack's client, then its allocation ends on its own (scancel, as
    its time limit would): a task it held is told CANCELLED at once, its instance gone -
    the allocation's end read from Slurm, no flux command at hand; jobs counts those
    tasks lost, and cancel NAME settles the pack (issue 46.3)."""
    ran = tmp_path / "ran"
    task = write_script(tmp_path / "scripts", "task.sh", f'echo "$1" >> {ran}\nsleep 300\n')
    argv, env = local_command(cluster, tmp_path, task, 6)
    client = subprocess.Popen(
        [*argv, "--pack", "time=10", "--sweep", "late"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 240
    while not ran.exists() or not sent_tasks(tmp_path, "late"):
        assert client.poll() is None, client.communicate()
        assert time.monotonic() < deadline, "no task ran"
        time.sleep(0.2)
    client.kill()
    client.communicate()
    book = PackBook(JobStore(tmp_path / "state" / "jobs.db"))
    in_flight = [t for t in book.tasks("late") if t.state in ("sent", "sending")]
    [allocation] = book.allocations("late")
    assert run_slurm(["scancel", allocation.job_id], cluster).returncode == 0
    assert held_in_queue(cluster, tmp_path, "late") == ""
    sent = [str(t.job_id) for t in book.tasks("late") if t.state == "sent" and t.job_id]
    assert sent, book.tasks("late")

    no_flux = {**env, "HPCBRIDGE_FLUX_COMMAND": str(tmp_path / "no-flux-here")}
    status = cli(no_flux, "status", sent[0], "--json")
    assert status.returncode == 0, status.stderr
    told = json.loads(status.stdout)
    assert (told["state"], told["native_state"]) == ("CANCELLED", "(instance gone)"), told
    assert f"its allocation {allocation.job_id} ended (CANCELLED)" in told["reason"], told
    listed = cli(no_flux, "jobs", "--json")
    [pack] = [entry for entry in json.loads(listed.stdout) if entry.get("pack") == "late"]
    assert pack["state"] == "interrupted" and pack["counts"]["lost"] == len(sent), pack
    cancelled = cli(no_flux, "cancel", "late")
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"{len(in_flight)} task(s) in them cancelled" in cancelled.stdout, cancelled.stdout
    said = cli(no_flux, "status", "late")
    assert re.match(r"late: pack of 6 \(.+\), cancelled: 6 CANCELLED$", said.stdout), said.stdout


def sent_tasks(tmp_path: Path, name: str) -> int:
    """How many of pack ``name``'s tasks are in an allocation, from the case's store."""
    path = tmp_path / "state" / "jobs.db"
    try:
        tasks = PackBook(JobStore(path)).tasks(name) if path.exists() else []
    except Exception:  # noqa: BLE001 - the client is still making the store
        return 0
    return sum(task.state == "sent" for task in tasks)


def recorded(tmp_path: Path) -> int:
    """How many packed tasks (plain Flux jobs) the case's job store holds."""
    path = tmp_path / "state" / "jobs.db"
    if not path.exists():
        return 0
    return sum(record.kind == "plain" for record in JobStore(path).list())


def held_in_queue(env: Dict[str, str], tmp_path: Path, name: str, settle: float = 60.0) -> str:
    """``packs_in_queue`` of pack ``name``'s own allocations (other packs may share the
    cluster)."""
    ids = [a.job_id for a in PackBook(JobStore(tmp_path / "state" / "jobs.db")).allocations(name)]
    deadline = time.monotonic() + settle
    while True:
        listed = run_slurm(["squeue", "-h", "-j", ",".join(ids), "-o", "%i %T"], env)
        left = listed.stdout.strip() if listed.returncode == 0 else listed.stderr.strip()
        if "Invalid job id" in left:  # all of them purged already
            left = ""
        if not left or time.monotonic() > deadline:
            return str(left)
        time.sleep(1.0)
