"""The Slurm CLI driver against a scripted executor (no Slurm needed)."""

from __future__ import annotations

import logging
from typing import Callable, List, Optional, Sequence

import pytest

from hpcbridge.errors import (
    JobSubmissionError,
    JobTimeoutError,
    SchedulerAdapterError,
    SubmissionUncertainError,
)
from hpcbridge.model import JobState
from hpcbridge.resources import Resources
from hpcbridge.schedulers.slurm import cli as cli_module
from hpcbridge.schedulers.slurm import commands
from hpcbridge.schedulers.slurm.cli import SlurmCliDriver
from hpcbridge.transports.base import CommandResult

Responder = Callable[[List[str]], CommandResult]


class ScriptedExecutor:
    """Answers each command by its program name; records every call."""

    kind = "local"
    host = "testhost"

    def __init__(self, **answers: object) -> None:
        self.answers = answers
        self.calls: List[List[str]] = []
        self.idempotent: List[bool] = []
        self.envs: List[object] = []

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env=None,
        cwd=None,
        input=None,
        idempotent: bool = True,
    ) -> CommandResult:
        argv = list(argv)
        self.calls.append(argv)
        self.idempotent.append(idempotent)
        self.envs.append(env)
        answer = self.answers.get(argv[0])
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer):
            return answer(argv)
        if isinstance(answer, tuple):
            code, out, err = answer
            return CommandResult(argv, code, out, err)
        return CommandResult(argv, 127, "", f"{argv[0]}: command not found")


def spec() -> commands.SubmitSpec:
    return commands.SubmitSpec("/j/w.sh", "/j", "/j/slurm-%j.out", "w", Resources())


def test_submit_parses_id_and_is_not_idempotent() -> None:
    executor = ScriptedExecutor(sbatch=(0, "77;hpcbridge\n", ""))
    assert SlurmCliDriver(executor).submit(spec()) == "77"
    assert executor.calls[0][:2] == ["sbatch", "--parsable"]
    assert executor.idempotent == [False]


def test_submit_error_keeps_slurms_words() -> None:
    err = (
        "sbatch: error: invalid partition specified: nosuchpart\n"
        "sbatch: error: Batch job submission failed: Invalid partition name specified\n"
    )
    executor = ScriptedExecutor(sbatch=(1, "", err))
    with pytest.raises(JobSubmissionError) as caught:
        SlurmCliDriver(executor).submit(spec())
    assert "Invalid partition name specified" in str(caught.value)
    assert "Invalid partition name specified" in caught.value.scheduler_message
    assert "sbatch: error:" not in caught.value.scheduler_message
    assert caught.value.argv and caught.value.argv[0] == "sbatch"
    assert not isinstance(caught.value, SubmissionUncertainError)


def test_submit_timeout_is_uncertain() -> None:
    executor = ScriptedExecutor(sbatch=JobTimeoutError("sbatch did not finish"))
    with pytest.raises(SubmissionUncertainError):
        SlurmCliDriver(executor).submit(spec())


def test_submit_socket_timeout_is_uncertain() -> None:
    err = "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n"
    with pytest.raises(SubmissionUncertainError):
        SlurmCliDriver(ScriptedExecutor(sbatch=(1, "", err))).submit(spec())


def test_submit_without_sbatch() -> None:
    with pytest.raises(JobSubmissionError, match="sbatch not found"):
        SlurmCliDriver(ScriptedExecutor()).submit(spec())


def test_submit_without_an_id_is_uncertain() -> None:
    with pytest.raises(SubmissionUncertainError):
        SlurmCliDriver(ScriptedExecutor(sbatch=(0, "hello\n", ""))).submit(spec())


SQUEUE_OUT = "5|5|RUNNING|None|2026-11-29T15:32:06|NONE|0|\n"
SACCT_OUT = "6|6|COMPLETED|0:0|2026-11-29T15:32:06|2026-11-29T15:32:07|None\n"


def test_query_squeue_then_sacct_for_the_missing_only() -> None:
    executor = ScriptedExecutor(squeue=(0, SQUEUE_OUT, ""), sacct=(0, SACCT_OUT, ""))
    found = SlurmCliDriver(executor).query(["5", "6", "7"])
    assert found["5"].state is JobState.RUNNING
    assert found["6"].state is JobState.COMPLETED
    assert "7" not in found  # left to the adapter (exit file, then UNKNOWN)
    assert [call[0] for call in executor.calls] == ["squeue", "sacct"]
    assert "--jobs=6,7" in executor.calls[1]


def test_query_all_in_queue_runs_one_command() -> None:
    executor = ScriptedExecutor(squeue=(0, SQUEUE_OUT, ""))
    assert SlurmCliDriver(executor).query(["5"])["5"].state is JobState.RUNNING
    assert len(executor.calls) == 1


def test_query_invalid_job_id_means_not_in_queue() -> None:
    executor = ScriptedExecutor(
        squeue=(1, "", "slurm_load_jobs error: Invalid job id specified\n"),
        sacct=(0, SACCT_OUT, ""),
    )
    assert SlurmCliDriver(executor).query(["6"])["6"].state is JobState.COMPLETED


def test_query_controller_down_is_unknown_for_all() -> None:
    err = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
    executor = ScriptedExecutor(squeue=(1, "", err), sacct=(0, SACCT_OUT, ""))
    found = SlurmCliDriver(executor).query(["5", "6"])
    assert {status.state for status in found.values()} == {JobState.UNKNOWN}
    assert "Unable to contact slurm controller" in found["6"].reason
    assert len(executor.calls) == 1


def test_accounting_off_is_no_history_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    cli_module._logged_once.clear()
    executor = ScriptedExecutor(
        squeue=(0, "", ""), sacct=(1, "", "Slurm accounting storage is disabled\n")
    )
    driver = SlurmCliDriver(executor)
    with caplog.at_level(logging.INFO, logger="hpcbridge.slurm"):
        assert driver.query(["5"]) == {}
        assert driver.query(["5"]) == {}
    messages = [record for record in caplog.records if "accounting is disabled" in record.message]
    assert len(messages) == 1
    assert all(record.levelno < logging.WARNING for record in messages)


def test_sacct_other_failure_is_no_history() -> None:
    executor = ScriptedExecutor(squeue=(0, "", ""), sacct=(1, "", "sacct: error: boom\n"))
    assert SlurmCliDriver(executor).query(["5"]) == {}


def test_two_hundred_array_tasks_two_commands_short_argv() -> None:
    ids = [f"40_{index}" for index in range(200)]
    rows = "".join(
        f"40_{index}|{100 + index}|COMPLETED|None|2026-11-29T15:32:06|2026-11-29T15:32:07|0|\n"
        for index in range(150)
    )
    history = "".join(
        f"40_{index}|{100 + index}|COMPLETED|0:0|2026-11-29T15:32:06|2026-11-29T15:32:07|None\n"
        for index in range(200)
    )
    executor = ScriptedExecutor(squeue=(0, rows, ""), sacct=(0, history, ""))
    found = SlurmCliDriver(executor).query(ids)
    assert len(found) == 200 and all(s.state is JobState.COMPLETED for s in found.values())
    assert len(executor.calls) == 2
    assert "--jobs=40,40" in executor.calls[0]  # collapsed to the array id
    assert executor.calls[1][4] == "--jobs=" + ",".join(ids[150:])  # only the missing 50


def test_cancel_ignores_finished_jobs_and_raises_on_real_failures() -> None:
    SlurmCliDriver(ScriptedExecutor(scancel=(0, "", ""))).cancel(["5"])
    gone = "scancel: error: Kill job error on job id 5: Invalid job id specified\n"
    SlurmCliDriver(ScriptedExecutor(scancel=(1, "", gone))).cancel(["5"])
    done = "scancel: error: Kill job error on job id 5: Job/step already completing or completed\n"
    SlurmCliDriver(ScriptedExecutor(scancel=(1, "", done))).cancel(["5"])
    down = "scancel: error: Kill job error on job id 5: Unable to contact slurm controller\n"
    with pytest.raises(SchedulerAdapterError, match="Unable to contact"):
        SlurmCliDriver(ScriptedExecutor(scancel=(1, "", down))).cancel(["5"])
    executor = ScriptedExecutor()
    SlurmCliDriver(executor).cancel([])
    assert executor.calls == []


def test_output_path_from_scontrol() -> None:
    line = "JobId=11 JobName=x StdOut=/tmp/x/slurm-11.out StdErr=/tmp/x/slurm-11.out\n"
    driver = SlurmCliDriver(ScriptedExecutor(scontrol=(0, line, "")))
    assert driver.output_path("11") == "/tmp/x/slurm-11.out"
    gone = SlurmCliDriver(ScriptedExecutor(scontrol=(1, "", "Invalid job id specified")))
    assert gone.output_path("11") is None


def test_config_cached_and_version() -> None:
    def scontrol(argv: List[str]) -> CommandResult:
        if argv[1] == "--version":
            return CommandResult(argv, 0, "slurm-wlm 22.05.8\n", "")
        return CommandResult(argv, 0, "MaxArraySize            = 300\nMinJobAge = 10 sec\n", "")

    executor = ScriptedExecutor(scontrol=scontrol)
    driver = SlurmCliDriver(executor)
    assert driver.max_array_size() == 300
    assert driver.max_array_size() == 300
    assert len(executor.calls) == 1
    assert driver.version() == "22.05.8"


def test_config_unreadable_gives_default() -> None:
    driver = SlurmCliDriver(ScriptedExecutor(scontrol=(1, "", "down")))
    assert driver.config() == {}
    assert driver.max_array_size() == 1001
    assert driver.version() is None


def test_command_env_reaches_every_command() -> None:
    executor = ScriptedExecutor(sbatch=(0, "5\n", ""), squeue=(0, SQUEUE_OUT, ""))
    driver = SlurmCliDriver(executor, env={"SLURM_CONF": "/x/slurm.conf"})
    driver.submit(spec())
    driver.query(["5"])
    assert executor.envs == [{"SLURM_CONF": "/x/slurm.conf"}] * 2
