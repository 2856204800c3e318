"""The REST driver's pure half: the requests slurmrestd is sent (slurm/rest_requests.py)
and its answers read (slurm/rest_answers.py), against answers recorded from a real
slurmrestd 25.11 for each data parser version (tests/data/slurm-rest/)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict

import pytest

from hpcbridge.engine.driver import Again, NotAskedNow
from hpcbridge.errors import (
    JobSubmissionError,
    ResourceError,
    SchedulerAdapterError,
    SchedulerUnavailableError,
    SubmissionUncertainError,
)
from hpcbridge.model import CANCELLED_WHILE_PENDING, JobState
from hpcbridge.resources import Resources
from hpcbridge.schedulers.slurm import rest_answers as answers
from hpcbridge.schedulers.slurm import rest_requests as requests
from hpcbridge.schedulers.slurm.commands import SubmitSpec
from hpcbridge.schedulers.slurm.queries import NoHistory

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm-rest"
VERSIONS = ("v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44")
IDS: Dict[str, str] = json.loads((DATA / "openapi" / "jobs.json").read_text())["ids"]


def recorded(version: str, name: str) -> answers.Answer:
    record = json.loads((DATA / version / f"{name}.json").read_text())
    return answers.Answer(record["status"], record["answer"])


def request_of(version: str, name: str) -> Dict[str, Any]:
    return json.loads((DATA / version / f"{name}.json").read_text())["request"]


def spec(**resources: Any) -> SubmitSpec:
    return SubmitSpec(
        wrapper_path="/j/.hpcbridge/t.sh",
        workdir="/j",
        output="/j/slurm-%j.out",
        job_name="run.sh",
        resources=Resources.from_mapping(resources),
        key="tok",
    )


# -- the requests ------------------------------------------------------------------------


def test_job_description_every_typed_key() -> None:
    begin = datetime(2027, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    described = requests.job_description(
        spec(
            partition="debug",
            qos="fast",
            account="hpcb",
            constraint="cpu",
            reservation="r1",
            time="1:30:01",
            nodes=2,
            ntasks=4,
            cpus_per_task=2,
            mem="1536M",
            gpus=2,
            gpus_per_node=1,
            gpus_per_task=1,
            gres="shard:2",
            exclusive=True,
            signal="B:USR1@60",
            requeue=False,
            begin=begin,
        ),
        "#!/bin/sh\n",
        {"PATH": "/bin"},
    )
    assert described == {
        "script": "#!/bin/sh\n",
        "environment": ["PATH=/bin"],
        "current_working_directory": "/j",
        "standard_output": "/j/slurm-%j.out",
        "name": "run.sh",
        "comment": "hpcbridge:tok",
        "partition": "debug",
        "qos": "fast",
        "account": "hpcb",
        "constraints": "cpu",
        "reservation": "r1",
        "time_limit": {"set": True, "infinite": False, "number": 91},  # minutes, up
        "nodes": "2",
        "tasks": 4,
        "cpus_per_task": 2,
        "memory_per_node": {"set": True, "infinite": False, "number": 1536},
        "tres_per_job": "gres/gpu:2",
        "tres_per_node": "gres/shard:2,gres/gpu:1",
        "tres_per_task": "gres/gpu:1",
        "shared": ["none"],
        "kill_warning_signal": "USR1",
        "kill_warning_delay": {"set": True, "infinite": False, "number": 60},
        "kill_warning_flags": ["BATCH_JOB"],
        "requeue": False,
        "begin_time": {"set": True, "infinite": False, "number": int(begin.timestamp())},
    }


def test_job_description_of_a_dependent_array_and_of_one_task() -> None:
    base = spec(time="UNLIMITED")
    dependent = SubmitSpec(**{**base.__dict__, "depends_on": ("5", "9_1"), "array": "0-9"})
    described = requests.job_description(dependent, "s", {"A": "1"})
    assert described["dependency"] == "afterok:5:9_1"
    assert described["flags"] == ["KILL_INVALID_DEPENDENCY"]
    assert described["array"] == "0-9"
    assert described["time_limit"] == {"set": True, "infinite": True, "number": 0}
    assert "argv" not in described
    one = SubmitSpec(**{**base.__dict__, "task_index": 3})
    # the recorded argv_task job printed "args:1:7": argv[0] is the script's name
    assert requests.job_description(one, "s", {"A": "1"})["argv"] == ["/j/.hpcbridge/t.sh", "3"]
    output = json.loads((DATA / "openapi" / "argv_task_output.json").read_text())
    assert output["output"] == "args:1:7\n"


def test_native_options_go_into_the_fields_slurm_has() -> None:
    given = ["--licenses=a:1", "--hold", "--exclude=n1,n2", "--ntasks-per-node=2", "--distr=block"]
    native = spec(native={"slurm": given})
    described = requests.job_description(native, "s", {"A": "1"})
    assert {key: described[key] for key in requests.native_fields(native.resources)} == {
        "licenses": "a:1",
        "hold": True,
        "excluded_nodes": ["n1", "n2"],
        "tasks_per_node": 2,
        "distribution": "block",
    }
    # every field named is one of every version's job description (the recorded schemas)
    fields = json.loads((DATA / "openapi" / "job_desc_fields.json").read_text())
    for version in VERSIONS:
        assert {field for field, _ in requests.NATIVE_FIELDS.values()} <= set(fields[version])


@pytest.mark.parametrize(
    "option", ["--x11", "--gpu-bind=closest", "--hold=yes", "--nice", "--nice=low", "-H"]
)
def test_native_options_without_a_field_are_refused(option: str) -> None:
    with pytest.raises(ResourceError, match="HPCBRIDGE_SLURM_DRIVER=cli") as caught:
        requests.native_fields(Resources.from_mapping({"native": {"slurm": [option]}}))
    assert caught.value.key == "native" and repr(option) in str(caught.value)


def test_the_jobs_environment_is_sbatchs_without_the_rest_token() -> None:
    """srun in the job: SLURM_JWT would make it authenticate with the token, which slurmd
    refuses; its tasks per node come from the environment sbatch writes, not slurmctld."""
    given = {"PATH": "/bin", "SLURM_JWT": "secret", "SLURM_NTASKS_PER_NODE": "9"}
    plain = requests.job_description(spec(nodes=2), "s", given)
    assert plain["environment"] == ["PATH=/bin", "SLURM_NTASKS_PER_NODE=9"]  # as inherited
    per_node = spec(nodes=2, native={"slurm": ["--ntasks-per-node=2"]})
    described = requests.job_description(per_node, "s", given)
    assert described["environment"] == ["PATH=/bin", "SLURM_NTASKS_PER_NODE=2"]
    assert (described["tasks_per_node"], described["nodes"]) == (2, "2")


def test_a_job_needs_an_environment() -> None:
    with pytest.raises(JobSubmissionError, match="environment"):
        requests.job_description(spec(), "s", {})


@pytest.mark.parametrize("version", VERSIONS)
def test_the_cap_on_queued_jobs_by_sacctmgrs_rule(version: str) -> None:
    # root: account hpcb (no cap, QOS normal) and capped (MaxSubmitJobs 37, GrpSubmitJobs
    # 43); QOS fast: MaxSubmitJobsPerUser 29, GrpSubmitJobs 31 (not v0.0.41's)
    assoc, qos = recorded(version, "db_associations"), recorded(version, "db_qos")
    assert answers.caps_answer(assoc, qos, None) == 37
    assert answers.caps_answer(assoc, qos, "capped") == 37
    assert answers.caps_answer(assoc, qos, "hpcb") is None  # normal has no cap
    record = json.loads((DATA / version / "db_associations.json").read_text())["answer"]
    for item in record["associations"]:
        if item["account"] == "hpcb":
            item["default"]["qos"] = "fast"
    fast = answers.caps_answer(answers.Answer(200, record), qos, "hpcb")
    assert fast == 29
    assert answers.caps_answer(answers.Answer(404, "no slurmdbd"), qos, None) is None
    assert answers.config_answer(assoc) == {"ClusterName": "hpcbrcon"}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_jobs_output_by_id(version: str) -> None:
    found = answers.output_answer(recorded(version, "job_running_live"))
    assert found == "/tmp/h-rest-jobs/running-81.out"  # v0.0.44's standard_output: %j
    assert answers.output_answer(recorded(version, "job_unknown_live")) is None


def test_the_recorded_submissions_are_the_builders_requests() -> None:
    """What the recorder sent (and slurmrestd took) has the builders' paths and fields."""
    for version in VERSIONS:
        sent = request_of(version, "submit_completed")
        built = requests.submit(version, {"name": "x"})
        assert (sent["method"], sent["path"]) == (built.method, built.path)
        assert recorded(version, "submit_completed").status == 200
    sent = request_of("v0.0.44", "submit_resources")["body"]["job"]
    described = requests.job_description(
        spec(
            partition="short",
            qos="fast",
            account="hpcb",
            ntasks=2,
            cpus_per_task=1,
            mem="100M",
            requeue=False,
            signal="USR1@30",
            exclusive=True,
        ),
        "s",
        {"A": "1"},
    )
    per_job = {
        "script",
        "environment",
        "name",
        "comment",
        "current_working_directory",
        "standard_output",
    }
    compared = (set(sent) & set(described)) - per_job
    assert {key: sent[key] for key in compared} == {key: described[key] for key in compared}


def test_queries_name_each_id_once_and_never_as_a_csv() -> None:
    states = requests.job_states("v0.0.44", ["5", "7_1", "5"])
    assert states.target() == "/slurm/v0.0.44/jobs/state/?job_id=5&job_id=7_1"
    history = requests.history("v0.0.41", ["7_1", "7_2", "9"])
    sacct_x = "skip_steps=true&disable_truncate_usage_time=true"  # sacct -X's flags
    assert history.target() == f"/slurmdb/v0.0.41/jobs/?step=7&step=9&{sacct_x}"
    assert recorded("v0.0.44", "jobs_state_csv").status == 500  # what a CSV list gets
    for version in VERSIONS:
        assert recorded(version, "jobs_state_live").status == 200
        assert recorded(version, "db_jobs").status == 200


def test_full_records_of_few_jobs_one_each_else_every_job() -> None:
    few = requests.full_records("v0.0.44", ["7_1", "7_2"])
    assert [r.describe() for r in few] == ["GET /slurm/v0.0.44/job/7"]
    many = ["100", "101"]
    assert [r.describe() for r in requests.full_records("v0.0.44", many)] == [
        "GET /slurm/v0.0.44/jobs/"
    ]
    assert requests.full_records("v0.0.44", []) == []


def test_cancel_requests() -> None:
    assert requests.cancel("v0.0.44", "7_1").describe() == "DELETE /slurm/v0.0.44/job/7_1"


def test_megabytes() -> None:
    assert [requests.megabytes(m) for m in ("4G", "1536M", "100K", "2048K", "1T", "7")] == [
        4096,
        1536,
        1,
        2,
        1048576,
        7,
    ]
    assert requests.number(math.inf) == {"set": True, "infinite": True, "number": 0}


# -- the answers, the same for every version ---------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_live_states_of_every_kind_of_job(version: str) -> None:
    ids = IDS
    array, throttled = ids["array"], ids["array_throttled"]
    wanted = [
        ids["completed"],
        ids["failed_exit3"],
        ids["failed_sigkill"],
        ids["running"],
        ids["pending_begin"],
        *[f"{array}_{task}" for task in range(4)],
        f"{throttled}_0",
        f"{throttled}_3",
        "999999",
    ]
    found = answers.live_answer(recorded(version, "jobs_live"), wanted)
    states = {job_id: (s.state, s.exit_code, s.reason) for job_id, s in found.items()}
    assert states == {
        ids["completed"]: (JobState.COMPLETED, 0, ""),
        ids["failed_exit3"]: (JobState.FAILED, 3, "NonZeroExitCode"),
        ids["failed_sigkill"]: (JobState.FAILED, 137, "RaisedSignal"),
        ids["running"]: (JobState.RUNNING, None, ""),
        ids["pending_begin"]: (JobState.PENDING, None, "BeginTime"),
        f"{array}_0": (JobState.COMPLETED, 0, ""),
        f"{array}_1": (JobState.COMPLETED, 0, ""),
        f"{array}_2": (JobState.FAILED, 2, "NonZeroExitCode"),
        f"{array}_3": (JobState.COMPLETED, 0, ""),
        f"{throttled}_0": (JobState.RUNNING, None, ""),
        f"{throttled}_3": (JobState.PENDING, None, "JobArrayTaskLimit"),
    }
    assert found[ids["running"]].start_time is not None
    assert found[ids["running"]].end_time is None
    assert found[ids["pending_begin"]].start_time is None  # a forecast, not a start
    # a running task also answers to its own job id
    own = found[f"{throttled}_0"].extra["raw_id"]
    assert own != throttled
    assert answers.live_answer(recorded(version, "jobs_live"), [own])[own].state is JobState.RUNNING


@pytest.mark.parametrize("version", VERSIONS)
def test_cancelled_and_ended(version: str) -> None:
    ids = IDS
    asked = [ids["running"], ids["pending_begin"], ids["signalled"], ids["dependency_never"]]
    cancelled = answers.live_answer(recorded(version, "jobs_cancelled"), asked)
    assert cancelled[ids["running"]].state is JobState.CANCELLED
    assert cancelled[ids["pending_begin"]].reason == f"{CANCELLED_WHILE_PENDING} (BeginTime)"
    assert cancelled[ids["signalled"]].state is JobState.FAILED
    assert cancelled[ids["signalled"]].exit_code == 7  # its trap of USR2, sent to the batch shell
    assert cancelled[ids["dependency_never"]].state is JobState.CANCELLED
    ended = answers.live_answer(recorded(version, "jobs_ended"), [ids["timeout"]])
    assert ended[ids["timeout"]].state is JobState.TIMEOUT


def test_every_version_reads_the_same() -> None:
    wanted = list(IDS.values())
    for snapshot in ("jobs_live", "jobs_cancelled", "jobs_ended"):
        read = [answers.live_answer(recorded(v, snapshot), wanted) for v in VERSIONS]
        assert all(found == read[0] for found in read[1:]), snapshot
    read = [answers.history_answer(recorded(v, "db_jobs"), wanted) for v in VERSIONS]
    assert all(found == read[0] for found in read[1:])


@pytest.mark.parametrize("version", VERSIONS)
def test_history_says_what_the_queue_said(version: str) -> None:
    ids = IDS
    array = ids["array"]
    ended = [
        ids["completed"],
        ids["failed_exit3"],
        ids["failed_sigkill"],
        ids["timeout"],
        ids["signalled"],
        f"{array}_2",
    ]
    history = answers.history_answer(recorded(version, "db_jobs"), ended + ["999999"])
    assert {job_id: (s.state, s.exit_code) for job_id, s in history.items()} == {
        ids["completed"]: (JobState.COMPLETED, 0),
        ids["failed_exit3"]: (JobState.FAILED, 3),
        ids["failed_sigkill"]: (JobState.FAILED, 137),
        ids["timeout"]: (JobState.TIMEOUT, 0),  # sacct's 0:0 too
        ids["signalled"]: (JobState.FAILED, 7),
        f"{array}_2": (JobState.FAILED, 2),
    }
    # tasks cancelled before they started: one record under the array's id
    throttled = ids["array_throttled"]
    rest = answers.history_answer(recorded(version, "db_jobs"), [f"{throttled}_4", ids["running"]])
    assert rest[f"{throttled}_4"].state is JobState.CANCELLED
    assert rest[f"{throttled}_4"].start_time is None  # slurmdbd's NO_VAL start
    assert (rest[ids["running"]].exit_code, rest[ids["running"]].reason) == (None, "cancelled")
    one = answers.history_answer(recorded(version, "db_job"), [ids["failed_sigkill"]])
    assert one[ids["failed_sigkill"]].exit_code == 137
    assert answers.history_answer(recorded(version, "db_job_unknown"), ["999999"]) == {}


@pytest.mark.parametrize("version", VERSIONS)
def test_purged_and_unknown_ids_have_no_status(version: str) -> None:
    assert answers.live_answer(recorded(version, "job_purged"), [IDS["completed"]]) == {}
    assert answers.live_answer(recorded(version, "job_unknown_live"), ["999999"]) == {}
    task = f"{IDS['array']}_2"
    assert (
        answers.live_answer(recorded(version, "job_array_task_live"), [task])[task].exit_code == 2
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_light_states_with_a_split_off_task_named_by_its_own_id(version: str) -> None:
    live = answers.live_answer(recorded(version, "jobs_live"), list(IDS.values()))
    throttled = f"{IDS['array_throttled']}_0"
    own = answers.live_answer(recorded(version, "jobs_live"), [throttled])[throttled].extra[
        "raw_id"
    ]
    states = answers.states_answer(recorded(version, "jobs_state_live"), {own: throttled})
    assert states[throttled] == "RUNNING"
    assert f"{own}_0" not in states
    assert states[IDS["running"]] == live[IDS["running"]].native_state == "RUNNING"
    assert states[IDS["pending_begin"]] == "PENDING"
    unaliased = answers.states_answer(recorded(version, "jobs_state_live"))
    assert unaliased[f"{own}_0"] == "RUNNING"  # 25.11's name for it, kept when unknown


@pytest.mark.parametrize("version", VERSIONS)
def test_submissions_and_refusals(version: str) -> None:
    tag = version[-2:]
    assert (
        answers.submitted_answer(recorded(version, "submit_completed")) == IDS[f"completed_{tag}"]
    )
    with pytest.raises(JobSubmissionError, match="Invalid partition name specified"):
        answers.submitted_answer(recorded(version, "submit_refused_partition"))
    with pytest.raises(JobSubmissionError, match="time limit is invalid"):
        answers.submitted_answer(recorded(version, "submit_refused_time"))
    with pytest.raises(JobSubmissionError, match="environment"):
        answers.submitted_answer(recorded(version, "submit_refused_no_environment"))


def test_submission_never_reached_is_asked_again() -> None:
    with pytest.raises(Again):
        answers.submitted_answer(answers.Answer(503, "Service Unavailable"))


def test_submission_timed_out_at_a_paused_controller_is_uncertain() -> None:
    # slurmrestd's 504 after MessageTimeout: slurmctld may still make the job
    with pytest.raises(SubmissionUncertainError, match="Socket timed out on send/recv"):
        answers.submitted_answer(recorded("v0.0.44", "submit_controller_paused"))


@pytest.mark.parametrize("version", VERSIONS)
def test_cancel_of_an_ended_or_unknown_job_is_no_failure(version: str) -> None:
    answers.cancel_answer(recorded(version, "cancel_unknown"))
    answers.cancel_answer(recorded(version, "cancel_ended"))
    refused = answers.Answer(
        200,
        {"errors": [], "status": [{"error": {"code": 1, "message": "Access/permission denied"}}]},
    )
    with pytest.raises(SchedulerAdapterError, match="permission denied"):
        answers.cancel_answer(refused)


def test_recorded_cancels() -> None:
    answers.cancel_answer(recorded("v0.0.41", "cancel_pending"))
    answers.cancel_answer(recorded("v0.0.42", "cancel_running"))
    answers.cancel_answer(recorded("v0.0.43", "cancel_throttled"))
    answers.cancel_answer(recorded("v0.0.44", "signal_batch"))


@pytest.mark.parametrize("version", VERSIONS)
def test_keys_found_in_the_queue_and_in_the_history(version: str) -> None:
    keys = ["key-completed", "key-array", "key-none"]
    assert answers.keys_answer(recorded(version, "jobs_live"), keys) == {
        "key-completed": IDS["completed"],
        "key-array": IDS["array"],
    }
    assert answers.keys_answer(recorded(version, "db_jobs_keys"), keys) == {
        "key-completed": IDS["completed"],
        "key-array": IDS["array"],
    }


def test_failures_of_the_queue_and_of_the_history() -> None:
    with pytest.raises(Again):
        answers.live_answer(answers.Answer(502, "Bad Gateway"), ["1"])
    with pytest.raises(NotAskedNow, match="Query empty"):
        answers.live_answer(recorded("v0.0.41", "jobs_updated_epoch"), ["1"])
    with pytest.raises(NoHistory) as none:
        answers.history_answer(answers.Answer(404, "Unable to find requested URL endpoint"), [])
    assert none.value.off
    with pytest.raises(NotAskedNow):
        answers.states_answer(recorded("v0.0.44", "jobs_state_csv"))


# -- which version -------------------------------------------------------------------


def test_the_newest_version_both_sides_speak() -> None:
    spoken = answers.spoken_versions(recorded("openapi", "openapi_v3"))
    assert spoken == ["v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41"]
    assert answers.choose_version(spoken) == "v0.0.44"
    older = answers.spoken_versions(recorded("openapi", "openapi_v3_41_42"))
    assert older == ["v0.0.42", "v0.0.41"]
    assert answers.choose_version(older) == "v0.0.42"
    assert answers.choose_version(spoken, wanted="v0.0.41") == "v0.0.41"


def test_an_unknown_or_removed_version_is_a_clear_error() -> None:
    with pytest.raises(SchedulerUnavailableError, match="HPCBRIDGE_SLURM_REST_VERSION=v0.0.40"):
        answers.choose_version(["v0.0.44"], wanted="v0.0.40")
    with pytest.raises(SchedulerUnavailableError, match="slurmrestd speaks v0.0.40, v0.0.39"):
        answers.choose_version(["v0.0.40", "v0.0.39"])
    older = answers.spoken_versions(recorded("openapi", "openapi_v3_41_42"))
    with pytest.raises(SchedulerUnavailableError, match="speaks v0.0.44"):
        answers.choose_version(older, wanted="v0.0.44")
    assert answers.release(recorded("openapi", "openapi_v3")) == "25.11.7"
    with pytest.raises(Again):
        answers.openapi_answer(answers.Answer(503, "cannot reach slurmrestd"))


# -- the glue's client, against what a real socket does ---------------------------------


def test_rest_url_forms(tmp_path: Path) -> None:
    from hpcbridge.errors import ConfigurationError
    from hpcbridge.schedulers.slurm.rest_driver import send
    from hpcbridge.transports.http import HttpClient

    def rest_client(url: str, timeout: float) -> HttpClient:
        return HttpClient(url, timeout=timeout, setting="HPCBRIDGE_SLURM_REST_URL")

    for bad in ("localhost:6820", "ftp://host", "unix:"):
        with pytest.raises(ConfigurationError, match="unix:/path/to/socket"):
            rest_client(bad, 60.0)
    # no daemon on the socket: nothing was sent, so the answer says "never reached"
    absent = rest_client(f"unix:{tmp_path}/none.socket", 5.0)
    answer = send(absent, requests.ping("v0.0.44"))
    assert answer.status == 503 and "slurmrestd: cannot reach" in answer.message()
    with pytest.raises(Again):
        answers.submitted_answer(send(absent, requests.submit("v0.0.44", {"name": "x"})))


def test_the_rest_driver_needs_its_url() -> None:
    from hpcbridge.errors import ConfigurationError
    from hpcbridge.schedulers.slurm.cli_driver import SlurmCliDriver
    from hpcbridge.schedulers.slurm.rest_driver import build_rest_driver
    from hpcbridge.transports.local import LocalExecutor

    executor = LocalExecutor()
    with pytest.raises(ConfigurationError, match="HPCBRIDGE_SLURM_REST_URL"):
        build_rest_driver(executor, SlurmCliDriver(executor), None)
