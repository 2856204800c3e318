"""What a user meets right after a cancel, and with an id that names no job (issue 32):

- ``cancel X; wait X``: the wait asks afresh - it never prints the RUNNING the poll
  published before the cancel, nor sleeps a poll interval (60 s here) first;
- ``wait X NEVER --json``: X is waited for, NEVER is an ``error`` entry, exit 4;
- a sweep cancelled while ``submit-many`` still sends it: the sender stops, prints the
  ids it sent, says who cancelled it and exits 1; the sweep is ``cancelled``; ``wait
  NAME`` reports its jobs (exit 1), no error repeated;
- Slurm: the tasks of an array cancelled before they started end CANCELLED (sacct has
  only the array's row for them), once squeue has forgotten them.

Each command is a new ``python -m hpcbridge`` process, against the mock, Debian's
Slurm 22.05 (locally and over SSH), Slurm 25.11 (pyslurm and CLI drivers) and
flux-core through its commands; a place whose component is absent skips, saying why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from hpcbridge.store.jobs import JobStore
from hpcbridge.store.sweeps import SweepBook
from tests.conftest import REPO
from tests.support.cli import hpcbridge
from tests.support.places import Place, flux_place, mock_place, slurm_place
from tests.support.slurm_clusters import (
    PREFIX_STATE,
    TARGETS,
    cluster_env,
    jobs_named,
    run_slurm,
    target_skip_reason,
)

#: every place: the mock, Slurm 22.05 (CLI, locally and over SSH), 25.11 (pyslurm, CLI), Flux
PLACES = (
    "mock",
    "slurm-local",
    "slurm-ssh",
    "slurm2511-native",
    "slurm2511-cli",
    "flux-cli",
)
_MARKS = {
    "mock": [],
    "slurm-local": [pytest.mark.slurm],
    "slurm-ssh": [pytest.mark.slurm, pytest.mark.ssh],
    "slurm2511-native": [pytest.mark.slurm],
    "slurm2511-cli": [pytest.mark.slurm],
    "flux-cli": [pytest.mark.flux],
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.support.flux_cases import require_flux, start_instance

    instance = start_instance(tmp_path_factory.mktemp("flux-cancel"), flux=require_flux())
    yield instance
    instance.stop()


def slurm2511_place(driver: str, tmp: Path) -> Iterator[Place]:
    """The Slurm 25.11 built under /opt (its own commands first on PATH)."""
    target = TARGETS[f"25.11-{driver}"]
    cluster = cluster_env(PREFIX_STATE)
    reason = target_skip_reason(target, cluster)
    if reason:
        pytest.skip(reason)
    assert cluster is not None
    workdir = tmp / "jobs"
    env = {
        **cluster,
        "HPCBRIDGE_SCHEDULER": "slurm",
        "HPCBRIDGE_SLURM_DRIVER": driver,
        "HPCBRIDGE_REMOTE_WORKDIR": str(workdir),
    }
    with pytest.MonkeyPatch.context() as patch:
        for name, value in cluster.items():
            patch.setenv(name, value)  # sbatch/scancel here reach this cluster
        yield Place(f"slurm2511-{driver}", "slurm", env, jobs_named, lambda: [])


def make_place(
    label: str, request: pytest.FixtureRequest, tmp: Path, state: Path
) -> Iterator[Place]:
    if label == "mock":
        yield mock_place(state)
    elif label.startswith("slurm2511-"):
        yield from slurm2511_place(label.split("-", 1)[1], tmp)
    elif label.startswith("slurm-"):
        yield from slurm_place(label.split("-", 1)[1], request, tmp)
    else:
        yield flux_place(label.split("-", 1)[1], request.getfixturevalue("broker"), tmp)


@pytest.fixture(params=[pytest.param(label, marks=_MARKS[label]) for label in PLACES])
def place(request: pytest.FixtureRequest, state_dir: Path, tmp_path: Path) -> Iterator[Place]:
    yield from make_place(request.param, request, tmp_path, state_dir)


def run(place: Place, *args: str, timeout: float = 300, **env: str) -> Any:
    return hpcbridge(*args, env={**place.env, "PYTHONPATH": str(REPO), **env}, timeout=timeout)


def script(place: Place, tmp_path: Path, body: str) -> str:
    """A script of this body (staged to where the place's jobs run)."""
    path = tmp_path / f"s{uuid.uuid4().hex[:8]}.sh"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def status_of(place: Place, job_id: str) -> str:
    result = run(place, "status", job_id, "--json")
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["state"])


def until(what: str, check: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.5)


def status_lines(stderr: str, job_id: str) -> List[str]:
    """The wait's state lines of ``job_id`` ("08:02:34  69  CANCELLED  exit=143")."""
    return [line for line in stderr.splitlines() if f"  {job_id}  " in f"{line}  "]


# -- cancel X; wait X ------------------------------------------------------------------


def test_a_wait_right_after_a_cancel_asks_afresh(place: Place, tmp_path: Path) -> None:
    if place.label == "mock":
        pytest.skip("the mock answers from its own files: no poll to be stale")
    long = script(place, tmp_path, "sleep 300")
    submitted = run(place, "submit", long)
    job_id = submitted.stdout.strip()
    assert job_id, submitted.stderr
    # A busy shared cluster may keep it queued a while (other tests' jobs).
    until("RUNNING", lambda: status_of(place, job_id) == "RUNNING", timeout=600)
    cancelled = run(place, "cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    # 60 s between two rounds: a wait served the answer published before the cancel
    # would print RUNNING first (see below). A fresh first answer may still be Slurm's
    # COMPLETING (Flux's CLEANUP) on a loaded machine - a job being ended, which counts as
    # running until the next round, 60 s later: the budget leaves room for that round.
    waited = run(place, "wait", job_id, "--timeout", "90", HPCBRIDGE_POLL_INTERVAL="60")
    lines = status_lines(waited.stderr, job_id)
    assert waited.returncode == 1, waited.stderr
    assert lines and "CANCELLED" in lines[-1], waited.stderr
    for line in lines[:-1]:  # only the scheduler's own word for a job being ended
        assert "native=COMPLETING" in line or "native=CLEANUP" in line, waited.stderr


# -- wait A NEVER ---------------------------------------------------------------------


def test_wait_with_an_id_that_names_no_job_waits_for_the_others(
    place: Place, tmp_path: Path
) -> None:
    short = script(place, tmp_path, "sleep 5")
    submitted = run(place, "submit", short)
    job_id = submitted.stdout.strip()
    assert job_id, submitted.stderr
    waited = run(place, "wait", job_id, place.never, "--json", "--timeout", "240")
    assert waited.returncode == 4, waited.stderr
    first, second = json.loads(waited.stdout)
    assert first["job_id"] == job_id and first["state"] == "COMPLETED", first  # waited for
    assert "no job" in second["error"] and place.never in second["error"], second
    errors = [line for line in waited.stderr.splitlines() if line.startswith("hpcbridge: error")]
    assert len(errors) == 1 and place.never in errors[0], waited.stderr


# -- a sweep cancelled while it is sent -------------------------------------------------


def sent_ids(state: Path, name: str) -> List[str]:
    path = state / "jobs.db"
    if not path.exists():
        return []
    try:
        return SweepBook(JobStore(path)).job_ids(name)
    except Exception:  # noqa: BLE001 - the sender is still creating the store
        return []


def test_a_sweep_cancelled_while_sent_stops_the_sender_and_is_reported(
    place: Place, tmp_path: Path, state_dir: Path
) -> None:
    long = script(place, tmp_path, "sleep 300")
    args = tmp_path / "four"
    args.write_text("a\nb\nc\nd\n")
    name = f"cx{uuid.uuid4().hex[:6]}"
    env = {**os.environ, **place.env, "PYTHONPATH": str(REPO), "HPCBRIDGE_POLL_INTERVAL": "1"}
    argv = ["submit-many", long, "--args-file", str(args), "--max-queued", "1", "--sweep", name]
    sender = subprocess.Popen(
        [sys.executable, "-m", "hpcbridge", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until("one job sent", lambda: len(sent_ids(state_dir, name)) == 1)
        cancelled = run(place, "cancel", name)
        assert cancelled.returncode == 0, cancelled.stderr
        out, err = sender.communicate(timeout=180)
    finally:
        if sender.poll() is None:
            sender.kill()
    [first] = sent_ids(state_dir, name)
    assert sender.returncode == 1, err
    assert out.split() == [first], out  # the id it did send, on stdout
    assert f"was cancelled by 'hpcbridge cancel {name}'" in err, err
    assert "3 task(s) never sent" in err and "never submitted" not in err, err
    listed = json.loads(run(place, "jobs", "--json").stdout)
    [sweep] = [entry for entry in listed if entry.get("sweep") == name]
    assert sweep["state"] == "cancelled", sweep
    waited = run(place, "wait", name, "--json", "--timeout", "120")
    assert waited.returncode == 1, waited.stderr
    assert [(item["job_id"], item["state"]) for item in json.loads(waited.stdout)] == [
        (first, "CANCELLED")
    ]
    assert "error" not in waited.stderr and waited.stderr.count("was cancelled") == 1, waited.stderr


def test_a_sweep_cancelled_once_sent_is_waited_for(place: Place, tmp_path: Path) -> None:
    long = script(place, tmp_path, "sleep 300")
    args = tmp_path / "two"
    args.write_text("a\nb\n")
    name = f"done{uuid.uuid4().hex[:6]}"
    made = run(place, "submit-many", long, "--args-file", str(args), "--sweep", name)
    assert made.returncode == 0, made.stderr
    ids = made.stdout.split()
    assert len(ids) == 2, made.stdout
    assert run(place, "cancel", name).returncode == 0
    waited = run(place, "wait", name, "--json", "--timeout", "120")
    assert waited.returncode == 1, waited.stderr
    states = [(item["job_id"], item["state"]) for item in json.loads(waited.stdout)]
    assert states == [(job_id, "CANCELLED") for job_id in ids], states
    assert "error" not in waited.stderr, waited.stderr


# -- Slurm: array tasks cancelled before they started ---------------------------------------


SLURM_PLACES = [label for label in PLACES if label.startswith("slurm") and label != "slurm-ssh"]


@pytest.fixture(params=[pytest.param(label, marks=_MARKS[label]) for label in SLURM_PLACES])
def slurm(request: pytest.FixtureRequest, state_dir: Path, tmp_path: Path) -> Iterator[Place]:
    yield from make_place(request.param, request, tmp_path, state_dir)


def squeue_forgot(env: Dict[str, str], job_ids: List[str]) -> bool:
    argv = ["squeue", "--noheader", "--array", "--states=all", f"--jobs={','.join(job_ids)}"]
    out = run_slurm([*argv, "--format=%i"], env)
    return not out.stdout.strip()


@pytest.mark.slow
def test_array_tasks_cancelled_while_pending_end_cancelled(slurm: Place, tmp_path: Path) -> None:
    env = {**os.environ, **slurm.env}
    held = run_slurm(["sbatch", "--parsable", "--hold", "-o", "/dev/null", "--wrap", "true"], env)
    assert held.returncode == 0, held.stderr
    parent = held.stdout.strip().split(";")[0]
    try:
        long = script(slurm, tmp_path, "sleep 300")
        args = tmp_path / "two"
        args.write_text("a\nb\n")
        name = f"ls{uuid.uuid4().hex[:6]}"
        made = run(
            slurm, "submit-many", long, "--args-file", str(args), "--sweep", name, "--after", parent
        )
        assert made.returncode == 0, made.stderr
        ids = made.stdout.split()
        assert len(ids) == 2 and all("_" in job_id for job_id in ids), ids  # one array
        assert status_of(slurm, ids[0]) == "PENDING"
        assert run(slurm, "cancel", name).returncode == 0
        # slurmctld forgets them MinJobAge (10 s) after, at its next purge (about a minute).
        until("purged from squeue", lambda: squeue_forgot(env, ids), timeout=240)
        shown = run(slurm, "status", *ids, "--json")
        assert shown.returncode == 0, shown.stderr
        assert [item["state"] for item in json.loads(shown.stdout)] == ["CANCELLED"] * 2, shown
        waited = run(slurm, "wait", *ids, "--json", "--timeout", "120")
        assert waited.returncode == 1, waited.stderr
        assert [item["state"] for item in json.loads(waited.stdout)] == ["CANCELLED"] * 2
        listed = {
            item["job_id"]: item for item in json.loads(run(slurm, "jobs", name, "--json").stdout)
        }
        assert {job_id: listed[job_id]["state"] for job_id in ids} == dict.fromkeys(
            ids, "CANCELLED"
        )
        assert not any(listed[job_id]["stale"] for job_id in ids), listed
    finally:
        run_slurm(["scancel", parent], env)
