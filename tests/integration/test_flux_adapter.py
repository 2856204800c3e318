"""The behaviour cases (as for Slurm) against a real Flux, through the native
driver and the CLI driver, for batch jobs (nested instances) and plain jobs:
COMPLETED with times, FAILED exit 3, CANCELLED, TIMEOUT, dependencies,
unknown ids, logs, artifact fetch, bulk submission; a plain job of two tasks
(the highest exit code wins, one output file); ``$HPCBRIDGE_LAUNCHER``."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import pytest

from hpcbridge.errors import JobNotFoundError, JobSubmissionError
from hpcbridge.model import FROM_FILE, JobState
from hpcbridge.schedulers.flux.ids import decimal_job_id
from tests.support.flux_cases import (
    flux_params,
    make_adapter,
    native_bindings_or_skip,
    require_flux,
    start_instance,
    wait_state,
    write_script,
)

pytestmark = pytest.mark.flux


@pytest.fixture(scope="module", params=flux_params())
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """One broker per flux-core release found (each picks its adapter version)."""
    flux = request.param or require_flux()
    instance = start_instance(tmp_path_factory.mktemp("flux-anon"), flux=flux)
    yield instance
    instance.stop()


@pytest.fixture(
    scope="module",
    params=[("native", "batch"), ("native", "plain"), ("cli", "batch"), ("cli", "plain")],
    ids=lambda param: "-".join(param),
)
def scenario(
    request: pytest.FixtureRequest, broker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SimpleNamespace]:
    """Every case submitted at once (they run side by side), then waited for."""
    driver, kind = request.param
    if driver == "native":
        native_bindings_or_skip(broker.flux)
    tmp = tmp_path_factory.mktemp(f"flux-{driver}-{kind}")
    adapter = make_adapter(
        driver,
        broker.uri,
        tmp / "state",
        remote_workdir=str(tmp / "jobs"),
        flux_command=broker.flux,
        nested=kind == "batch",
    )
    scripts = tmp / "scripts"
    hello = write_script(scripts, "hello.sh", 'echo "hello from $1"\n')
    fail = write_script(scripts, "fail.sh", "echo failing >&2\nexit 3\n")
    sleeper = write_script(scripts, "sleeper.sh", "sleep ${1:-60}\n")
    train = write_script(scripts, "train.sh", "printf 'weights %s' \"$1\" > model.pkl\n")
    ranks = write_script(
        scripts, "ranks.sh", 'echo "rank ${FLUX_TASK_RANK} says hi"\nexit "${RANK1_EXIT:-0}"\n'
    )
    rank1_fails = write_script(
        scripts, "rank1_fails.sh", '[ "$FLUX_TASK_RANK" = 1 ] && exit 5\nexit 0\n'
    )
    launcher = write_script(scripts, "launch.sh", "$HPCBRIDGE_LAUNCHER -n 2 hostname\n")
    # The parent runs until the gate file appears: however slow the submissions after it
    # are on a loaded machine, it is still running when its child is looked at.
    gated = write_script(scripts, "gated.sh", 'while [ ! -e "$1" ]; do sleep 0.1; done\n')
    gate = tmp / "gate"
    assert adapter.open().driver.name == driver

    ids = SimpleNamespace()
    ids.parent = adapter.submit_job(gated, {"time": "5m"}, arguments=[str(gate)])
    # 0.26 has no job dependencies (the adapter refuses depends_on there, see test_flux_commands)
    ids.child = (
        adapter.submit_job(hello, {"time": "60s"}, depends_on=ids.parent, arguments=["child"])
        if adapter.open().facts.policy.dependencies
        else None
    )
    wait_state(adapter, ids.parent, [JobState.RUNNING])
    child_while_parent_runs = adapter.get_job_status(ids.child) if ids.child else None
    ids.ok = adapter.submit_job(hello, {"time": "60s", "job_name": "ok"}, arguments=["ok"])
    ids.fail = adapter.submit_job(fail, {"time": "60s"})
    ids.cancel = adapter.submit_job(sleeper, {"time": "5m"})
    ids.timeout = adapter.submit_job(sleeper, {"time": "2s"})
    fails_later = write_script(scripts, "fails_later.sh", "sleep 2\nexit 1\n")
    ids.doomed_parent = adapter.submit_job(fails_later, {"time": "60s"})
    ids.doomed_child = (
        adapter.submit_job(hello, {"time": "60s"}, depends_on=ids.doomed_parent)
        if adapter.open().facts.policy.dependencies
        else None
    )
    ids.bulk = adapter.submit_many(
        [(hello, [f"task{index}"]) for index in range(3)] + [(fail, [])], {"time": "60s"}
    )
    ids.train = adapter.submit_job(
        train, {"time": "60s"}, remote_dir=str(tmp / "jobs" / "train-run"), arguments=["42"]
    )
    two = {"time": "60s", "ntasks": 2}
    ids.two_ok = adapter.submit_job(ranks, two, nested=False) if kind == "plain" else None
    ids.two_fail = adapter.submit_job(rank1_fails, two, nested=False) if kind == "plain" else None
    # distinct scripts travel in the wrapper's table; both tasks of each job write theirs
    ids.two_many = (
        adapter.submit_many([ranks, rank1_fails], two, nested=False) if kind == "plain" else []
    )
    ids.launch = adapter.submit_job(launcher, two) if kind == "batch" else None

    wait_state(adapter, ids.cancel, [JobState.RUNNING])
    adapter.cancel_job(ids.cancel)
    gate.touch()
    # A long poll interval: only events (native) make this return quickly.
    waiting_since = time.time()
    parent_end = adapter.wait(ids.parent, poll_interval=30.0).end_time
    assert parent_end is not None
    # From its end, or from the wait's start when it had ended before.
    parent_seen_after = time.time() - max(parent_end.timestamp(), waiting_since)
    every = [ids.ok, ids.fail, ids.cancel, ids.timeout, ids.parent, ids.train, *ids.bulk]
    every += [
        job_id
        for job_id in (ids.child, ids.two_ok, ids.two_fail, ids.launch, ids.doomed_child)
        if job_id
    ]
    every += ids.two_many
    every.append(ids.doomed_parent)
    final = adapter.wait_all(every, poll_interval=1.0, timeout=120)
    yield SimpleNamespace(
        adapter=adapter,
        driver=driver,
        kind=kind,
        ids=ids,
        final=final,
        parent_seen_after=parent_seen_after,
        child_while_parent_runs=child_while_parent_runs,
        scripts=SimpleNamespace(hello=hello, fail=fail, sleeper=sleeper),
        tmp=tmp,
        broker=broker,
    )
    adapter.close()


def test_completed_with_times(scenario: SimpleNamespace) -> None:
    status = scenario.final[scenario.ids.ok]
    assert status.state is JobState.COMPLETED and status.exit_code == 0
    assert status.start_time is not None and status.end_time is not None
    assert status.end_time >= status.start_time
    # Its end is seen first from Flux or from the exit-code file.
    assert status.native_state in ("COMPLETED", FROM_FILE)


def test_failed_exit_3(scenario: SimpleNamespace) -> None:
    status = scenario.final[scenario.ids.fail]
    assert status.state is JobState.FAILED and status.exit_code == 3
    assert "failing" in scenario.adapter.get_job_logs(scenario.ids.fail)


def test_cancelled(scenario: SimpleNamespace) -> None:
    status = scenario.final[scenario.ids.cancel]
    assert status.state is JobState.CANCELLED
    assert status.start_time is not None and status.end_time is not None


def test_timeout(scenario: SimpleNamespace) -> None:
    status = scenario.final[scenario.ids.timeout]
    assert status.state is JobState.TIMEOUT
    # A plain job killed at its limit returns 142; a batch job's broker, 129.
    assert status.exit_code not in (None, 0)
    assert "timeout" in status.reason


def test_dependency_waits_for_parent(scenario: SimpleNamespace) -> None:
    if scenario.ids.child is None:
        pytest.skip(f"Flux adapter {scenario.adapter.open().facts.policy.name} has no dependencies")
    assert scenario.child_while_parent_runs.state is JobState.PENDING
    parent = scenario.final[scenario.ids.parent]
    child = scenario.final[scenario.ids.child]
    assert parent.state is JobState.COMPLETED and child.state is JobState.COMPLETED
    assert child.start_time is not None and parent.end_time is not None
    assert child.start_time >= parent.end_time


def test_a_parent_that_fails_later_cancels_its_child(scenario: SimpleNamespace) -> None:
    # Flux itself says FAILED (exit 1) for such a child; Slurm and the mock cancel it.
    if scenario.ids.doomed_child is None:
        pytest.skip(f"Flux adapter {scenario.adapter.open().facts.policy.name} has no dependencies")
    parent = scenario.final[scenario.ids.doomed_parent]
    child = scenario.final[scenario.ids.doomed_child]
    assert parent.state is JobState.FAILED and parent.exit_code == 1
    assert child.state is JobState.CANCELLED and child.exit_code is None, child
    assert scenario.ids.doomed_parent in child.reason


def _jobs_and_folders(scenario: SimpleNamespace) -> Any:
    """Every job the broker has, and every job folder: what a submission leaves."""
    listed = scenario.broker.check(["jobs", "-a", "-n", "-o", "{id}"]).split()
    return sorted(listed), sorted(path.name for path in (scenario.tmp / "jobs").iterdir())


def test_a_never_existing_parent_is_refused_before_anything_is_staged(
    scenario: SimpleNamespace,
) -> None:
    adapter, hello = scenario.adapter, scenario.scripts.hello
    before = _jobs_and_folders(scenario)
    with pytest.raises(JobSubmissionError, match="cannot be found"):
        adapter.submit_job(hello, {"time": "60s"}, depends_on="ƒ2TNt8FH")
    with pytest.raises(JobSubmissionError, match="cannot be found"):
        adapter.submit_many([hello, hello], {"time": "60s"}, depends_on=[123456789])
    assert _jobs_and_folders(scenario) == before


def test_a_parent_that_already_failed_is_refused_a_completed_one_satisfied(
    scenario: SimpleNamespace,
) -> None:
    if scenario.ids.child is None:
        pytest.skip(f"Flux adapter {scenario.adapter.open().facts.policy.name} has no dependencies")
    adapter, ids, hello = scenario.adapter, scenario.ids, scenario.scripts.hello
    before = _jobs_and_folders(scenario)
    with pytest.raises(JobSubmissionError, match=f"parent job {ids.fail} already ended FAILED"):
        adapter.submit_job(hello, {"time": "60s"}, depends_on=[ids.ok, ids.fail])
    assert _jobs_and_folders(scenario) == before
    child = adapter.submit_job(hello, {"time": "60s"}, depends_on=[ids.ok], arguments=["late"])
    assert adapter.wait(child, poll_interval=0.2, timeout=60).state is JobState.COMPLETED


def test_logs(scenario: SimpleNamespace) -> None:
    adapter = scenario.adapter
    assert "hello from ok" in adapter.get_job_logs(scenario.ids.ok)
    if scenario.ids.child:
        assert "hello from child" in adapter.get_job_logs(scenario.ids.child)
    path = adapter.wait_until_complete(scenario.ids.ok, poll_interval=0.5)
    assert Path(path).name == f"flux-{scenario.ids.ok}.out"


def test_any_id_spelling_finds_the_job(scenario: SimpleNamespace) -> None:
    from hpcbridge.schedulers.flux.ids import decimal_job_id

    job_id = scenario.ids.fail
    for spelling in (job_id.replace("ƒ", "f"), decimal_job_id(job_id)):
        assert scenario.adapter.get_job_status(spelling).exit_code == 3


def test_unknown_id_is_not_found(scenario: SimpleNamespace) -> None:
    started = time.monotonic()
    with pytest.raises(JobNotFoundError, match="could not be observed 3 times"):
        scenario.adapter.wait("ƒ2TNt8FH", poll_interval=0.2)
    assert time.monotonic() - started < 30


def test_bulk_submission(scenario: SimpleNamespace) -> None:
    adapter, ids = scenario.adapter, scenario.ids.bulk
    assert len(set(ids)) == 4
    final = scenario.final
    assert [final[job_id].state for job_id in ids] == [JobState.COMPLETED] * 3 + [JobState.FAILED]
    assert final[ids[3]].exit_code == 3
    for index in range(3):
        assert f"hello from task{index}" in adapter.get_job_logs(ids[index])


def test_every_job_carries_its_key_in_its_jobspec(scenario: SimpleNamespace) -> None:
    """What a lost answer is found by (``adopting``): the wrapper's token, ``.<task
    index>`` for each job of a bulk submission, read back as the instance keeps it."""
    adapter, broker, ids = scenario.adapter, scenario.broker, scenario.ids

    def key(job_id: str) -> Any:
        spec = json.loads(broker.check(["job", "info", job_id, "jobspec"]))
        return spec["attributes"].get("user", {}).get("hpcbridge_key")

    def own_key(job_id: str) -> str:
        """From the record: ``<token>.exit`` alone, ``<token>.exit.<index>`` in a batch."""
        record = adapter.store.get(job_id, "flux", adapter.host_label)
        assert record is not None and record.exit_file
        token, _, index = Path(record.exit_file).name.partition(".exit")
        return token + index

    every = [ids.ok, ids.fail, *ids.bulk]
    assert [key(job_id) for job_id in every] == [own_key(job_id) for job_id in every]
    # hello x3 and fail: one batch of four, whatever scripts they run, each job its key
    assert [own_key(job_id).count(".") for job_id in ids.bulk] == [1, 1, 1, 1]
    assert len({own_key(job_id).split(".")[0] for job_id in ids.bulk}) == 1


def test_each_job_of_a_bulk_submission_carries_its_own_scripts_name(
    scenario: SimpleNamespace,
) -> None:
    """Every Flux job is a submission of its own: its name is its script's, as Flux
    keeps it and as the record does."""
    adapter, broker, ids = scenario.adapter, scenario.broker, scenario.ids.bulk
    listed = broker.check(["jobs", "-a", "-n", "-o", "{id} {name}"])
    names = {
        decimal_job_id(words[0]): words[1]
        for words in (line.split(" ", 1) for line in listed.splitlines())
        if len(words) == 2
    }
    wanted = ["hello.sh", "hello.sh", "hello.sh", "fail.sh"]
    assert [names.get(decimal_job_id(job_id)) for job_id in ids] == wanted
    records = adapter.store.get_many("flux", adapter.host_label, ids)
    assert [records[job_id].job_name for job_id in ids] == wanted


def test_native_wait_is_event_driven(scenario: SimpleNamespace) -> None:
    """With events a finished job is seen at once, not at the next (30 s) poll."""
    if scenario.driver != "native":
        pytest.skip("event-driven waiting is the native driver's")
    # Seen within moments of its end (polling backs off towards 30 s).
    assert scenario.parent_seen_after < 2.0


def test_doctor_info(scenario: SimpleNamespace) -> None:
    info = scenario.adapter.doctor_info()
    assert info["driver"] == scenario.driver
    assert info["adapter_version"] in ("0.26", "0.49", "0.88") and info["broker_version"]
    assert info["queues"] == {"names": [], "default": None, "source": info["queues"]["source"]}
    assert info["time_left"] is None
    if scenario.driver == "native":
        assert info["bindings_version"] == info["broker_version"]
        assert info["warnings"] == []


def test_the_job_kind_is_recorded(scenario: SimpleNamespace) -> None:
    adapter = scenario.adapter
    record = adapter.store.get(scenario.ids.ok, "flux", adapter.host_label)
    assert record is not None and record.kind == scenario.kind
    bulk = adapter.store.get(scenario.ids.bulk[0], "flux", adapter.host_label)
    assert bulk is not None and bulk.kind == scenario.kind


def test_artifact_fetch(scenario: SimpleNamespace) -> None:
    adapter, job_id = scenario.adapter, scenario.ids.train
    assert scenario.final[job_id].state is JobState.COMPLETED
    record = adapter.store.get(job_id, "flux", adapter.host_label)
    assert record is not None and record.remote_dir
    local = scenario.tmp / "fetched.pkl"
    adapter.executor.get(f"{record.remote_dir}/model.pkl", str(local))
    assert local.read_text() == "weights 42"


def test_plain_job_of_two_tasks(scenario: SimpleNamespace) -> None:
    """Every task runs the script; the highest task exit code is the job's."""
    if scenario.kind != "plain":
        pytest.skip("tasks of their own are a plain job's")
    adapter, ids = scenario.adapter, scenario.ids
    ok = scenario.final[ids.two_ok]
    assert ok.state is JobState.COMPLETED and ok.exit_code == 0
    logs = adapter.get_job_logs(ids.two_ok)
    assert "rank 0 says hi" in logs and "rank 1 says hi" in logs
    failed = scenario.final[ids.two_fail]
    assert failed.state is JobState.FAILED and failed.exit_code == 5
    record = adapter.store.get(ids.two_fail, "flux", adapter.host_label)
    assert record is not None and record.exit_file
    # the exit-code file (the fallback when Flux forgets the job) agrees
    assert Path(record.exit_file).read_text().split()[0] == "5"
    # the same two scripts, each one task's alone: written by both of its job's tasks
    many_ok, many_fail = (scenario.final[job_id] for job_id in ids.two_many)
    assert many_ok.state is JobState.COMPLETED and many_fail.exit_code == 5
    logs = adapter.get_job_logs(ids.two_many[0])
    assert "rank 0 says hi" in logs and "rank 1 says hi" in logs
    folder = adapter.store.get(ids.two_many[0], "flux", adapter.host_label).remote_dir
    assert sorted(path.name for path in Path(folder).glob("*.sh")) == [
        "rank1_fails.sh",
        "ranks.sh",
    ]  # no temporary file left


def test_launcher_in_a_batch_job(scenario: SimpleNamespace) -> None:
    """``$HPCBRIDGE_LAUNCHER -n 2 hostname`` starts two tasks inside the batch job."""
    if scenario.kind != "batch":
        pytest.skip("a plain job's tasks are its parallel work: no launcher")
    status = scenario.final[scenario.ids.launch]
    logs = scenario.adapter.get_job_logs(scenario.ids.launch)
    assert status.state is JobState.COMPLETED, logs
    # (the test instance's made-up cores make flux-shell log affinity warnings too)
    assert [line for line in logs.splitlines() if line == socket.gethostname()] == [
        socket.gethostname()
    ] * 2, logs
