"""The command gives the same answers on every scheduler and transport, in the corners too.

Each case runs ``python -m hpcbridge`` (a new process per command, as a user
would) against every place of ``tests.support.places``: the mock, Slurm 22.05
locally and over SSH, flux-core through its bindings and its commands.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.cli import hpcbridge
from tests.support.places import PLACES, Place, flux_place, mock_place, slurm_place

_MARKS = {
    "mock": [],
    "slurm-local": [pytest.mark.slurm],
    "slurm-ssh": [pytest.mark.slurm, pytest.mark.ssh],
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
