"""FluxAdapter with a scripted `flux` (no Flux needed): driver choice, queues,
outer time limits, bulk submission, status and the exit-code-file fallback."""

from __future__ import annotations

import json
import logging
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, List

import pytest

from hpcbridge import Settings
from hpcbridge.engine.driver import PartialSubmissionError
from hpcbridge.errors import (
    JobNotFoundError,
    JobSubmissionError,
    SchedulerUnavailableError,
)
from hpcbridge.model import JobState
from hpcbridge.schedulers.flux.adapter import FluxAdapter
from hpcbridge.schedulers.flux.cli_driver import CLIDriver
from hpcbridge.schedulers.flux.command_runner import FluxCommands
from hpcbridge.schedulers.flux.ids import parse_job_id
from hpcbridge.schedulers.flux.instance import POLICY_0_49
from hpcbridge.schedulers.flux.instance import facts as instance_facts
from hpcbridge.transports.base import CommandResult
from tests.support.fake_flux import NAMED, FakeFlux, FakeSSH

DATA = Path(__file__).resolve().parent.parent / "data" / "flux"


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/sh\necho hi\n")
    path.chmod(0o755)
    return str(path)


def make(executor: Any, tmp_path: Path, **kwargs: Any) -> FluxAdapter:
    settings = Settings.from_env(env={}, state_dir=str(tmp_path / "state"))
    kwargs.setdefault("driver", "cli")
    kwargs.setdefault("unknown_limit", 2)
    return FluxAdapter(
        executor=executor, remote_workdir=str(tmp_path / "jobs"), settings=settings, **kwargs
    )


# -- driver choice -----------------------------------------------------------------


def test_unimportable_bindings_switch_to_cli_with_one_log_line(
    tmp_path: Path, script: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "flux", None)
    executor = FakeFlux()
    adapter = make(executor, tmp_path, driver="auto", uri="local:///tmp/flux-x/local-0")
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        adapter.submit_job(script, {"time": "60s"})
        adapter.submit_job(script, {"time": "60s"})
        adapter.get_job_statuses(list(executor.jobs))
    assert adapter.open().driver.name == "cli"
    lines = [r.getMessage() for r in caplog.records if "CLI driver" in r.getMessage()]
    assert len(lines) == 1 and "flux bindings unusable" in lines[0]
    assert all(env == {"FLUX_URI": "local:///tmp/flux-x/local-0"} for env in executor.envs)


def test_forced_native_without_bindings_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "flux", None)
    adapter = make(FakeFlux(), tmp_path, driver="native")
    with pytest.raises(SchedulerUnavailableError, match="native flux driver cannot be used"):
        adapter.open()


def test_ssh_transport_always_uses_cli(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    adapter = make(FakeSSH(), tmp_path, driver="auto")
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        assert adapter.open().driver.name == "cli"
    assert "transport is ssh" in caplog.text


def test_bad_driver_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        make(FakeFlux(), tmp_path, driver="fast")


def test_system_instance_has_no_flux_uri(
    tmp_path: Path, script: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLUX_URI", raising=False)
    executor = FakeFlux()
    make(executor, tmp_path).submit_job(script)
    assert all(env is None for env in executor.envs)


# -- versions ------------------------------------------------------------------------


def test_broker_version_picks_policy_and_026_uses_mini(tmp_path: Path, script: str) -> None:
    executor = FakeFlux(version="commands:\t\t0.26.0\nlibflux-core:\t\t0.26.0\nbroker:\t\t0.26.0\n")
    adapter = make(executor, tmp_path)
    job_id = adapter.submit_job(script, {"qos": "debug"})
    assert adapter.open().facts.policy.name == "0.26"
    batch = [call for call in executor.calls if call[1] == "mini"][0]
    assert batch[:3] == ["flux", "mini", "batch"] and not any("--queue" in part for part in batch)
    executor.handlers["jobs"] = lambda argv, _: CommandResult(
        argv, 0, f"{int(argv[-1])}|RUN||||1.0|2.0|0.0|0.0||\n", ""
    )
    assert adapter.get_job_status(job_id).state is JobState.RUNNING
    jobs_call = [call for call in executor.calls if call[1] == "jobs"][0]
    assert "--json" not in jobs_call


def test_too_old_broker_refused(tmp_path: Path, script: str) -> None:
    adapter = make(FakeFlux(version="commands: 0.25.0\nbroker: 0.25.0\n"), tmp_path)
    with pytest.raises(SchedulerUnavailableError, match="too old"):
        adapter.submit_job(script)


def test_override_adapter_version(tmp_path: Path, script: str) -> None:
    executor = FakeFlux()
    adapter = make(executor, tmp_path, adapter_version="0.26")
    adapter.submit_job(script)
    assert any(call[1:3] == ["mini", "batch"] for call in executor.calls)


# -- queues ----------------------------------------------------------------------------


def test_anonymous_broker_drops_queue_and_says_so(
    tmp_path: Path, script: str, caplog: pytest.LogCaptureFixture
) -> None:
    executor = FakeFlux(config="{}")
    with caplog.at_level(logging.WARNING, logger="hpcbridge"):
        make(executor, tmp_path).submit_job(script, {"qos": "debug"})
    batch = [call for call in executor.calls if call[1] == "batch"][0]
    assert not any(part.startswith("--queue") for part in batch)
    assert "only the anonymous queue: queue 'debug' omitted" in caplog.text


def test_named_broker_valid_default_and_unknown(tmp_path: Path, script: str) -> None:
    executor = FakeFlux(config=NAMED)
    adapter = make(executor, tmp_path)
    adapter.submit_job(script, {"qos": "debug"})
    adapter.submit_job(script)
    batches = [call for call in executor.calls if call[1] == "batch"]
    assert "--queue=debug" in batches[0] and "--queue=batch" in batches[1]
    with pytest.raises(JobSubmissionError, match="valid queues: debug, batch"):
        adapter.submit_job(script, {"qos": "nosuch"})
    assert len([call for call in executor.calls if call[1] == "batch"]) == 2  # never sent
    assert len([call for call in executor.calls if call[1:3] == ["config", "get"]]) == 1  # cached


def test_refused_jobs_leave_no_staged_folder(tmp_path: Path, script: str) -> None:
    """The plan refuses before anything is staged: no folder, no command."""
    expiration = time.time() + 600
    executor = FakeFlux(
        config=NAMED, resource_r=json.dumps({"execution": {"expiration": expiration}})
    )
    adapter = make(executor, tmp_path)
    with pytest.raises(JobSubmissionError, match="valid queues"):
        adapter.submit_job(script, {"qos": "nosuch"})
    with pytest.raises(JobSubmissionError, match="would not fit"):
        adapter.submit_many([script, script], {"time": "1h"})
    assert not (tmp_path / "jobs").exists()
    assert not any(call[1] in ("batch", "submit", "python") for call in executor.calls)


def test_flux_refusal_becomes_submission_error(tmp_path: Path, script: str) -> None:
    executor = FakeFlux()
    stderr = (DATA / "submit_error_duration_0.88.stderr").read_text()
    executor.handlers["batch"] = lambda argv, _: CommandResult(argv, 1, "", stderr)
    with pytest.raises(JobSubmissionError, match="exceeds policy limit") as caught:
        make(executor, tmp_path).submit_job(script, {"time": "2m"})
    assert caught.value.scheduler_message.startswith("requested duration (2m)")


def test_not_ready_instance_is_retried(tmp_path: Path, script: str) -> None:
    executor = FakeFlux()
    answers = [
        CommandResult(
            [], 1, "", "flux-batch: ERROR: No service matching job-ingest.submit is registered"
        ),
        CommandResult([], 0, "ƒCFKYzj\n", ""),
    ]
    executor.handlers["batch"] = lambda argv, _: answers.pop(0)
    assert make(executor, tmp_path).submit_job(script) == "ƒCFKYzj"


# -- outer time limit ---------------------------------------------------------------------


def test_job_longer_than_what_the_enclosing_job_has_left_is_refused(
    tmp_path: Path, script: str
) -> None:
    expiration = time.time() + 600
    executor = FakeFlux(resource_r=json.dumps({"execution": {"expiration": expiration}}))
    adapter = make(executor, tmp_path)
    with pytest.raises(JobSubmissionError, match=r"ends in (59\d|600)s.*ask for at most 5\d\ds"):
        adapter.submit_job(script, {"time": "20m"})
    assert not any(call[1] == "batch" for call in executor.calls)
    adapter.submit_job(script, {"time": "5m"})
    adapter.submit_job(script)  # no time asked: bounded by the instance anyway
    assert 500 < (adapter.time_left() or 0) <= 600


def test_no_expiration_no_check(tmp_path: Path, script: str) -> None:
    adapter = make(FakeFlux(), tmp_path)
    adapter.submit_job(script, {"time": "100d"})
    assert adapter.time_left() is None


# -- bulk, status, waiting ---------------------------------------------------------------------


def test_bulk_is_one_process_and_records_each_task(tmp_path: Path, script: str) -> None:
    executor = FakeFlux()
    adapter = make(executor, tmp_path)
    ids = adapter.submit_many([(script, [str(index)]) for index in range(5)], {"time": "60s"})
    assert len(ids) == 5 and len(set(ids)) == 5
    python_calls = [call for call in executor.calls if call[1] == "python"]
    assert len(python_calls) == 1 and not any(call[1] == "batch" for call in executor.calls)
    records = [adapter.store.get(job_id, "flux", adapter.host_label) for job_id in ids]
    assert [Path(r.exit_file).suffix for r in records if r] == [".0", ".1", ".2", ".3", ".4"]
    wrapper = Path(records[0].remote_dir, ".hpcbridge")  # type: ignore[union-attr]
    assert "HPCBRIDGE_TASK_INDEX" in next(wrapper.glob("*.sh")).read_text()


def test_bulk_partial_failure_keeps_the_submitted(tmp_path: Path, script: str) -> None:
    executor = FakeFlux()
    executor.handlers["python"] = lambda argv, _: CommandResult(
        argv,
        0,
        "OK 7381975040\nERR requested duration (2m) exceeds policy limit of 1m for queue debug\n",
        "",
    )
    adapter = make(executor, tmp_path)
    with pytest.raises(PartialSubmissionError, match="1 of 2 submissions did not go in") as caught:
        adapter.submit_many([script, script])
    assert caught.value.submitted_ids == ["ƒCFKYzj"]
    assert adapter.store.get("ƒCFKYzj", "flux", adapter.host_label) is not None


def test_status_and_wait(tmp_path: Path, script: str) -> None:
    executor = FakeFlux()
    adapter = make(executor, tmp_path)
    job_id = adapter.submit_job(script)
    assert adapter.get_job_status(job_id).state is JobState.RUNNING
    executor.finish(job_id, "FAILED", 3)
    status = adapter.wait(job_id, poll_interval=0.01)
    assert status.state is JobState.FAILED and status.exit_code == 3
    # any spelling finds the record
    ascii_id = job_id.replace("ƒ", "f")
    assert adapter.get_job_status(ascii_id).exit_code == 3


def test_unknown_job_raises_not_found(tmp_path: Path) -> None:
    adapter = make(FakeFlux(), tmp_path)
    with pytest.raises(JobNotFoundError, match="could not be observed 2 times"):
        adapter.wait("ƒ2TNt8FH", poll_interval=0.01)
    with pytest.raises(JobNotFoundError, match="not a Flux job id"):
        adapter.get_job_status("nope")


def test_exit_code_file_answers_when_flux_forgot(tmp_path: Path, script: str) -> None:
    executor = FakeFlux()
    adapter = make(executor, tmp_path)
    job_id = adapter.submit_job(script)
    record = adapter.store.get(job_id, "flux", adapter.host_label)
    assert record is not None and record.exit_file
    Path(record.exit_file).write_text("7\n")
    del executor.jobs[job_id]  # purged, or its instance is gone
    status = adapter.get_job_status(job_id)
    assert status.state is JobState.FAILED and status.exit_code == 7
    assert "exit-code file" in status.reason


def test_unreachable_broker_is_unknown_not_a_crash(tmp_path: Path) -> None:
    executor = FakeFlux()
    executor.handlers["jobs"] = lambda argv, _: CommandResult(
        argv, 1, "", "flux-jobs: ERROR: Unable to connect to Flux: No such file or directory"
    )
    adapter = make(executor, tmp_path)
    status = adapter.get_job_status("ƒCFKYzj")
    assert status.state is JobState.UNKNOWN and "Unable to connect" in status.reason


def test_cancel_uses_decimal_ids(tmp_path: Path, script: str) -> None:
    executor = FakeFlux()
    adapter = make(executor, tmp_path)
    job_id = adapter.submit_job(script)
    adapter.cancel_job(job_id)
    cancel = [call for call in executor.calls if call[1] == "cancel"][0]
    assert cancel[2] == str(parse_job_id(job_id))


def test_describe_cli(tmp_path: Path, script: str) -> None:
    text = make(FakeFlux(), tmp_path, uri="local:///tmp/f/local-0").describe_submission(
        script, {"time": "1h", "nodes": 2}, nested=True
    )
    assert text.startswith("FLUX_URI=local:///tmp/f/local-0 flux batch -n2 -N2 -t3600s")


def test_describe_plain_and_batch_share_the_resource_flags(tmp_path: Path, script: str) -> None:
    adapter = make(FakeFlux(), tmp_path, uri="local:///tmp/f/local-0")
    resources = {"time": "1h", "nodes": 2, "ntasks": 4, "cpus_per_task": 2}
    plain = adapter.describe_submission(script, resources, nested=False).split()
    batch = adapter.describe_submission(script, resources, nested=True).split()
    assert plain[1:3] == ["flux", "submit"] and batch[1:3] == ["flux", "batch"]

    def flags(argv: List[str]) -> List[str]:
        return [word for word in argv if word.startswith("-") and not word.startswith("--env=")]

    assert flags(plain) == flags(batch)
    # each task of a plain job records its own exit code (see jobscript.build_wrapper)
    assert "--env=HPCBRIDGE_EXIT_RANKS=4" in plain
    assert "-n4" in plain and "-c2" in plain and "-N2" in plain
    # a named instance packs plain jobs by default
    assert adapter.describe_submission(script, resources).split()[1:3] == ["flux", "submit"]


def test_doctor_info_cli(tmp_path: Path) -> None:
    info = make(FakeFlux(config=NAMED), tmp_path).doctor_info()
    assert info["driver"] == "cli" and info["adapter_version"] == "0.88"
    assert info["broker_version"] == "0.88.0" and info["commands_version"] == "0.88.0"
    assert info["queues"]["names"] == ["debug", "batch"] and info["queues"]["default"] == "batch"
    assert info["warnings"] == []


def test_doctor_warns_about_mixed_releases(tmp_path: Path) -> None:
    version = "commands:\t\t0.88.0\nlibflux-core:\t\t0.88.0\nbroker:\t\t0.49.0\n"
    info = make(FakeFlux(version=version), tmp_path).doctor_info()
    assert any("broker is 0.49.0" in warning for warning in info["warnings"])


def test_resolve_jobid_target_through_flux_uri(tmp_path: Path, script: str) -> None:
    executor = FakeFlux()
    remote = (
        (DATA / "uri_remote_0.88.txt").read_text().replace("ssh://vm/", f"ssh://{platform.node()}/")
    )
    executor.handlers["uri"] = lambda argv, _: CommandResult(argv, 0, remote, "")
    adapter = make(executor, tmp_path, uri="ƒCFKYzj", parent_uri="local:///tmp/parent/local-0")
    assert adapter.open().instance == "local:///" + remote.strip().split("/", 3)[-1]
    uri_call = [call for call in executor.calls if call[1] == "uri"][0]
    assert uri_call == ["flux", "uri", "--remote", "jobid:ƒCFKYzj"]
    assert executor.envs[executor.calls.index(uri_call)] == {
        "FLUX_URI": "local:///tmp/parent/local-0"
    }


def test_cli_driver_eventlog_fallback_for_other_release() -> None:
    executor = FakeFlux()
    executor.handlers["jobs"] = lambda argv, _: CommandResult(
        argv, 1, "", "flux-jobs: ERROR: invalid payload"
    )
    eventlog = (DATA / "eventlog_tmo_0.88.txt").read_text()
    executor.handlers["job"] = lambda argv, _: CommandResult(argv, 0, eventlog, "")
    facts = instance_facts(None, "0.88.0", POLICY_0_49, "test", None)
    driver = CLIDriver(FluxCommands(executor), facts)
    status = driver.query(["ƒCFKYzj"])["ƒCFKYzj"]
    assert status.state is JobState.TIMEOUT and status.exit_code == 142
    assert os.path.basename(executor.calls[-1][0]) == "flux"


def test_log_path_without_a_record_comes_from_the_jobspec(tmp_path: Path) -> None:
    executor = FakeFlux()
    jobspec = (DATA / "jobspec_batch_0.88.json").read_text()
    executor.handlers["job"] = lambda argv, _: CommandResult(argv, 0, jobspec, "")
    adapter = make(executor, tmp_path)
    assert adapter.log_path("fCFKYzj") == "/tmp/fx/out/flux-ƒCFKYzj.out"
    assert executor.calls[-1][1:] == ["job", "info", "7381975040", "jobspec"]
