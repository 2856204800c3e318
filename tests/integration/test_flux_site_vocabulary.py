"""The site's words reach a real Flux of each release, through both drivers.

Options in Flux's own words (``native``) are judged by Flux's own option handling
(``flux submit --dry-run``) and what they set is in the jobspec the instance keeps
(``flux job info ID jobspec``), for plain and batch jobs alike.  An option that
names what hpcbridge owns, one the release lacks or one that changes the job's
resources is refused before anything is staged, the message saying what to use.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from hpcbridge.errors import ResourceError
from hpcbridge.model import JobState
from hpcbridge.schedulers.flux.adapter import FluxAdapter
from hpcbridge.schedulers.flux.ids import decimal_job_id
from tests.support.begins import begin_bounds, begin_forms
from tests.support.flux import config_accepts_noverify
from tests.support.flux_cases import (
    adapter_on,
    flux_params,
    require_flux,
    start_instance,
    write_script,
)

pytestmark = pytest.mark.flux

#: the GPUs the test instance declares (it has none: Flux is told not to verify)
GPUS = 2


@pytest.fixture(scope="module", params=flux_params())
def flux(request: pytest.FixtureRequest) -> str:
    return str(request.param or require_flux())


@pytest.fixture(scope="module")
def broker(flux: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    instance = start_instance(tmp_path_factory.mktemp("flux-vocabulary"), flux=flux, gpus=GPUS)
    yield instance
    instance.stop()


@pytest.fixture(params=["native", "cli"])
def adapter(request: pytest.FixtureRequest, broker: Any, tmp_path: Path) -> FluxAdapter:
    return adapter_on(broker, request.param, tmp_path)


def jobspec_of(broker: Any, job_id: str) -> Any:
    return json.loads(broker.check(["job", "info", decimal_job_id(job_id), "jobspec"]))


@pytest.mark.parametrize("nested", [False, True], ids=["plain", "batch"])
def test_native_flux_options_are_in_the_jobspec(
    adapter: FluxAdapter, broker: Any, tmp_path: Path, nested: bool
) -> None:
    script = write_script(tmp_path / "scripts", "site.sh", "echo site ok\n")
    native = {"flux": ["-o", "cpu-affinity=off", "--setattr=user.site=abc"], "slurm": ["--x"]}
    job_id = adapter.submit_job(script, {"time": "60s", "native": native}, nested=nested)
    assert adapter.wait(job_id, poll_interval=0.5, timeout=120).state is JobState.COMPLETED
    attributes = jobspec_of(broker, job_id)["attributes"]
    assert attributes["system"]["shell"]["options"]["cpu-affinity"] == "off"
    assert attributes["user"]["site"] == "abc"
    assert "site ok" in adapter.get_job_logs(job_id)


@pytest.mark.parametrize(
    "option, said",
    [
        ("--output=elsewhere.out", "give the output key"),
        ("--env=A=1", "give variables with environment"),
        ("-t5m", "the time key says it"),
        ("--setattr=system.duration=60", "sets system.duration, which hpcbridge sets"),
        ("--bogus-option=1", "unrecognized arguments: --bogus-option=1"),
        ("--urgency=3", "changes nothing in the jobspec"),
    ],
)
def test_a_refused_native_option_stages_nothing(
    adapter: FluxAdapter, tmp_path: Path, option: str, said: str
) -> None:
    script = write_script(tmp_path / "scripts", "site.sh", "echo site ok\n")
    with pytest.raises(ResourceError, match=said):
        adapter.submit_job(script, {"native": {"flux": [option]}}, nested=False)
    jobs = tmp_path / "jobs"
    assert not jobs.exists() or not list(jobs.iterdir())


def test_exclusive_and_begin_are_in_the_jobspec(
    adapter: FluxAdapter, broker: Any, tmp_path: Path
) -> None:
    policy = adapter.open().facts.policy
    script = write_script(tmp_path / "scripts", "later.sh", "echo later\n")
    asked = {"nodes": 1, "exclusive": True, "begin": "now+1h", "time": "60s"}
    job_id = adapter.submit_job(script, asked, nested=False)
    try:
        spec = jobspec_of(broker, job_id)
        node = spec["resources"][0]
        dependencies = spec["attributes"]["system"].get("dependencies", [])
        if policy.exclusive:
            assert node["type"] == "node" and node["exclusive"] is True
        if policy.begin_time:
            assert [entry["scheme"] for entry in dependencies] == ["begin-time"]
            assert adapter.get_job_status(job_id).state is JobState.PENDING
        else:  # 0.26: dropped, said once
            assert not dependencies and not node.get("exclusive")
    finally:
        adapter.cancel_job(job_id)


def test_each_begin_form_is_the_begin_time_flux_holds_the_job_until(
    adapter: FluxAdapter, broker: Any, tmp_path: Path
) -> None:
    """Each form of ``begin`` (sbatch's, Flux's, times of day, dates): the dry run
    shows the moment as the begin-time epoch, and the job waits for it (DEPEND)."""
    if not adapter.open().facts.policy.begin_time:
        pytest.skip("this Flux release has no begin-time dependency (0.26)")
    script = write_script(tmp_path / "scripts", "later.sh", "echo later\n")
    submitted = []
    try:
        for text in begin_forms(datetime.now()):
            before = time.time()
            asked = {"begin": text, "time": "60s"}
            dry = adapter.describe_submission(script, asked, nested=False)
            job_id = adapter.submit_job(script, asked, nested=False)
            submitted.append(job_id)
            first, last = begin_bounds(text, before, time.time())
            said = [str(float(moment)) for moment in range(first, last + 1)]
            assert any(f"{moment}" in dry for moment in said), (text, dry)
            dependencies = jobspec_of(broker, job_id)["attributes"]["system"]["dependencies"]
            assert dependencies[0]["scheme"] == "begin-time", text
            assert str(float(dependencies[0]["value"])) in said, (text, dependencies, said)
            state = broker.check(["jobs", "-no", "{state}", decimal_job_id(job_id)]).strip()
            assert state == "DEPEND", (text, state)
    finally:
        if submitted:
            adapter.cancel_jobs(submitted)


TRAPS_USR1 = """trap 'echo "got USR1 after $SECONDS s"; exit 0' USR1
for i in $(seq 1 120); do sleep 0.5; done
echo no signal
"""


@pytest.mark.parametrize("nested", [False, True], ids=["plain", "batch"])
def test_a_warning_signal_reaches_the_script_before_the_limit(
    adapter: FluxAdapter, tmp_path: Path, nested: bool
) -> None:
    policy = adapter.open().facts.policy
    if not policy.warning_signal:
        pytest.skip(f"Flux {policy}'s shell has no warning signal (the key is dropped there)")
    script = write_script(tmp_path / "scripts", "warned.sh", TRAPS_USR1)
    # 70 s allowed, the signal 65 s before the end: about 5 s after the start.
    job_id = adapter.submit_job(script, {"time": "70s", "signal": "USR1@65"}, nested=nested)
    final = adapter.wait(job_id, poll_interval=0.5, timeout=120)
    log = adapter.get_job_logs(job_id)
    assert "got USR1" in log and "no signal" not in log, log
    assert final.state is JobState.COMPLETED and final.exit_code == 0


@pytest.mark.parametrize(
    "asked", [{"gpus_per_task": 1}, {"nodes": 1, "gpus_per_node": GPUS}], ids=["task", "node"]
)
def test_gpus_schedule_and_more_than_exist_never_run(
    adapter: FluxAdapter, broker: Any, tmp_path: Path, asked: Dict[str, int]
) -> None:
    if not config_accepts_noverify(broker.flux):
        pytest.skip("0.26 checks the configured resources against the machine: no fake GPUs")
    script = write_script(tmp_path / "scripts", "gpu.sh", "echo gpu ok\n")
    fits = adapter.submit_job(script, {**asked, "time": "60s"}, nested=False)
    ended = adapter.wait(fits, poll_interval=0.5, timeout=60)
    too_many = adapter.submit_job(script, {"gpus_per_task": GPUS + 1}, nested=False)
    never = adapter.wait(too_many, poll_interval=0.5, timeout=60)
    print(f"-g1: {ended.state.value} {ended.reason!r}; -g{GPUS + 1}: {never.state.value}")
    assert "gpu" in json.dumps(jobspec_of(broker, fits)["resources"])
    if ended.state is not JobState.COMPLETED:
        # 0.49's sched-simple schedules no GPUs at all: the job fails saying so.
        assert "gpu" in (ended.reason or "").lower(), ended
    assert never.state is not JobState.COMPLETED
    assert "gpu ok" not in adapter.get_job_logs(too_many)


@pytest.mark.parametrize("nested", [False, True], ids=["plain", "batch"])
def test_a_bank_on_an_instance_without_accounting_is_passed_and_harmless(
    adapter: FluxAdapter, broker: Any, tmp_path: Path, nested: bool
) -> None:
    """Every release ignores system.bank where no flux-accounting plugin reads it (a
    nested instance, a test instance): the job runs, the bank kept in its jobspec."""
    script = write_script(tmp_path / "scripts", "bank.sh", "echo no accounting\n")
    job_id = adapter.submit_job(script, {"account": "banka", "time": "60s"}, nested=nested)
    assert adapter.wait(job_id, poll_interval=0.5, timeout=120).state is JobState.COMPLETED
    assert jobspec_of(broker, job_id)["attributes"]["system"]["bank"] == "banka"
