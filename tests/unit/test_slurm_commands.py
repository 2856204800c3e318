"""Slurm's command lines and their outputs (sbatch, squeue, sacct, scancel, scontrol):
pure builders and parsers, against outputs recorded from Slurm 22.05."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hpcbridge.errors import JobSubmissionError, LimitRefusedError, SubmissionUncertainError
from hpcbridge.model import JobState
from hpcbridge.resources import Resources
from hpcbridge.schedulers.slurm import cluster as slurm_cluster
from hpcbridge.schedulers.slurm import commands, queries, status

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
UTC = timezone.utc

# The recorder's formats (tests/data/slurm/record.sh).
RECORDED_SQUEUE = ("id", "state", "reason", "start", "end", "submit", "name")
RECORDED_SACCT = ("id", "state", "exit_code", "start", "end", "submit", "reason", "name")


def recorded(name: str, suffix: str = "txt") -> str:
    path = DATA / f"{name}.{suffix}"
    if not path.exists():
        pytest.skip(f"recording {path.name} not present")
    return path.read_text()


def spec(**resources: object) -> commands.SubmitSpec:
    return commands.SubmitSpec(
        wrapper_path="/j/a/.hpcbridge/t.sh",
        workdir="/j/a",
        output="/j/a/slurm-%j.out",
        job_name="run.sh",
        resources=Resources.from_mapping(resources),
    )


# -- sbatch -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stdout", "job_id"),
    [
        ("1\n", "1"),
        ("2;hpcbridge\n", "2"),
        ("Submitted batch job 3\n", "3"),
        ("sbatch: warning: x\n42\n", "42"),
    ],
)
def test_parse_sbatch_id(stdout: str, job_id: str) -> None:
    assert commands.parse_sbatch_id(stdout) == job_id


def test_parse_sbatch_id_from_recordings() -> None:
    assert commands.parse_sbatch_id(recorded("sbatch_parsable")) == "1"
    assert commands.parse_sbatch_id(recorded("sbatch_parsable_cluster")) == "2"
    assert commands.parse_sbatch_id(recorded("sbatch_plain")) == "3"


def test_parse_sbatch_id_refuses_noise() -> None:
    with pytest.raises(ValueError):
        commands.parse_sbatch_id("hello\n")


def test_sbatch_argv_every_directive() -> None:
    argv = commands.sbatch_argv(
        spec(
            partition="debug",
            qos="fast",
            account="hpcb",
            constraint="cpu",
            time="2:00:00",
            nodes=2,
            ntasks=4,
            cpus_per_task=3,
            mem="4G",
            gpus=1,
            job_name="ignored",
        )
    )
    assert argv == [
        "sbatch",
        "--parsable",
        "--partition=debug",
        "--qos=fast",
        "--account=hpcb",
        "--constraint=cpu",
        "--time=2:00:00",
        "--nodes=2",
        "--ntasks=4",
        "--cpus-per-task=3",
        "--mem=4G",
        "--gpus=1",
        "--job-name=run.sh",
        "--output=/j/a/slurm-%j.out",
        "--chdir=/j/a",
        "/j/a/.hpcbridge/t.sh",
    ]


def test_sbatch_argv_minimal_and_gpus_zero_omitted() -> None:
    argv = commands.sbatch_argv(spec(gpus=0))
    assert not any(part.startswith("--gpus") for part in argv)
    assert argv[:2] == ["sbatch", "--parsable"]
    assert argv[-1] == "/j/a/.hpcbridge/t.sh"


@pytest.mark.parametrize(
    ("time", "flag"),
    [
        ("1", "--time=0:01:00"),
        ("90s", "--time=0:01:30"),
        ("1-2", "--time=1-02:00:00"),
        ("unlimited", "--time=UNLIMITED"),
    ],
)
def test_sbatch_time(time: str, flag: str) -> None:
    assert flag in commands.sbatch_argv(spec(time=time))


def test_sbatch_dependency_and_array() -> None:
    base = spec()
    argv = commands.sbatch_argv(
        commands.SubmitSpec(**{**base.__dict__, "depends_on": ("5", "9_3"), "array": "0-199"})
    )
    assert "--dependency=afterok:5:9_3" in argv
    assert "--kill-on-invalid-dep=yes" in argv
    assert "--array=0-199" in argv
    assert argv[-1] == base.wrapper_path


def test_sbatch_one_task_of_a_many_task_wrapper() -> None:
    base = spec()
    argv = commands.sbatch_argv(commands.SubmitSpec(**{**base.__dict__, "task_index": 3}))
    assert argv[-2:] == [base.wrapper_path, "3"]  # the index: the wrapper's argument
    # No --export at all: any but a bare ALL makes sbatch set SLURM_GET_USER_ENV=1, and
    # slurmd run a login shell (su - USER) before the job.
    array = commands.SubmitSpec(**{**base.__dict__, "array": "0-3"})
    for each in (argv, commands.sbatch_argv(base), commands.sbatch_argv(array)):
        assert not any(part.startswith("--export") for part in each)


def test_arrays_refused_and_uncertain_messages() -> None:
    assert commands.arrays_refused("Batch job submission failed: Invalid job array specification")
    assert not commands.arrays_refused("Invalid partition name specified")
    assert commands.submission_uncertain("Socket timed out on send/recv operation")
    assert not commands.submission_uncertain("Invalid qos specification")


@pytest.mark.parametrize(
    ("returncode", "stderr", "error"),
    [
        (1, "sbatch: error: Batch job submission failed: Invalid account", JobSubmissionError),
        (
            1,
            "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation",
            SubmissionUncertainError,
        ),
        (1, "sbatch: error: QOSMaxSubmitJobPerUserLimit", LimitRefusedError),
    ],
)
def test_a_failed_sbatch_raises_what_its_message_means(
    returncode: int, stderr: str, error: type
) -> None:
    with pytest.raises(error) as raised:
        commands.parse_sbatch_output(["sbatch"], returncode, "", stderr, "login1")
    assert type(raised.value) is error
    assert "exit 1" in str(raised.value)


def test_sbatch_that_never_reached_the_controller_may_be_sent_again() -> None:
    stderr = (
        "sbatch: error: Batch job submission failed: "
        "Unable to contact slurm controller (connect failure)"
    )
    with pytest.raises(commands.NeverReached) as missed:
        commands.parse_sbatch_output(["sbatch"], 1, "", stderr, "login1")
    assert type(missed.value.error) is JobSubmissionError
    assert "Unable to contact slurm controller" in str(missed.value.error)


def test_sbatch_answers_its_id_or_says_where_it_is_missing() -> None:
    assert commands.parse_sbatch_output(["sbatch"], 0, "4242;c1\n", "", "h") == "4242"
    with pytest.raises(JobSubmissionError, match="sbatch not found on login1.*PATH"):
        commands.parse_sbatch_output(["sbatch"], 127, "", "sbatch: not found", "login1")
    with pytest.raises(SubmissionUncertainError, match="printed no job id"):
        commands.parse_sbatch_output(["sbatch"], 0, "hello\n", "", "h")


def test_describe_quotes() -> None:
    assert commands.describe_argv(["sbatch", "--job-name=a b"]) == "sbatch '--job-name=a b'"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sbatch_err_bad_partition", "Invalid partition name specified"),
        ("sbatch_err_bad_account", "Invalid account or account/partition combination specified"),
        ("sbatch_err_bad_qos", "Invalid qos specification"),
        ("sbatch_err_bad_time", "Invalid --time specification"),
        ("sbatch_err_time_over_limit", "Requested time limit is invalid"),
    ],
)
def test_scheduler_message_from_recordings(name: str, expected: str) -> None:
    assert recorded(name, "rc").strip() != "0"
    message = commands.scheduler_message(recorded(name, "err"))
    assert expected in message
    assert "sbatch: error:" not in message


def test_scheduler_message_prefers_errors_over_warnings() -> None:
    text = "sbatch: warning: something odd\nsbatch: error: Batch job submission failed: Nope\n"
    assert commands.scheduler_message(text) == "Batch job submission failed: Nope"
    assert commands.scheduler_message("plain words\n") == "plain words"


# -- squeue -------------------------------------------------------------------------------

# Real output of squeue_argv (Slurm 22.05.8, test cluster), exit 3 / kill -9 / array.
OUR_SQUEUE = """\
8|8|FAILED|NonZeroExitCode|2026-11-29T15:32:06|2026-11-29T15:32:06|768|
10|10|FAILED|JobLaunchFailure|2026-11-29T15:32:06|2026-11-29T15:32:06|9|
9_2|9|PENDING|JobArrayTaskLimit|N/A|N/A|0|
9_3|9|PENDING|JobArrayTaskLimit|N/A|N/A|0|
9_0|11|RUNNING|None|2026-11-29T15:32:06|NONE|0|
9_1|12|COMPLETED|None|2026-11-29T15:32:06|2026-11-29T15:32:08|0|
13_[5-6%2]|13|PENDING|JobArrayTaskLimit|N/A|N/A|0|
"""


def test_squeue_argv() -> None:
    argv = queries.squeue_argv(["5", "9_1"])
    assert argv[:4] == ["squeue", "--noheader", "--array", "--states=all"]
    assert "--jobs=5,9_1" in argv
    assert argv[-1].startswith("--Format=JobArrayID:0|,")
    assert "exit_code:0|" in argv[-1]


def test_squeue_argv_never_repeats_an_id() -> None:
    # squeue -j <one purged id> exits 1 ("Invalid job id specified"), read as not queued.
    assert "--jobs=6" in queries.squeue_argv(["6"])
    assert "--jobs=232_4" in queries.squeue_argv(["232_4", "232_4"])


def test_light_squeue_and_the_key() -> None:
    argv = queries.squeue_state_argv(["5", "40_1"])
    assert argv[:2] == ["squeue", "--only-job-state"] and "--jobs=5,40_1" in argv
    assert queries.parse_squeue_states("40_1|RUNNING\n5|PENDING\n") == {
        "40_1": "RUNNING",
        "5": "PENDING",
    }
    rows = "1543|hpcbridge:abc\n1544|(null)\n"
    assert queries.parse_key_rows(rows, "abc") == "1543"
    assert queries.parse_key_rows("1543_2|hpcbridge:abc\n", "abc") == "1543"
    assert queries.parse_key_rows(rows, "zzz") is None


def test_parse_our_squeue() -> None:
    found = status.parse_squeue(OUR_SQUEUE, zone=UTC)
    failed = found["8"]
    assert failed.state is JobState.FAILED and failed.exit_code == 3
    assert failed.reason == "NonZeroExitCode"
    assert failed.start_time == datetime(2026, 11, 29, 15, 32, 6, tzinfo=UTC)
    assert failed.end_time == failed.start_time
    assert found["10"].exit_code == 137
    assert found["9_2"].state is JobState.PENDING and found["9_2"].start_time is None
    assert found["9_2"].reason == "JobArrayTaskLimit" and found["9_2"].exit_code is None
    running = found["9_0"]
    assert running.state is JobState.RUNNING and running.end_time is None
    assert running.start_time is not None and running.reason == ""
    assert found["11"].state is JobState.RUNNING  # the task's own job id
    assert "9" not in found  # the array id itself is not one task
    assert found["9_1"].exit_code == 0
    assert {"13_5", "13_6"} <= set(found)
    assert "13" not in found


def test_parse_recorded_squeue_mixed() -> None:
    found = status.parse_squeue(recorded("squeue_mixed"), RECORDED_SQUEUE)
    assert found["9"].state is JobState.CANCELLED and found["9"].start_time is not None
    # cancelled before it ran: squeue keeps the pending reason and a start; it had none
    assert found["10"].state is JobState.CANCELLED and found["10"].start_time is None
    assert found["10"].reason == "cancelled while pending (BeginTime)"
    assert found["2"].state is JobState.COMPLETED
    assert found["7"].state is JobState.FAILED and found["7"].reason == "NonZeroExitCode"
    assert found["8"].state is JobState.FAILED
    assert found["7"].start_time is not None and found["7"].end_time is not None


def test_parse_recorded_squeue_with_header_line() -> None:
    with_header = status.parse_squeue(recorded("squeue_mixed_header"), RECORDED_SQUEUE)
    without = status.parse_squeue(recorded("squeue_mixed"), RECORDED_SQUEUE)
    assert with_header.keys() == without.keys()


def test_parse_recorded_pending_arrays() -> None:
    found = status.parse_squeue(recorded("squeue_array"), RECORDED_SQUEUE)
    for task in ("13_3", "13_4", "13_5", "13_6", "14_3", "14_4", "14_5"):
        assert found[task].state is JobState.PENDING, task
    assert found["13_3"].reason == "JobArrayTaskLimit"
    assert found["14_5"].reason == "Resources"
    assert found["13_1"].state is JobState.RUNNING
    expanded = status.parse_squeue(recorded("squeue_array_expanded"), RECORDED_SQUEUE)
    assert {key: value.state for key, value in expanded.items()} == {
        key: value.state for key, value in found.items()
    }


def test_parse_recorded_dependency_never_satisfied() -> None:
    found = status.parse_squeue(recorded("squeue_dependency_never"), RECORDED_SQUEUE)
    assert found["12"].state is JobState.PENDING
    assert found["12"].reason == "DependencyNeverSatisfied"


def test_recorded_purged_and_unknown_ids() -> None:
    for name in ("squeue_purged", "squeue_unknown", "squeue_purged_plain"):
        assert recorded(name, "rc").strip() == "1"
        assert commands.is_invalid_job_id(recorded(name, "err"))
    assert status.parse_squeue(recorded("squeue_purged"), RECORDED_SQUEUE) == {}


def test_parse_squeue_tolerates_blank_and_short_lines() -> None:
    assert status.parse_squeue("\n\nshort|line\n") == {}


# -- sacct ----------------------------------------------------------------------------------


def test_sacct_argv() -> None:
    argv = queries.sacct_argv(["5", "9_1"])
    assert argv[:4] == ["sacct", "-X", "-P", "--noheader"]
    assert "--jobs=5,9_1" in argv
    assert argv[-1] == "--format=JobID,JobIDRaw,State,ExitCode,Start,End,Reason"


def test_parse_recorded_sacct() -> None:
    found = status.parse_sacct(recorded("sacct_live"), RECORDED_SACCT)
    assert found["2"].state is JobState.COMPLETED and found["2"].exit_code == 0
    assert found["7"].state is JobState.FAILED and found["7"].exit_code == 3
    assert found["8"].exit_code == 137
    assert found["1"].state in (JobState.RUNNING, JobState.TIMEOUT)
    assert found["1"].end_time is None or found["1"].state is JobState.TIMEOUT
    cancelled = [status for status in found.values() if status.state is JobState.CANCELLED]
    assert cancelled and all(status.native_state.startswith("CANCELLED") for status in cancelled)


def test_parse_recorded_sacct_of_jobs_cancelled_before_and_after_they_ran() -> None:
    found = status.parse_sacct(recorded("sacct_cancelled"), RECORDED_SACCT)
    for ran in ("9", "11"):  # Slurm: 0:0 and a start (9 cancelled in the second it started)
        assert found[ran].start_time is not None and found[ran].exit_code is None
        assert found[ran].reason == "cancelled"
    for never in ("10", "12"):  # Slurm: 0:0, no start, the pending reason
        assert found[never].exit_code is None and found[never].start_time is None
        assert found[never].reason.startswith("cancelled while pending (")
    assert found["12"].reason == "cancelled while pending (Dependency)"


def test_a_running_job_has_no_reason_even_while_slurm_completes_it() -> None:
    # squeue while a failing script's job completes (the driver's own --Format fields)
    found = status.parse_squeue(recorded("squeue_completing"))["1609"]
    assert found.state is JobState.RUNNING and found.native_state == "COMPLETING"
    assert found.reason == ""


def test_parse_sacct_our_format() -> None:
    text = (
        "5|5|CANCELLED by 0|0:15|2026-11-29T15:32:57|2026-11-29T15:33:08|None\n"
        "6|6|TIMEOUT|0:15|2026-11-29T15:32:57|2026-11-29T15:34:08|None\n"
        "9_[2-3]|9|PENDING|0:0|Unknown|Unknown|JobArrayTaskLimit\n"
        "9_0|11|COMPLETED|0:0|2026-11-29T15:32:57|2026-11-29T15:32:58|None\n"
        "9_1|12|FAILED|4:0|2026-11-29T15:32:57|2026-11-29T15:32:58|None\n"
    )
    found = status.parse_sacct(text, zone=UTC)
    assert found["5"].state is JobState.CANCELLED and found["5"].native_state == "CANCELLED by 0"
    assert found["5"].exit_code == 143
    assert found["6"].state is JobState.TIMEOUT
    assert found["9_2"].state is JobState.PENDING and found["9_3"].reason == "JobArrayTaskLimit"
    assert found["9_1"].exit_code == 4 and found["12"].exit_code == 4
    assert found["9_0"].end_time == datetime(2026, 11, 29, 15, 32, 58, tzinfo=UTC)


def test_later_sacct_rows_win() -> None:
    text = "5|5|REQUEUED|0:0|Unknown|Unknown|None\n5|5|COMPLETED|0:0|Unknown|Unknown|None\n"
    assert status.parse_sacct(text)["5"].state is JobState.COMPLETED


def test_accounting_disabled_message() -> None:
    assert queries.accounting_disabled("Slurm accounting storage is disabled")
    assert not queries.accounting_disabled("sacct: error: Problem talking to the database")


@pytest.mark.parametrize(
    ("message", "ended"),
    [
        ("Kill job error on job id 5: Invalid job id specified", True),
        ("Kill job error on job id 5: Job/step already completing or completed", True),
        ("Kill job error on job id 5: Unable to contact slurm controller", False),
        ("Access/permission denied", False),
    ],
)
def test_job_already_ended(message: str, ended: bool) -> None:
    assert commands.job_already_ended(message) is ended


# -- scancel, scontrol ---------------------------------------------------------------------


def test_scancel_argv() -> None:
    assert commands.scancel_argv(["5", "9_1", "5"]) == ["scancel", "5", "9_1"]


def test_recorded_scancel_is_silent_for_finished_and_unknown() -> None:
    for name in ("scancel_finished", "scancel_purged", "scancel_unknown"):
        assert recorded(name, "rc").strip() == "0"
        assert recorded(name, "err").strip() == ""


def test_parse_recorded_scontrol_show_job() -> None:
    fields = slurm_cluster.parse_scontrol_record(recorded("scontrol_show_job_running_oneliner"))
    assert fields["JobState"] == "RUNNING"
    assert fields["StdOut"].endswith("slurm-11.out")
    assert slurm_cluster.output_of_record(fields) == fields["StdOut"]
    assert slurm_cluster.output_of_record({"StdOut": "(null)"}) is None
    multi = slurm_cluster.parse_scontrol_record(recorded("scontrol_show_job_completed"))
    assert multi["ExitCode"] == "3:0" and multi["JobState"] == "FAILED"


def test_parse_recorded_scontrol_config() -> None:
    config = slurm_cluster.parse_scontrol_config(recorded("scontrol_show_config"))
    assert slurm_cluster.max_array_size(config) == 1001
    assert config["MinJobAge"] == "10 sec"
    assert slurm_cluster.max_array_size({}) == 1001


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("slurm-wlm 22.05.8\n", (22, 5, 8)),
        ("slurm 23.11.1", (23, 11, 1)),
        ("24.5", (24, 5)),
        ("none", None),
    ],
)
def test_parse_version(text: str, version: object) -> None:
    assert slurm_cluster.parse_version(text) == version


def test_recorded_versions() -> None:
    assert slurm_cluster.parse_version(recorded("sbatch_version"))[:2] == (22, 5)
    assert slurm_cluster.format_version((22, 5, 8)) == "22.05.8"


def test_output_for_task() -> None:
    assert commands.output_for_task("/d/slurm-%j.out", "12") == "/d/slurm-12.out"
    assert commands.output_for_task("/d/slurm-%A_%a.out", "9_3", "9", "3") == "/d/slurm-9_3.out"
    assert commands.output_for_task("/d/%x-%j-100%%.log", "5", job_name="n") == "/d/n-5-100%.log"


def test_array_output_names_tasks_by_array_and_index() -> None:
    # %j is a task's own job id, unknown until it starts; %A_%a is known at once.
    assert commands.array_output("/d/slurm-%j.out") == "/d/slurm-%A_%a.out"
    assert commands.array_output("/d/100%%j-%x.log") == "/d/100%%j-%x.log"
    assert commands.array_output("/d/fixed.log") == "/d/fixed.log"


def test_format_slurm_time_never_rounds_down() -> None:
    assert "--time=0:00:02" in commands.sbatch_argv(spec(time="1.5s"))
    assert math.isinf(Resources.from_mapping({"time": "unlimited"}).time or 0)


# -- the driver's own command lines, recorded (tests/data/slurm/driver/record.sh) ----------

DRIVER = DATA / "driver"


def driver_jobs() -> dict:
    path = DRIVER / "jobs.txt"
    if not path.exists():
        pytest.skip("driver recordings not present")
    return dict(line.split("=", 1) for line in path.read_text().split())


def driver_recording(name: str) -> str:
    assert (DRIVER / f"{name}.rc").read_text().strip() == "0"
    return (DRIVER / f"{name}.txt").read_text()


def test_recorded_commands_are_the_builders() -> None:
    jobs = driver_jobs()
    ids = [
        jobs[role]
        for role in ("ok", "exit3", "killed", "running", "cancelled", "dependent", "array")
    ]
    import shlex

    assert shlex.split((DRIVER / "squeue_driver.cmd").read_text()) == queries.squeue_argv(ids)
    assert shlex.split((DRIVER / "sacct_driver.cmd").read_text()) == queries.sacct_argv(ids)


@pytest.mark.parametrize("name", ["squeue_driver", "squeue_driver_grouped"])
def test_parse_recorded_driver_squeue(name: str) -> None:
    jobs = driver_jobs()
    found = status.parse_squeue(driver_recording(name))
    assert found[jobs["ok"]].state is JobState.COMPLETED and found[jobs["ok"]].exit_code == 0
    assert found[jobs["exit3"]].state is JobState.FAILED and found[jobs["exit3"]].exit_code == 3
    assert found[jobs["killed"]].exit_code == 137
    assert found[jobs["killed"]].reason == "JobLaunchFailure"
    assert found[jobs["running"]].state is JobState.RUNNING
    assert found[jobs["running"]].end_time is None
    assert found[jobs["cancelled"]].state is JobState.CANCELLED
    dependent = found[jobs["dependent"]]
    assert dependent.state is JobState.PENDING and dependent.reason == "Dependency"
    array = jobs["array"]
    for index in range(6):
        assert f"{array}_{index}" in found
    assert found[f"{array}_0"].state is JobState.RUNNING
    assert found[f"{array}_5"].state is JobState.PENDING
    assert found[f"{array}_5"].reason == "JobArrayTaskLimit"
    assert array not in found


def test_parse_recorded_driver_sacct() -> None:
    jobs = driver_jobs()
    found = status.parse_sacct(driver_recording("sacct_driver"))
    assert found[jobs["ok"]].state is JobState.COMPLETED
    assert found[jobs["exit3"]].exit_code == 3
    assert found[jobs["killed"]].exit_code == 137
    cancelled = found[jobs["cancelled"]]
    assert cancelled.state is JobState.CANCELLED and cancelled.native_state == "CANCELLED by 0"
    assert found[jobs["dependent"]].reason == "Dependency"
    array = jobs["array"]
    assert {f"{array}_{index}" for index in range(6)} <= set(found)
    assert found[f"{array}_3"].state is JobState.PENDING


def test_recorded_unknown_ids_are_silent() -> None:
    assert driver_recording("squeue_driver_unknown_twice") == ""
    assert driver_recording("sacct_driver_unknown") == ""
