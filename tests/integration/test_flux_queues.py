"""Queue handling on a real Flux: an anonymous-queue broker and one with named
queues (debug, with a 1 minute limit, and batch, the default), both drivers."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterator

import pytest

from hpcbridge.errors import JobSubmissionError
from hpcbridge.model import JobState
from hpcbridge.schedulers.flux.adapter import FluxAdapter
from hpcbridge.schedulers.flux.ids import decimal_job_id
from hpcbridge.schedulers.flux.instance import parse_version
from tests.support.flux import flux_version
from tests.support.flux_cases import (
    NAMED_QUEUES,
    adapter_on,
    driver_or_skip,
    flux_params,
    many_cores_config,
    require_flux,
    start_instance,
    write_script,
)

pytestmark = pytest.mark.flux

DEBUG_LIMIT = '\n[queues.debug.policy.limits]\nduration = "1m"\n'


@pytest.fixture(scope="module", params=flux_params())
def flux(request: pytest.FixtureRequest) -> str:
    """Each flux-core release found (the queue cases run against each)."""
    return str(request.param or require_flux())


@pytest.fixture(scope="module")
def anonymous(flux: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    instance = start_instance(tmp_path_factory.mktemp("flux-anon-q"), flux=flux)
    yield instance
    instance.stop()


@pytest.fixture(scope="module")
def named(flux: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.support.flux import FluxInstance

    workdir = tmp_path_factory.mktemp("flux-named-q")
    config = many_cores_config(flux, workdir) + NAMED_QUEUES + DEBUG_LIMIT
    # Named queues start stopped; FluxInstance runs `flux queue start --all`.
    instance = FluxInstance(flux, config=config, workdir=str(workdir)).start()
    yield instance
    instance.stop()


@pytest.fixture(params=["native", "cli"])
def driver(request: pytest.FixtureRequest, flux: str) -> str:
    return driver_or_skip(request.param, flux)


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_script(tmp_path_factory.mktemp("scripts"), "q.sh", "echo queued ok\n")


def adapter_for(instance: Any, driver: str, tmp_path: Path, named: bool = False) -> FluxAdapter:
    adapter = adapter_on(instance, driver, tmp_path)
    if named and not adapter.open().facts.policy.queues:
        pytest.skip(f"Flux adapter {adapter.open().facts.policy.name} has no named queues")
    return adapter


def queue_of(instance: Any, job_id: str) -> str:
    return str(instance.check(["jobs", "-no", "{queue}", decimal_job_id(job_id)]).strip())


def test_anonymous_broker_omits_the_queue_and_says_so(
    anonymous: Any, driver: str, script: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = adapter_for(anonymous, driver, tmp_path)
    with caplog.at_level(logging.WARNING, logger="hpcbridge"):
        job_id = adapter.submit_job(script, {"qos": "debug", "time": "30s"})
    if adapter.open().facts.policy.queues:
        assert "only the anonymous queue: queue 'debug' omitted" in caplog.text
        assert queue_of(anonymous, job_id) == ""
    else:
        assert "has no queues: queue 'debug' dropped" in caplog.text
    assert adapter.wait(job_id, poll_interval=0.5, timeout=60).state is JobState.COMPLETED


def test_named_broker_runs_in_the_valid_queue(
    named: Any, driver: str, script: str, tmp_path: Path
) -> None:
    adapter = adapter_for(named, driver, tmp_path, named=True)
    job_id = adapter.submit_job(script, {"qos": "debug", "time": "30s"})
    assert queue_of(named, job_id) == "debug"
    assert adapter.wait(job_id, poll_interval=0.5, timeout=60).state is JobState.COMPLETED
    assert "queued ok" in adapter.get_job_logs(job_id)


def test_named_broker_default_queue_when_none_asked(
    named: Any, driver: str, script: str, tmp_path: Path
) -> None:
    adapter = adapter_for(named, driver, tmp_path, named=True)
    job_id = adapter.submit_job(script, {"time": "30s"})
    assert queue_of(named, job_id) == "batch"
    adapter.cancel_job(job_id)


def test_named_broker_unknown_queue_names_the_valid_ones(
    named: Any, driver: str, script: str, tmp_path: Path
) -> None:
    adapter = adapter_for(named, driver, tmp_path, named=True)
    with pytest.raises(JobSubmissionError, match=r"valid queues: debug, batch"):
        adapter.submit_job(script, {"qos": "nosuch"})


def test_policy_limit_refusal_keeps_flux_words(
    named: Any, driver: str, script: str, tmp_path: Path
) -> None:
    adapter = adapter_for(named, driver, tmp_path, named=True)
    with pytest.raises(JobSubmissionError, match="exceeds policy limit") as caught:
        adapter.submit_job(script, {"qos": "debug", "time": "5m"})
    assert caught.value.scheduler_message.startswith("requested duration")


def test_disabled_queue_refusal(named: Any, driver: str, script: str, tmp_path: Path) -> None:
    adapter = adapter_for(named, driver, tmp_path, named=True)
    # `-q NAME` names the queue in every release; the reason differs: 0.49
    # takes trailing words (no -m; a bare name would be the reason and every
    # queue would be disabled), 0.88 takes -m (trailing words = the queue).
    if parse_version(flux_version(named.flux)) < parse_version("0.50"):
        named.check(["queue", "disable", "-q", "batch", "maintenance"])
    else:
        named.check(["queue", "disable", "-q", "batch", "-m", "maintenance"])
    try:
        with pytest.raises(JobSubmissionError, match="job submission to batch is disabled"):
            adapter.submit_job(script, {"qos": "batch"})
    finally:
        named.check(["queue", "enable", "-q", "batch"])
