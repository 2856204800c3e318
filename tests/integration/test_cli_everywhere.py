"""The command gives the same answers on every scheduler and transport, in the corners too.

Each case runs ``python -m hpcbridge`` (a new process per command, as a user
would) against every place of ``tests.support.places``: the mock, Slurm 22.05
locally and over SSH, flux-core through its bindings and its commands.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.cli import JSON_KEYS, hpcbridge
from tests.support.places import PLACES, Place, flux_place, mock_place, slurm_place

_MARKS = {
    "mock": [],
    "slurm-local": [pytest.mark.slurm],
    "slurm-ssh": [pytest.mark.slurm, pytest.mark.ssh],
    "slurm-openssh": [pytest.mark.slurm, pytest.mark.ssh],
    "flux-native": [pytest.mark.flux],
    "flux-cli": [pytest.mark.flux],
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.support.flux_cases import require_flux, start_instance

    instance = start_instance(tmp_path_factory.mktemp("flux-everywhere"), flux=require_flux())
    yield instance
    instance.stop()


@pytest.fixture(params=[pytest.param(label, marks=_MARKS[label]) for label in PLACES])
def place(request: pytest.FixtureRequest, state_dir: Path, tmp_path: Path) -> Iterator[Place]:
    label = request.param
    if label == "mock":
        yield mock_place(state_dir)
    elif label.startswith("slurm-"):
        yield from slurm_place(label.split("-", 1)[1], request, tmp_path)
    else:
        yield flux_place(label.split("-", 1)[1], request.getfixturevalue("broker"), tmp_path)


def run(place: Place, *args: str, timeout: float = 180) -> Any:
    return hpcbridge(*args, env=place.env, timeout=timeout)


def one_line_error(result: Any) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpcbridge: error: "), result.stderr
    return lines[0]


def unique(what: str) -> str:
    return f"hpcb-{what}-{os.getpid()}-{time.monotonic_ns()}"


# -- dependencies ----------------------------------------------------------------------


def test_a_never_existing_parent_is_refused_with_exit_3_and_nothing_submitted(
    place: Place, make_script: Any
) -> None:
    script = make_script("echo should-not-run")
    name = unique("orphan")
    before = place.folders()
    for command in ("submit", "submit-many"):
        argv = [command, script, "--after", place.never, "--job-name", name, "--time", "2m"]
        result = run(place, *argv)
        assert result.returncode == 3, (command, result.stderr)
        assert result.stdout == ""
        line = one_line_error(result)
        assert "cannot be found" in line and "nothing was submitted" in line, line
    assert place.folders() == before
    assert place.named(name) == []


def test_a_failed_parent_is_refused_and_a_completed_one_satisfied(
    place: Place, make_script: Any
) -> None:
    failed = run(place, "submit", make_script("exit 3", "fail.sh"), "--time", "2m")
    done = run(place, "submit", make_script("true", "ok.sh"), "--time", "2m")
    failed_id, done_id = failed.stdout.strip(), done.stdout.strip()
    waited = run(place, "wait", failed_id, done_id, "--poll-interval", "0.5")
    assert waited.returncode == 1, waited.stderr
    name = unique("child")
    child = make_script("echo child ran", "child.sh")
    before = place.folders()
    refused = run(place, "submit", child, "--after", done_id, "--after", failed_id, "-J", name)
    assert refused.returncode == 3
    line = one_line_error(refused)
    assert f"parent job {failed_id} already ended FAILED (exit 3)" in line, line
    assert place.folders() == before and place.named(name) == []
    accepted = run(place, "submit", child, "--after", done_id, "-J", name, "--time", "2m")
    assert accepted.returncode == 0, accepted.stderr
    child_id = accepted.stdout.strip()
    assert run(place, "wait", child_id, "--poll-interval", "0.5").returncode == 0
    assert place.named(name) == [child_id]


# -- names ------------------------------------------------------------------------------


def test_submit_many_names_each_job_after_its_own_script(place: Place, make_script: Any) -> None:
    stem = unique("names")
    first = make_script("echo a", f"{stem}-a.sh")
    second = make_script("echo b", f"{stem}-b.sh")
    result = run(place, "submit-many", first, second, first, "--time", "2m", "--wait")
    assert result.returncode == 0, result.stderr
    ids = result.stdout.split()
    assert len(ids) == 3
    # what the scheduler itself calls each job
    if place.scheduler == "slurm":  # one array, one name: the first script's and 2 more
        assert len({job_id.split("_")[0] for job_id in ids}) == 1
        assert place.named(f"{stem}-a.sh+2") == sorted(ids)
        assert place.named(f"{stem}-a.sh") == place.named(f"{stem}-b.sh") == []
    else:  # each job is a submission of its own
        assert place.named(f"{stem}-a.sh") == sorted([ids[0], ids[2]])
        assert place.named(f"{stem}-b.sh") == [ids[1]]
    # what hpcbridge recorded
    listed = {job["job_id"]: job for job in json.loads(run(place, "jobs", "--json").stdout)}
    assert [listed[job_id]["job_name"] for job_id in ids] == [
        f"{stem}-a.sh",
        f"{stem}-b.sh",
        f"{stem}-a.sh",
    ]
    assert "echo b" not in run(place, "logs", ids[0]).stdout


def test_submit_many_dry_run_shows_each_submission_and_submits_nothing(
    place: Place, make_script: Any, tmp_path: Path
) -> None:
    stem = unique("dry")
    first, second = make_script("true", f"{stem}-a.sh"), make_script("true", f"{stem}-b.sh")
    args_file = tmp_path / "params.txt"
    args_file.write_text("one\ntwo\nthree\n")
    before = place.folders()
    many = run(place, "submit-many", first, "--args-file", str(args_file), "--dry-run")
    assert many.returncode == 0, many.stderr
    assert "3 jobs: HPCBRIDGE_TASK_INDEX=0..2" in many.stdout, many.stdout
    two = run(place, "submit-many", first, second, "--dry-run", "--time", "2m")
    assert two.returncode == 0, two.stderr
    assert f"{stem}-a.sh" in two.stdout and f"{stem}-b.sh" in two.stdout
    assert place.folders() == before
    assert place.named(f"{stem}-a.sh") == [] and place.named(f"{stem}-b.sh") == []


# -- one JSON shape per command, and a word where there is nothing to print ----------------


def test_json_is_an_object_for_one_id_and_a_list_for_several_even_when_one_fails(
    place: Place, make_script: Any
) -> None:
    submitted = run(place, "submit", make_script("echo hi"), "--time", "2m", "--wait", "--json")
    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)
    job_id = job["job_id"]
    assert job["state"] == "COMPLETED"
    assert f'"job_id": "{job_id}"' in submitted.stdout  # as the scheduler writes it (ƒ…)
    one = json.loads(run(place, "status", job_id, "--json").stdout)
    assert isinstance(one, dict) and one["job_id"] == job_id
    both = run(place, "status", job_id, place.never, "--json")
    assert both.returncode == 4
    listed = json.loads(both.stdout)
    assert [item["job_id"] == job_id for item in listed] == [True, False]
    assert listed[0]["state"] == "COMPLETED" and "error" not in listed[0]
    assert set(listed[1]) == {"job_id", "error"} and "no job" in listed[1]["error"]
    assert "no job" in one_line_error(both)
    waited = json.loads(run(place, "wait", job_id, job_id, "--json").stdout)
    assert isinstance(waited, list) and len(waited) == 2
    many = run(place, "submit-many", make_script("true"), "--time", "2m", "--wait", "--json")
    assert [item["state"] for item in json.loads(many.stdout)] == ["COMPLETED"]


def test_submit_json_without_wait_has_the_keys_of_status_json(
    place: Place, make_script: Any
) -> None:
    script = make_script("true")
    submitted = run(place, "submit", script, "--time", "2m", "--json")
    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)
    assert (job["state"], job["exit_code"], job["end_time"]) == ("PENDING", None, None)
    status = json.loads(run(place, "wait", job["job_id"], "--json").stdout)
    assert set(job) == set(status) >= set(JSON_KEYS)
    assert job["job_name"] == status["job_name"] == Path(script).name
    many = run(place, "submit-many", script, script, "--time", "2m", "--json")
    assert many.returncode == 0, many.stderr
    listed = json.loads(many.stdout)
    assert [set(item) for item in listed] == [set(job), set(job)]
    run(place, "wait", *(item["job_id"] for item in listed))


def test_logs_of_a_job_that_has_not_started_says_so(place: Place, make_script: Any) -> None:
    parent = run(place, "submit", make_script("sleep 20"), "--time", "2m").stdout.strip()
    child = run(place, "submit", make_script("echo late"), "--after", parent, "--time", "2m")
    child_id = child.stdout.strip()
    assert child.returncode == 0, child.stderr
    logs = run(place, "logs", child_id)
    assert logs.returncode == 0 and logs.stdout == ""
    assert f"job {child_id} is PENDING" in logs.stderr and "--follow" in logs.stderr
    assert run(place, "cancel", child_id).returncode == 0
    # cancelled before it ran: no exit code, no start, and not its pending reason
    ended = json.loads(run(place, "wait", child_id, "--json", "--poll-interval", "0.5").stdout)
    assert (ended["state"], ended["exit_code"], ended["start_time"]) == ("CANCELLED", None, None)
    assert ended["reason"].startswith("cancelled while pending"), ended
    run(place, "cancel", parent)


# -- which record an id means ----------------------------------------------------------


@pytest.fixture
def slurm_local(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    yield from slurm_place("local", request, tmp_path)


@pytest.fixture
def slurm_ssh(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    yield from slurm_place("ssh", request, tmp_path)


def slurm_state(job_id: str) -> str:
    """What Slurm's own history says of a job (asked here, not through hpcbridge)."""
    import subprocess

    found = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return found.stdout.strip()


def wait_for_slurm_end(job_id: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while slurm_state(job_id) in ("", "PENDING", "RUNNING", "COMPLETING"):
        assert time.monotonic() < deadline, slurm_state(job_id)
        time.sleep(0.5)
    return slurm_state(job_id)


@pytest.mark.slurm
def test_an_id_recorded_for_mock_and_slurm_is_an_error_naming_each(
    slurm_local: Place, state_dir: Path, make_script: Any
) -> None:
    slurm = run(slurm_local, "submit", make_script("exit 3", "fails.sh"), "--time", "2m")
    job_id = slurm.stdout.strip()
    assert wait_for_slurm_end(job_id) == "FAILED"
    mock = mock_place(state_dir)
    (state_dir / "mock").mkdir(exist_ok=True)
    (state_dir / "mock" / "counter").write_text(str(int(job_id) - 1))  # the same id, for mock
    same = run(mock, "submit", make_script("true", "ok.sh"), "--wait", "--poll-interval", "0.2")
    assert same.returncode == 0 and same.stdout.split()[0] == job_id, same.stderr
    bare = {"HPCBRIDGE_SLURM_DRIVER": "cli"}  # no scheduler chosen
    ambiguous = hpcbridge("status", job_id, env=bare)
    assert ambiguous.returncode == 2 and ambiguous.stdout == ""
    line = one_line_error(ambiguous)
    assert f"hpcbridge status {job_id} --scheduler mock" in line
    assert f"hpcbridge status {job_id} --scheduler slurm" in line
    by_variable = hpcbridge("status", job_id, env={**bare, "HPCBRIDGE_SCHEDULER": "slurm"})
    assert by_variable.returncode == 0, by_variable.stderr
    assert by_variable.stdout.split()[:3] == [job_id, "FAILED", "exit=3"]
    by_flag = hpcbridge("status", job_id, "--scheduler", "mock", env=bare)
    assert by_flag.stdout.split()[:3] == [job_id, "COMPLETED", "exit=0"]


@pytest.mark.slurm
def test_ids_of_a_mock_and_a_slurm_job_are_asked_together(
    slurm_local: Place, state_dir: Path, make_script: Any
) -> None:
    mock = mock_place(state_dir)
    mock_id = run(mock, "submit", make_script("true", "ok.sh")).stdout.strip()
    slurm_id = run(slurm_local, "submit", make_script("exit 3", "no.sh"), "-t", "2m").stdout.strip()
    bare = {"HPCBRIDGE_SLURM_DRIVER": "cli"}  # no scheduler chosen: each from its record
    waited = hpcbridge("wait", mock_id, slurm_id, "--json", "--poll-interval", "0.5", env=bare)
    assert waited.returncode == 1, waited.stderr  # one FAILED
    answers = json.loads(waited.stdout)
    assert [(a["job_id"], a["state"]) for a in answers] == [
        (mock_id, "COMPLETED"),
        (slurm_id, "FAILED"),
    ]
    status = hpcbridge("status", slurm_id, mock_id, env=bare)
    assert status.returncode == 0, status.stderr
    assert [line.split()[1] for line in status.stdout.splitlines()] == ["FAILED", "COMPLETED"]


@pytest.mark.slurm
@pytest.mark.ssh
def test_a_job_submitted_over_ssh_is_asked_there_whatever_the_settings(
    slurm_ssh: Place, state_dir: Path, make_script: Any
) -> None:
    script = make_script("echo over-ssh; sleep 2", "far.sh")
    job_id = run(slurm_ssh, "submit", script, "--time", "2m").stdout.strip()
    host = "{user}@{host}:{port}".format(
        user=slurm_ssh.env["HPCBRIDGE_SSH_USER"],
        host=slurm_ssh.env["HPCBRIDGE_SSH_HOST"],
        port=slurm_ssh.env["HPCBRIDGE_SSH_PORT"],
    )
    # a laptop's settings: Slurm, but no transport or host (the key and host keys are known)
    keep = ("HPCBRIDGE_SSH_KEY", "HPCBRIDGE_SSH_KNOWN_HOSTS", "HPCBRIDGE_COMMAND_ENV")
    laptop = {"HPCBRIDGE_SCHEDULER": "slurm", **{k: slurm_ssh.env[k] for k in keep}}
    assert wait_for_slurm_end(job_id) == "COMPLETED"
    status = hpcbridge("status", job_id, env=laptop)
    assert status.returncode == 0, status.stderr
    assert status.stdout.split()[:2] == [job_id, "COMPLETED"]
    # the scheduler chosen is the job's, no transport chosen: nothing to say (issue 46)
    assert "asked where it was submitted" not in status.stderr, status.stderr
    # a transport chosen that is not the job's: said, and the job asked where it is
    local = hpcbridge("status", job_id, env={**laptop, "HPCBRIDGE_TRANSPORT": "local"})
    assert local.stdout.split()[:2] == [job_id, "COMPLETED"], local.stderr
    assert (
        f"asked where it was submitted: slurm over ssh on {host}; "
        "these settings point at slurm over local"
    ) in local.stderr
    # status's answer is recorded on the job's own record
    cached = hpcbridge("jobs", "--cached", "--json", env=laptop)
    [record] = [job for job in json.loads(cached.stdout) if job["job_id"] == job_id]
    assert (record["state"], record["host"]) == ("COMPLETED", host)
    logs = hpcbridge("logs", job_id, env=laptop)
    assert logs.returncode == 0 and "over-ssh" in logs.stdout, logs.stderr
    cancel = hpcbridge("cancel", job_id, env=laptop)
    assert cancel.stdout.strip() == f"{job_id} already ended COMPLETED (exit 0): nothing to cancel"
