"""The Slurm CLI driver against a scripted executor (no Slurm needed)."""

from __future__ import annotations

import logging
from typing import Any, Callable, List, Optional, Sequence

import pytest

from hpcbridge.engine.driver import NotAskedNow, PartialSubmissionError, SubmitBatch, Submitted
from hpcbridge.engine.jobscript import PreparedJob
from hpcbridge.errors import (
    JobSubmissionError,
    JobTimeoutError,
    SchedulerAdapterError,
    SubmissionUncertainError,
)
from hpcbridge.model import JobState
from hpcbridge.resources import Resources
from hpcbridge.schedulers.slurm import commands
from hpcbridge.schedulers.slurm.cli_driver import SlurmCliDriver
from hpcbridge.transports.base import CommandResult


def submit(driver: Any, batch: SubmitBatch) -> List[Submitted]:
    """The driver's plan of ``batch``, submitted (what a ``Submission`` does)."""
    return driver.submit_many(driver.plan(batch))


def describe(driver: Any, batch: SubmitBatch) -> str:
    return driver.describe(driver.plan(batch))


Responder = Callable[[List[str]], CommandResult]


def cli(executor: Any, **options: Any) -> SlurmCliDriver:
    """A CLI driver of Slurm 22.05 (no light rounds) that does not ask a busy controller
    again (``query_retries=0``) unless a case says otherwise."""
    options.setdefault("query_retries", 0.0)
    options.setdefault("light_rounds", False)
    return SlurmCliDriver(executor, **options)


class ScriptedExecutor:
    """Answers each command by its program name; records every call."""

    kind = "local"
    host = "testhost"
    is_local = True

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


def batch(count: int, output: str = "/j/slurm-%j.out") -> SubmitBatch:
    job = PreparedJob("t", "/j", "/j/.hpcbridge/t.sh", "/j/.hpcbridge/t.exit", ["/j/a.sh"], "w")
    return SubmitBatch(job, count, Resources(), ("7",), output)


def numbered_sbatch(refuse_arrays: bool = False, fail_from: int = 0) -> Responder:
    """sbatch answering 100, 101, ...; arrays refused, or a failure from the nth call on."""
    calls: List[List[str]] = []

    def sbatch(argv: List[str]) -> CommandResult:
        calls.append(argv)
        if refuse_arrays and any(part.startswith("--array=") for part in argv):
            err = "sbatch: error: Batch job submission failed: Invalid job array specification\n"
            return CommandResult(argv, 1, "", err)
        if fail_from and len(calls) >= fail_from:
            err = "sbatch: error: Batch job submission failed: Unable to contact slurm controller\n"
            return CommandResult(argv, 1, "", err)
        return CommandResult(argv, 0, f"{99 + len(calls)}\n", "")

    return sbatch


def test_submit_parses_id_and_is_not_idempotent() -> None:
    executor = ScriptedExecutor(sbatch=(0, "77;hpcbridge\n", ""))
    assert cli(executor).submit(spec()) == "77"
    assert executor.calls[0][:2] == ["sbatch", "--parsable"]
    assert executor.idempotent == [False]


def test_submit_error_keeps_slurms_words() -> None:
    err = (
        "sbatch: error: invalid partition specified: nosuchpart\n"
        "sbatch: error: Batch job submission failed: Invalid partition name specified\n"
    )
    executor = ScriptedExecutor(sbatch=(1, "", err))
    with pytest.raises(JobSubmissionError) as caught:
        cli(executor).submit(spec())
    assert "Invalid partition name specified" in str(caught.value)
    assert "Invalid partition name specified" in caught.value.scheduler_message
    assert "sbatch: error:" not in caught.value.scheduler_message
    assert caught.value.argv and caught.value.argv[0] == "sbatch"
    assert not isinstance(caught.value, SubmissionUncertainError)


def test_submit_timeout_is_uncertain() -> None:
    executor = ScriptedExecutor(sbatch=JobTimeoutError("sbatch did not finish"))
    with pytest.raises(SubmissionUncertainError):
        cli(executor).submit(spec())


def test_submit_socket_timeout_is_uncertain() -> None:
    err = "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n"
    with pytest.raises(SubmissionUncertainError):
        cli(ScriptedExecutor(sbatch=(1, "", err))).submit(spec())


def test_submit_without_sbatch() -> None:
    with pytest.raises(JobSubmissionError, match="sbatch not found"):
        cli(ScriptedExecutor()).submit(spec())


def test_submit_without_an_id_is_uncertain() -> None:
    with pytest.raises(SubmissionUncertainError):
        cli(ScriptedExecutor(sbatch=(0, "hello\n", ""))).submit(spec())


# -- submit_many ------------------------------------------------------------


def test_submit_many_of_one_is_a_plain_job() -> None:
    executor = ScriptedExecutor(sbatch=numbered_sbatch())
    driver = cli(executor)
    assert submit(driver, batch(1)) == [Submitted("100", "/j/slurm-100.out", 0)]
    argv = executor.calls[0]
    assert "--dependency=afterok:7" in argv and argv[-1] == "/j/.hpcbridge/t.sh"
    assert not any(part.startswith(("--array", "--export")) for part in argv)
    assert describe(driver, batch(1)).startswith("sbatch --parsable --job-name=w")


def test_submit_many_is_one_array_named_by_array_and_task() -> None:
    executor = ScriptedExecutor(sbatch=numbered_sbatch())
    driver = cli(executor)
    found = submit(driver, batch(3, "/j/out-%x-%j.log"))
    assert found == [
        Submitted(f"100_{index}", f"/j/out-w-100_{index}.log", index) for index in range(3)
    ]
    assert len(executor.calls) == 1
    assert "--array=0-2" in executor.calls[0]
    assert "--output=/j/out-%x-%A_%a.log" in executor.calls[0]
    assert not any(part.startswith("--export") for part in executor.calls[0])
    assert "--array=0-2" in describe(driver, batch(3))


def test_submit_many_one_job_per_task_where_arrays_are_refused() -> None:
    executor = ScriptedExecutor(sbatch=numbered_sbatch(refuse_arrays=True))
    found = submit(cli(executor), batch(3))
    # call 1 (id 100 unused) was the refused array
    assert found == [Submitted(str(101 + i), f"/j/slurm-{101 + i}.out", i) for i in range(3)]
    singles = executor.calls[1:]
    assert [argv[-1] for argv in singles] == [str(index) for index in range(3)]
    assert all("--output=/j/slurm-%j.out" in argv for argv in singles)


def test_submit_many_later_failure_is_partial() -> None:
    # call 1: the refused array; calls 2-3 go in; call 4 fails
    executor = ScriptedExecutor(sbatch=numbered_sbatch(refuse_arrays=True, fail_from=4))
    with pytest.raises(PartialSubmissionError) as caught:
        submit(cli(executor), batch(4))
    assert caught.value.submitted_ids == ["101", "102"]
    assert "Unable to contact slurm controller" in caught.value.failures[0]
    assert len(caught.value.failures) == 2 and "4 submissions" in str(caught.value)
    assert len(executor.calls) == 4  # nothing more after the failure


def test_submit_many_first_failure_is_a_plain_error() -> None:
    executor = ScriptedExecutor(sbatch=numbered_sbatch(fail_from=1))
    with pytest.raises(JobSubmissionError) as caught:
        submit(cli(executor), batch(3))
    assert not isinstance(caught.value, PartialSubmissionError)
    assert len(executor.calls) == 1  # not an array refusal: no job-by-job retry


def test_uncertain_array_is_adopted_by_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """sbatch timed out, yet the array exists: found by its comment, never sent twice."""
    monkeypatch.setattr("hpcbridge.engine.adoption.LOOK_EVERY", 0.01)
    rows = iter(
        [
            (1, "", "squeue: error: Socket timed out on send/recv operation\n"),  # still busy
            (0, "7|hpcbridge:other\n41|hpcbridge:t\n", ""),
        ]
    )
    executor = ScriptedExecutor(
        sbatch=JobTimeoutError("sbatch did not finish"),
        squeue=lambda argv: CommandResult(argv, *next(rows)),
    )
    found = submit(cli(executor), batch(3))
    assert [item.job_id for item in found] == ["41_0", "41_1", "41_2"]
    assert [call[0] for call in executor.calls].count("sbatch") == 1
    assert "--comment=hpcbridge:t" in executor.calls[0]


def test_uncertain_submission_surely_absent_is_sent_once_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("hpcbridge.engine.adoption.LOOK_EVERY", 0.01)
    answers = iter([JobTimeoutError("sbatch did not finish"), (0, "42\n", "")])

    def sbatch(argv: List[str]) -> CommandResult:
        answer = next(answers)
        if isinstance(answer, BaseException):
            raise answer
        return CommandResult(argv, *answer)

    executor = ScriptedExecutor(
        sbatch=sbatch,
        squeue=(0, "7|hpcbridge:other\n", ""),  # answers, without our key
        sacct=(0, "", ""),
        scontrol=(0, "MessageTimeout = 0 sec\n", ""),
    )
    driver = cli(executor)
    monkeypatch.setattr(driver, "settle", lambda: 0.05)
    assert [item.job_id for item in submit(driver, batch(1))] == ["42"]
    assert [call[0] for call in executor.calls].count("sbatch") == 2


def test_never_reached_submission_is_sent_again() -> None:
    """A "connect failure": sbatch's request never reached slurmctld, nothing went in."""
    err = (
        "sbatch: error: Batch job submission failed: "
        "Unable to contact slurm controller (connect failure)\n"
    )
    answers = iter([(1, "", err), (0, "43\n", "")])
    executor = ScriptedExecutor(sbatch=lambda argv: CommandResult(argv, *next(answers)))
    assert cli(executor).submit(spec()) == "43"
    assert len(executor.calls) == 2


def test_a_busy_controller_is_asked_again_within_the_budget() -> None:
    busy = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
    answers = iter([(1, "", busy), (0, SQUEUE_OUT, "")])
    executor = ScriptedExecutor(squeue=lambda argv: CommandResult(argv, *next(answers)))
    found = cli(executor, query_retries=30.0).query(["5"])
    assert found["5"].state is JobState.RUNNING and len(executor.calls) == 2


def test_light_rounds_ask_the_full_fields_only_for_a_changed_state() -> None:
    """Slurm 23.11.5+: ``--only-job-state`` every round but the first (a cold round needs
    every job's full fields), the full squeue for what changed."""
    states = iter(["5|RUNNING\n6|RUNNING\n"])
    full = "5|5|RUNNING|None|2026-11-29T15:32:06|NONE|0|\n6|6|PENDING|Priority|NONE|NONE|0|\n"

    def squeue(argv: List[str]) -> CommandResult:
        if "--only-job-state" in argv:
            return CommandResult(argv, 0, next(states), "")
        return CommandResult(argv, 0, full, "")

    executor = ScriptedExecutor(squeue=squeue)
    driver = cli(executor, light_rounds=True)
    driver.query(["5", "6"])
    driver.query(["5", "6"])
    jobs = [next(p for p in call if p.startswith("--jobs=")) for call in executor.calls]
    assert jobs == ["--jobs=5,6", "--jobs=5,6", "--jobs=6"]
    assert ["--only-job-state" in call for call in executor.calls] == [False, True, False]


SQUEUE_OUT = "5|5|RUNNING|None|2026-11-29T15:32:06|NONE|0|\n"
SACCT_OUT = "6|6|COMPLETED|0:0|2026-11-29T15:32:06|2026-11-29T15:32:07|None\n"


def test_query_squeue_then_sacct_for_the_missing_only() -> None:
    executor = ScriptedExecutor(squeue=(0, SQUEUE_OUT, ""), sacct=(0, SACCT_OUT, ""))
    found = cli(executor).query(["5", "6", "7"])
    assert found["5"].state is JobState.RUNNING
    assert found["6"].state is JobState.COMPLETED
    # the adapter then looks for the exit-code file
    assert found["7"].state is JobState.UNKNOWN and found["7"].reason == "not in squeue or sacct"
    assert [call[0] for call in executor.calls] == ["squeue", "sacct"]
    assert "--jobs=6,7" in executor.calls[1]


def test_many_ids_are_asked_as_the_users_jobs_and_another_users_by_id() -> None:
    """Past ``BY_USER_OVER`` ids squeue lists the user's jobs (``--me``); an id neither
    it nor sacct answers (another user's job) is asked once more, by its id."""
    ids = [str(100 + index) for index in range(60)]
    mine = "".join(f"{job_id}|{job_id}|PENDING|Priority|N/A|N/A|0|\n" for job_id in ids[:58])
    other_rows = "99|99|RUNNING|None|2026-11-29T15:32:06|NONE|0|\n"  # a job not asked

    def squeue(argv: List[str]) -> CommandResult:
        if "--me" in argv:
            return CommandResult(argv, 0, other_rows + mine, "")
        return CommandResult(argv, 0, "158|158|RUNNING|None|2026-11-29T15:32:06|NONE|0|\n", "")

    executor = ScriptedExecutor(squeue=squeue, sacct=(0, "", ""))
    found = cli(executor).query(ids)
    assert [call[0] for call in executor.calls] == ["squeue", "sacct", "squeue"]
    assert "--me" in executor.calls[0] and "99" not in found
    assert "--jobs=158,159" in executor.calls[1] and "--jobs=158,159" in executor.calls[2]
    assert all(found[job_id].state is JobState.PENDING for job_id in ids[:58])
    assert found["158"].state is JobState.RUNNING  # another user's job, by its id
    assert found["159"].state is JobState.UNKNOWN


def test_query_all_in_queue_runs_one_command() -> None:
    executor = ScriptedExecutor(squeue=(0, SQUEUE_OUT, ""))
    assert cli(executor).query(["5"])["5"].state is JobState.RUNNING
    assert len(executor.calls) == 1


def test_query_invalid_job_id_means_not_in_queue() -> None:
    executor = ScriptedExecutor(
        squeue=(1, "", "slurm_load_jobs error: Invalid job id specified\n"),
        sacct=(0, SACCT_OUT, ""),
    )
    assert cli(executor).query(["6"])["6"].state is JobState.COMPLETED


def test_query_controller_down_is_not_asked_now_for_all() -> None:
    err = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
    executor = ScriptedExecutor(squeue=(1, "", err), sacct=(0, SACCT_OUT, ""))
    with pytest.raises(NotAskedNow, match="Unable to contact slurm controller"):
        cli(executor).query(["5", "6"])
    assert len(executor.calls) == 1  # sacct is not asked in its place


def test_accounting_off_is_no_history_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    executor = ScriptedExecutor(
        squeue=(0, "", ""), sacct=(1, "", "Slurm accounting storage is disabled\n")
    )
    driver = cli(executor)
    with caplog.at_level(logging.INFO, logger="hpcbridge.slurm"):
        assert driver.query(["5"])["5"].state is JobState.UNKNOWN
        assert driver.query(["5"])["5"].state is JobState.UNKNOWN
        first = [record for record in caplog.records if "accounting is disabled" in record.message]
        cli(executor).query(["5"])  # another driver notes it once too
    messages = [record for record in caplog.records if "accounting is disabled" in record.message]
    assert len(first) == 1 and len(messages) == 2
    assert all(record.levelno < logging.WARNING for record in messages)


def test_sacct_other_failure_is_no_history() -> None:
    executor = ScriptedExecutor(squeue=(0, "", ""), sacct=(1, "", "sacct: error: boom\n"))
    assert cli(executor).query(["5"])["5"].state is JobState.UNKNOWN


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
    found = cli(executor).query(ids)
    assert len(found) == 200 and all(s.state is JobState.COMPLETED for s in found.values())
    assert len(executor.calls) == 2
    assert "--jobs=40" in executor.calls[0]  # collapsed to the array id
    assert executor.calls[1][4] == "--jobs=" + ",".join(ids[150:])  # only the missing 50


def test_cancel_ignores_finished_jobs_and_raises_on_real_failures() -> None:
    cli(ScriptedExecutor(scancel=(0, "", ""))).cancel(["5"])
    gone = "scancel: error: Kill job error on job id 5: Invalid job id specified\n"
    cli(ScriptedExecutor(scancel=(1, "", gone))).cancel(["5"])
    done = "scancel: error: Kill job error on job id 5: Job/step already completing or completed\n"
    cli(ScriptedExecutor(scancel=(1, "", done))).cancel(["5"])
    down = "scancel: error: Kill job error on job id 5: Unable to contact slurm controller\n"
    with pytest.raises(SchedulerAdapterError, match="Unable to contact"):
        cli(ScriptedExecutor(scancel=(1, "", down))).cancel(["5"])
    executor = ScriptedExecutor()
    cli(executor).cancel([])
    assert executor.calls == []


def test_output_path_from_scontrol() -> None:
    line = "JobId=11 JobName=x StdOut=/tmp/x/slurm-11.out StdErr=/tmp/x/slurm-11.out\n"
    driver = cli(ScriptedExecutor(scontrol=(0, line, "")))
    assert driver.find_output("11") == "/tmp/x/slurm-11.out"
    gone = cli(ScriptedExecutor(scontrol=(1, "", "Invalid job id specified")))
    assert gone.find_output("11") is None


def test_config_cached_and_version() -> None:
    def scontrol(argv: List[str]) -> CommandResult:
        if argv[1] == "--version":
            return CommandResult(argv, 0, "slurm-wlm 22.05.8\n", "")
        return CommandResult(argv, 0, "MaxArraySize            = 300\nMinJobAge = 10 sec\n", "")

    executor = ScriptedExecutor(scontrol=scontrol)
    driver = cli(executor)
    assert driver.max_batch() == 300
    assert driver.max_batch() == 300
    assert len(executor.calls) == 1
    assert driver.version() == "22.05.8"


@pytest.mark.parametrize(("override", "size"), [(2, 2), (1, 1), (0, 1)])
def test_max_array_size_override_asks_nothing(override: int, size: int) -> None:
    executor = ScriptedExecutor()
    assert SlurmCliDriver(executor, max_array_size=override).max_batch() == size
    assert executor.calls == []


def test_max_array_size_zero_means_one_job_per_submission() -> None:
    executor = ScriptedExecutor(scontrol=(0, "MaxArraySize = 0\n", ""))
    assert cli(executor).max_batch() == 1


def test_config_unreadable_gives_default() -> None:
    driver = cli(ScriptedExecutor(scontrol=(1, "", "down")))
    assert driver.config() == {}
    assert driver.max_batch() == 1001
    assert driver.version() is None
    assert driver.waiter(["5"]) is None


def test_command_env_reaches_every_command() -> None:
    executor = ScriptedExecutor(sbatch=(0, "5\n", ""), squeue=(0, SQUEUE_OUT, ""))
    driver = cli(executor, env={"SLURM_CONF": "/x/slurm.conf"})
    driver.submit(spec())
    driver.query(["5"])
    assert executor.envs == [{"SLURM_CONF": "/x/slurm.conf"}] * 2


@pytest.mark.parametrize(
    ("version", "light"),
    [
        ("slurm 22.05.8", False),
        ("slurm 23.11.4", False),
        ("slurm 23.11.5", True),
        ("slurm 24.05.1", True),
    ],
)
def test_light_rounds_from_the_release_that_has_them(version: str, light: bool) -> None:
    """squeue has ``--only-job-state`` from Slurm 23.11.5 (its changelog), not 24.05."""
    executor = ScriptedExecutor(scontrol=(0, version + "\n", ""))
    assert SlurmCliDriver(executor, query_retries=0.0)._light() is light
