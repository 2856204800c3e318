"""Pure Slurm builders and parsers, against outputs recorded from Slurm 22.05."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcbridge.model import JobState
from hpcbridge.resources import Resources
from hpcbridge.schedulers.slurm import commands

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


# -- state map --------------------------------------------------------------


@pytest.mark.parametrize(
    ("native", "state"),
    [
        ("PENDING", JobState.PENDING),
        ("CONFIGURING", JobState.PENDING),
        ("REQUEUED", JobState.PENDING),
        ("REQUEUE_HOLD", JobState.PENDING),
        ("REQUEUE_FED", JobState.PENDING),
        ("RESV_DEL_HOLD", JobState.PENDING),
        ("RUNNING", JobState.RUNNING),
        ("COMPLETING", JobState.RUNNING),
        ("STAGE_OUT", JobState.RUNNING),
        ("SIGNALING", JobState.RUNNING),
        ("SUSPENDED", JobState.RUNNING),
        ("STOPPED", JobState.RUNNING),
        ("RESIZING", JobState.RUNNING),
        ("COMPLETED", JobState.COMPLETED),
        ("FAILED", JobState.FAILED),
        ("NODE_FAIL", JobState.FAILED),
        ("BOOT_FAIL", JobState.FAILED),
        ("OUT_OF_MEMORY", JobState.FAILED),
        ("SPECIAL_EXIT", JobState.FAILED),
        ("LAUNCH_FAILED", JobState.FAILED),
        ("PREEMPTED", JobState.FAILED),
        ("CANCELLED", JobState.CANCELLED),
        ("CANCELLED by 0", JobState.CANCELLED),
        ("CANCELLED by 1000", JobState.CANCELLED),
        ("CANCELLED+", JobState.CANCELLED),
        ("REVOKED", JobState.CANCELLED),
        ("TIMEOUT", JobState.TIMEOUT),
        ("DEADLINE", JobState.TIMEOUT),
        ("CD", JobState.COMPLETED),
        ("PD", JobState.PENDING),
        ("TO", JobState.TIMEOUT),
        ("running", JobState.RUNNING),
    ],
)
def test_state_map(native: str, state: JobState) -> None:
    assert commands.map_state(native) is state


@pytest.mark.parametrize("native", ["", "   ", "FROBNICATED", "UPDATE_DB", "N/A"])
def test_unknown_states_stay_unknown(native: str) -> None:
    assert commands.map_state(native) is JobState.UNKNOWN


@given(st.text(max_size=30))
def test_state_map_is_total(native: str) -> None:
    assert isinstance(commands.map_state(native), JobState)


def test_every_long_state_has_a_compact_code_mapping_to_it() -> None:
    for long_name in commands.COMPACT_STATES.values():
        assert long_name in commands.STATE_MAP


# -- exit codes, times ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("0:0", 0),
        ("3:0", 3),
        ("0:9", 137),
        ("0:15", 143),
        ("1:15", 143),
        ("255:0", 255),
        ("", None),
        ("x", None),
        ("7", 7),
    ],
)
def test_parse_exit_code(text: str, code: object) -> None:
    assert commands.parse_exit_code(text) == code


@pytest.mark.parametrize(
    ("text", "code"),
    [("0", 0), ("768", 3), ("9", 137), ("15", 143), ("65280", 255), ("", None), ("3:0", 3)],
)
def test_parse_wait_status(text: str, code: object) -> None:
    # squeue -O exit_code prints the raw wait(2) status: 768 for "exit 3".
    assert commands.parse_wait_status(text) == code


@given(st.integers(min_value=0, max_value=255), st.integers(min_value=0, max_value=64))
def test_wait_status_and_exit_code_agree(code: int, signal: int) -> None:
    status = signal if signal else code << 8
    expected = 128 + signal if signal else code
    assert commands.parse_wait_status(str(status)) == expected
    assert commands.parse_exit_code(f"{0 if signal else code}:{signal}") == expected


@pytest.mark.parametrize("text", ["Unknown", "None", "N/A", "NONE", "", "(null)", "garbage"])
def test_parse_time_nothing(text: str) -> None:
    assert commands.parse_time(text) is None


def test_parse_time_is_local_and_aware() -> None:
    moment = commands.parse_time("2026-11-29T15:32:57")
    assert moment is not None and moment.tzinfo is not None
    assert moment.replace(tzinfo=None) == datetime(2026, 11, 29, 15, 32, 57)
    assert moment == datetime(2026, 11, 29, 15, 32, 57).astimezone()


def test_parse_time_in_a_given_zone() -> None:
    zone = timezone(timedelta(hours=2))
    moment = commands.parse_time("2026-11-29T15:32:57", zone)
    assert moment == datetime(2026, 11, 29, 13, 32, 57, tzinfo=UTC)


# -- ids and arrays -------------------------------------------------------------------


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


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("8", ["8"]),
        ("13_1", ["13_1"]),
        ("13_[3-6%2]", ["13_3", "13_4", "13_5", "13_6"]),
        ("14_[3-5]", ["14_3", "14_4", "14_5"]),
        ("19_[1,3,5-6]", ["19_1", "19_3", "19_5", "19_6"]),
        ("20_[0-8:4]", ["20_0", "20_4", "20_8"]),
        ("2;hpcbridge", ["2"]),
        ("", []),
    ],
)
def test_expand_job_id(text: str, ids: list) -> None:
    assert commands.expand_job_id(text) == ids


@given(st.lists(st.integers(min_value=0, max_value=5000), min_size=1, max_size=40, unique=True))
def test_expand_array_spec_roundtrip(indices: list) -> None:
    indices = sorted(indices)
    text = ",".join(str(index) for index in indices)
    assert commands.expand_array_spec(f"[{text}%3]") == indices


@given(st.integers(0, 1000), st.integers(0, 1000))
def test_expand_range(first: int, length: int) -> None:
    assert commands.expand_array_spec(f"{first}-{first + length}") == list(
        range(first, first + length + 1)
    )


def test_malformed_spec_expands_to_nothing() -> None:
    assert commands.expand_array_spec("[a-b]") == []
    assert commands.expand_array_spec("5-3") == []


def test_split_job_id() -> None:
    assert commands.split_job_id("123_4") == ("123", 4)
    assert commands.split_job_id("123") == ("123", None)


def test_job_list_dedups_and_collapses_big_arrays() -> None:
    ids = [f"9_{index}" for index in range(200)] + ["5", "5", "7_1"]
    assert commands.job_list(ids) == ["9", "5", "7_1"]
    assert commands.job_list(["9_1", "9_2"]) == ["9_1", "9_2"]


# -- sbatch -----------------------------------------------------------------------------


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
    argv = commands.squeue_argv(["5", "9_1"])
    assert argv[:4] == ["squeue", "--noheader", "--array", "--states=all"]
    assert "--jobs=5,9_1" in argv
    assert argv[-1].startswith("--Format=JobArrayID:0|,")
    assert "exit_code:0|" in argv[-1]


def test_squeue_argv_single_id_passed_twice() -> None:
    # squeue -j <one purged id> exits 1 ("Invalid job id specified").
    assert "--jobs=6,6" in commands.squeue_argv(["6"])


def test_parse_our_squeue() -> None:
    found = commands.parse_squeue(OUR_SQUEUE, zone=UTC)
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
    found = commands.parse_squeue(recorded("squeue_mixed"), RECORDED_SQUEUE)
    assert found["9"].state is JobState.CANCELLED
    assert found["10"].state is JobState.CANCELLED and found["10"].reason == "BeginTime"
    assert found["2"].state is JobState.COMPLETED
    assert found["7"].state is JobState.FAILED and found["7"].reason == "NonZeroExitCode"
    assert found["8"].state is JobState.FAILED
    assert found["7"].start_time is not None and found["7"].end_time is not None


def test_parse_recorded_squeue_with_header_line() -> None:
    with_header = commands.parse_squeue(recorded("squeue_mixed_header"), RECORDED_SQUEUE)
    without = commands.parse_squeue(recorded("squeue_mixed"), RECORDED_SQUEUE)
    assert with_header.keys() == without.keys()


def test_parse_recorded_pending_arrays() -> None:
    found = commands.parse_squeue(recorded("squeue_array"), RECORDED_SQUEUE)
    for task in ("13_3", "13_4", "13_5", "13_6", "14_3", "14_4", "14_5"):
        assert found[task].state is JobState.PENDING, task
    assert found["13_3"].reason == "JobArrayTaskLimit"
    assert found["14_5"].reason == "Resources"
    assert found["13_1"].state is JobState.RUNNING
    expanded = commands.parse_squeue(recorded("squeue_array_expanded"), RECORDED_SQUEUE)
    assert {key: value.state for key, value in expanded.items()} == {
        key: value.state for key, value in found.items()
    }


def test_parse_recorded_dependency_never_satisfied() -> None:
    found = commands.parse_squeue(recorded("squeue_dependency_never"), RECORDED_SQUEUE)
    assert found["12"].state is JobState.PENDING
    assert found["12"].reason == "DependencyNeverSatisfied"


def test_recorded_purged_and_unknown_ids() -> None:
    for name in ("squeue_purged", "squeue_unknown", "squeue_purged_plain"):
        assert recorded(name, "rc").strip() == "1"
        assert commands.is_invalid_job_id(recorded(name, "err"))
    assert commands.parse_squeue(recorded("squeue_purged"), RECORDED_SQUEUE) == {}


def test_parse_squeue_tolerates_blank_and_short_lines() -> None:
    assert commands.parse_squeue("\n\nshort|line\n") == {}


# -- sacct ----------------------------------------------------------------------------------


def test_sacct_argv() -> None:
    argv = commands.sacct_argv(["5", "9_1"])
    assert argv[:4] == ["sacct", "-X", "-P", "--noheader"]
    assert "--jobs=5,9_1" in argv
    assert argv[-1] == "--format=JobID,JobIDRaw,State,ExitCode,Start,End,Reason"


def test_parse_recorded_sacct() -> None:
    found = commands.parse_sacct(recorded("sacct_live"), RECORDED_SACCT)
    assert found["2"].state is JobState.COMPLETED and found["2"].exit_code == 0
    assert found["7"].state is JobState.FAILED and found["7"].exit_code == 3
    assert found["8"].exit_code == 137
    assert found["1"].state in (JobState.RUNNING, JobState.TIMEOUT)
    assert found["1"].end_time is None or found["1"].state is JobState.TIMEOUT
    cancelled = [status for status in found.values() if status.state is JobState.CANCELLED]
    assert cancelled and all(status.native_state.startswith("CANCELLED") for status in cancelled)


def test_parse_sacct_our_format() -> None:
    text = (
        "5|5|CANCELLED by 0|0:15|2026-11-29T15:32:57|2026-11-29T15:33:08|None\n"
        "6|6|TIMEOUT|0:15|2026-11-29T15:32:57|2026-11-29T15:34:08|None\n"
        "9_[2-3]|9|PENDING|0:0|Unknown|Unknown|JobArrayTaskLimit\n"
        "9_0|11|COMPLETED|0:0|2026-11-29T15:32:57|2026-11-29T15:32:58|None\n"
        "9_1|12|FAILED|4:0|2026-11-29T15:32:57|2026-11-29T15:32:58|None\n"
    )
    found = commands.parse_sacct(text, zone=UTC)
    assert found["5"].state is JobState.CANCELLED and found["5"].native_state == "CANCELLED by 0"
    assert found["5"].exit_code == 143
    assert found["6"].state is JobState.TIMEOUT
    assert found["9_2"].state is JobState.PENDING and found["9_3"].reason == "JobArrayTaskLimit"
    assert found["9_1"].exit_code == 4 and found["12"].exit_code == 4
    assert found["9_0"].end_time == datetime(2026, 11, 29, 15, 32, 58, tzinfo=UTC)


def test_later_sacct_rows_win() -> None:
    text = "5|5|REQUEUED|0:0|Unknown|Unknown|None\n5|5|COMPLETED|0:0|Unknown|Unknown|None\n"
    assert commands.parse_sacct(text)["5"].state is JobState.COMPLETED


def test_accounting_disabled_message() -> None:
    assert commands.accounting_disabled("Slurm accounting storage is disabled")
    assert not commands.accounting_disabled("sacct: error: Problem talking to the database")


# -- scancel, scontrol ---------------------------------------------------------------------


def test_scancel_argv() -> None:
    assert commands.scancel_argv(["5", "9_1", "5"]) == ["scancel", "5", "9_1"]


def test_recorded_scancel_is_silent_for_finished_and_unknown() -> None:
    for name in ("scancel_finished", "scancel_purged", "scancel_unknown"):
        assert recorded(name, "rc").strip() == "0"
        assert recorded(name, "err").strip() == ""


def test_parse_recorded_scontrol_show_job() -> None:
    fields = commands.parse_scontrol_record(recorded("scontrol_show_job_running_oneliner"))
    assert fields["JobState"] == "RUNNING"
    assert fields["StdOut"].endswith("slurm-11.out")
    multi = commands.parse_scontrol_record(recorded("scontrol_show_job_completed"))
    assert multi["ExitCode"] == "3:0" and multi["JobState"] == "FAILED"


def test_parse_recorded_scontrol_config() -> None:
    config = commands.parse_scontrol_config(recorded("scontrol_show_config"))
    assert commands.max_array_size(config) == 1001
    assert config["MinJobAge"] == "10 sec"
    assert commands.max_array_size({}) == 1001


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
    assert commands.parse_version(text) == version


def test_recorded_versions() -> None:
    assert commands.parse_version(recorded("sbatch_version"))[:2] == (22, 5)
    assert commands.format_version((22, 5, 8)) == "22.05.8"


def test_output_for_task() -> None:
    assert commands.output_for_task("/d/slurm-%j.out", "12") == "/d/slurm-12.out"
    assert commands.output_for_task("/d/slurm-%A_%a.out", "9_3", "9", "3") == "/d/slurm-9_3.out"
    assert commands.output_for_task("/d/%x-%j-100%%.log", "5", job_name="n") == "/d/n-5-100%.log"


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

    assert shlex.split((DRIVER / "squeue_driver.cmd").read_text()) == commands.squeue_argv(ids)
    assert shlex.split((DRIVER / "sacct_driver.cmd").read_text()) == commands.sacct_argv(ids)


@pytest.mark.parametrize("name", ["squeue_driver", "squeue_driver_grouped"])
def test_parse_recorded_driver_squeue(name: str) -> None:
    jobs = driver_jobs()
    found = commands.parse_squeue(driver_recording(name))
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
    found = commands.parse_sacct(driver_recording("sacct_driver"))
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
