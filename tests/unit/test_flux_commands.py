"""Pure argv builders and parsers, against outputs recorded from flux-core 0.88."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Dict, List

import pytest

from hpcbridge.engine.driver import SubmitBatch
from hpcbridge.engine.jobscript import PreparedJob
from hpcbridge.errors import JobSubmissionError
from hpcbridge.model import JobState
from hpcbridge.resources import Resources
from hpcbridge.schedulers.flux import answers, commands, instance_answers, jobspec, planning
from hpcbridge.schedulers.flux import request as flux_request
from hpcbridge.schedulers.flux import status as flux_status
from hpcbridge.schedulers.flux.ids import canonical_job_id
from hpcbridge.schedulers.flux.instance import POLICY_0_26, POLICY_0_49
from hpcbridge.schedulers.flux.status import parse_eventlog

DATA = Path(__file__).resolve().parent.parent / "data" / "flux"


def recorded(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def ids() -> Dict[str, str]:
    return dict(item.split("=") for item in recorded("ids_0.88.txt").split())


def request(**changes: object) -> flux_request.SubmitRequest:
    resources = Resources.from_mapping(changes.pop("resources", {}))  # type: ignore[arg-type]
    job = PreparedJob("t", "/j", "/j/.hpcbridge/w.sh", "/j/.hpcbridge/w.exit", ["/j/x.sh"], "train")
    depends_on = tuple(changes.pop("depends_on", []))  # type: ignore[arg-type]
    batch = SubmitBatch(job, 1, resources, depends_on, "/j/flux-{{id}}.out")
    queue = changes.pop("queue", None)
    return planning.translate(batch, queue, changes.pop("policy", POLICY_0_49))  # type: ignore[arg-type]


def batch_argv(policy: object, made: flux_request.SubmitRequest) -> List[str]:
    return commands.submit_argv("flux", policy, made)  # type: ignore[arg-type]


# -- submission -----------------------------------------------------------------


def test_batch_argv_seed_table() -> None:
    made = request(
        resources={
            "nodes": 2,
            "ntasks": 4,
            "cpus_per_task": 8,
            "gpus": 1,
            "time": "2:00:00",
            "account": "guests",
            "constraint": "amd",
            "job_name": "ignored-here",
        },
        queue="pdebug",
        depends_on=["ƒCFKYzj"],
    )
    argv = batch_argv(POLICY_0_49, made)
    assert argv == [
        "flux",
        "batch",
        "-n4",
        "-N2",
        "-c8",
        "-g1",
        "-t7200s",
        "--queue=pdebug",
        "--setattr=system.bank=guests",
        "--requires=amd",
        "--dependency=afterok:7381975040",
        "--job-name=train",
        "--output=/j/flux-{{id}}.out",
        '--setattr=user.hpcbridge_key="t"',
        "/j/.hpcbridge/w.sh",
    ]


def test_minimal_batch_always_has_slots_and_a_unit_on_time() -> None:
    argv = batch_argv(POLICY_0_49, request(resources={"time": "90"}))
    # "90" is Slurm minutes; the CLI gets seconds with a unit (a bare -t 90 = 90 minutes).
    assert "-n1" in argv and "-t5400s" in argv
    assert not any(part.startswith("-g") for part in argv)


def test_gpus_zero_omitted_and_unlimited_time_omitted() -> None:
    argv = batch_argv(POLICY_0_49, request(resources={"gpus": 0, "time": "UNLIMITED"}))
    assert not any(part.startswith(("-g", "-t")) for part in argv)


def test_nodes_without_ntasks_gives_one_slot_per_node() -> None:
    made = request(resources={"nodes": 3})
    assert made.nslots == 3 and made.nodes == 3


def test_mem_partition_dropped_with_warnings(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hpcbridge"):
        request(resources={"mem": "4G", "partition": "gpu"})
    assert "mem=4G dropped" in caplog.text
    assert "partition='gpu' dropped" in caplog.text


def test_026_uses_mini_batch_and_has_no_dependencies(caplog: pytest.LogCaptureFixture) -> None:
    argv = batch_argv(POLICY_0_26, request(policy=POLICY_0_26))
    assert argv[:3] == ["flux", "mini", "batch"]
    with pytest.raises(JobSubmissionError, match="dependencies"):
        request(policy=POLICY_0_26, depends_on=["ƒCFKYzj"])
    with caplog.at_level(logging.WARNING, logger="hpcbridge"):
        request(policy=POLICY_0_26, resources={"constraint": "amd"})
    assert "--requires" in caplog.text


def test_cancel_argv_per_policy() -> None:
    assert commands.cancel_argv("flux", POLICY_0_49, ["ƒCFKYzj", "ƒGN1ZNF"]) == [
        "flux",
        "cancel",
        "7381975040",
        "10083106816",
    ]
    assert commands.cancel_argv("flux", POLICY_0_26, ["ƒCFKYzj"])[:3] == [
        "flux",
        "job",
        "cancel",
    ]


def test_jobspec_params_carry_the_request() -> None:
    made = request(resources={"time": "30s", "gpus": 2}, queue="debug")
    made = made.with_environment({"A": "1"})
    params = jobspec.jobspec_params(made)
    assert params["script"] == "#!/bin/sh\nexec /j/.hpcbridge/w.sh\n"
    assert params["duration"] == 30.0 and params["gpus_per_slot"] == 2
    assert params["queue"] == "debug" and params["environment"] == {"A": "1"}
    json.dumps(params)  # JSON-able: shipped to the bulk helper on stdin


def test_parse_submit_output() -> None:
    assert answers.parse_submit_output("ƒCFKYzj\n") == "ƒCFKYzj"
    assert answers.parse_submit_output("some warning\nfCFKYzj\n") == "ƒCFKYzj"
    with pytest.raises(ValueError):
        answers.parse_submit_output("")


def test_parse_bulk_output() -> None:
    assert answers.parse_bulk_output("OK 7381975040\nERR no queue specified\n") == [
        (True, "ƒCFKYzj"),
        (False, "no queue specified"),
    ]


def test_jobs_argv_json_or_format() -> None:
    assert commands.jobs_argv("flux", POLICY_0_49, ["ƒCFKYzj"]) == [
        "flux",
        "jobs",
        "--json",
        "7381975040",
    ]
    argv = commands.jobs_argv("flux", POLICY_0_26, ["ƒCFKYzj"])
    assert "-a" not in argv and argv[-1] == "7381975040"
    # the short spellings: 0.26 has no --no-header and no --format
    assert argv[2:5] == ["-n", "-o", flux_status.JOBS_FORMAT]


# -- status parsers on recorded outputs -----------------------------------------


EXPECTED = {
    "OK": (JobState.COMPLETED, 0),
    "FAIL": (JobState.FAILED, 3),
    "CAN": (JobState.CANCELLED, 143),
    "TMO": (JobState.TIMEOUT, 142),
    "BLK": (JobState.RUNNING, None),
    "DEP": (JobState.PENDING, None),
    "HOLD": (JobState.PENDING, None),
    "CANP": (JobState.CANCELLED, None),  # cancelled before it ran: returncode -128
}


def check_statuses(statuses: Dict[str, object]) -> None:
    known = ids()
    for name, (state, code) in EXPECTED.items():
        status = statuses[known[name]]
        assert status.state is state, name  # type: ignore[attr-defined]
        assert status.exit_code == code, name  # type: ignore[attr-defined]


def test_jobs_json_many() -> None:
    facts = flux_status.parse_jobs_json(recorded("jobs_json_many_0.88.json"))
    statuses = flux_status.statuses_from_facts(list(ids().values()), facts, "missing")
    check_statuses(statuses)
    completed = statuses[ids()["OK"]]
    assert completed.start_time and completed.end_time and completed.end_time > completed.start_time
    assert statuses[ids()["TMO"]].reason == "timeout: resource allocation expired"
    assert statuses[ids()["DEP"]].reason.startswith("depends on after-success=ƒ")
    assert statuses[ids()["BLK"]].end_time is None


def test_jobs_format_same_answers_as_json() -> None:
    facts = flux_status.parse_jobs_format(recorded("jobs_format_0.88.txt"))
    check_statuses(flux_status.statuses_from_facts(list(ids().values()), facts, "missing"))


def test_jobs_format_handwritten_026_rows() -> None:
    facts = flux_status.parse_jobs_format(recorded("jobs_format_0.26.handwritten.txt"))
    assert [fact.result for fact in facts] == ["COMPLETED", "FAILED", "CANCELED"]


def test_jobs_json_one_object_for_one_id() -> None:
    facts = flux_status.parse_jobs_json(recorded("jobs_json_one_0.88.json"))
    assert len(facts) == 1 and facts[0].id == ids()["FAIL"]


def test_unknown_ids_from_stderr() -> None:
    stderr = recorded("jobs_json_with_unknown_0.88.stderr")
    assert flux_status.parse_unknown_ids(stderr) == {canonical_job_id(123456789)}
    assert flux_status.only_unknown_ids(
        recorded("jobs_json_only_unknown_0.88.stderr").replace("rc=1", "")
    )
    assert flux_status.only_unknown_ids(recorded("jobs_filter_warning_0.88.stderr"))
    assert not flux_status.only_unknown_ids("flux-jobs: ERROR: Unable to connect to Flux")
    facts = flux_status.parse_jobs_json(recorded("jobs_json_with_unknown_0.88.json"))
    statuses = flux_status.statuses_from_facts(
        [ids()["OK"], canonical_job_id(123456789)], facts, "gone"
    )
    assert statuses[canonical_job_id(123456789)].state is JobState.UNKNOWN


def test_dependency_failed() -> None:
    # Flux says FAILED (returncode 1) for a child that never ran; Slurm and mock: CANCELLED
    facts = flux_status.parse_jobs_json(recorded("jobs_json_dependency_failed_0.88.json"))
    status = flux_status.status_from_facts(facts[0])
    assert status.state is JobState.CANCELLED and status.exit_code is None
    assert status.native_state == "FAILED"
    assert status.reason == (
        "DependencyNeverSatisfied (dependency after-success=ƒ4QsP9UK can never be satisfied)"
    )


@pytest.mark.parametrize(
    ("name", "state", "code"),
    [
        ("ok", JobState.COMPLETED, 0),
        ("fail", JobState.FAILED, 3),
        ("can", JobState.CANCELLED, 143),
        ("tmo", JobState.TIMEOUT, 142),
        ("canp", JobState.CANCELLED, None),
        ("dependency_failed", JobState.CANCELLED, None),
        ("dep", JobState.PENDING, None),
    ],
)
def test_eventlogs(name: str, state: JobState, code: object) -> None:
    facts = parse_eventlog("ƒCFKYzj", recorded(f"eventlog_{name}_0.88.txt"))
    status = flux_status.status_from_facts(facts)
    assert status.state is state
    assert status.exit_code == code
    if name == "canp":  # cancelled before it ran: the words of every scheduler
        assert status.reason.startswith("cancelled while pending") and status.start_time is None


@pytest.mark.parametrize(
    ("state", "result", "ours"),
    [
        ("DEPEND", "", JobState.PENDING),
        ("PRIORITY", "", JobState.PENDING),
        ("SCHED", "", JobState.PENDING),
        ("RUN", "", JobState.RUNNING),
        ("CLEANUP", "", JobState.RUNNING),
        ("INACTIVE", "COMPLETED", JobState.COMPLETED),
        ("INACTIVE", "FAILED", JobState.FAILED),
        ("INACTIVE", "CANCELED", JobState.CANCELLED),
        ("INACTIVE", "TIMEOUT", JobState.TIMEOUT),
        ("inactive", "timeout", JobState.TIMEOUT),
        ("WEIRD", "", JobState.UNKNOWN),
    ],
)
def test_state_mapping_by_names(state: str, result: str, ours: JobState) -> None:
    assert flux_status.state_from_names(state, result) is ours


@pytest.mark.parametrize(
    ("returncode", "waitstatus", "code"),
    [
        (0, None, 0),
        (3, 768, 3),
        (143, 36608, 143),
        (-15, None, 143),  # the shell itself killed by SIGTERM
        (-128, None, None),  # cancelled before it ran
        (None, 768, 3),
        (None, 9, 137),  # killed by SIGKILL: 128 + 9
        (None, None, None),
    ],
)
def test_exit_codes(returncode: object, waitstatus: object, code: object) -> None:
    assert flux_status.exit_code_from(returncode, waitstatus) == code  # type: ignore[arg-type]


def test_expiration_of_nested_instance() -> None:
    expiration = instance_answers.parse_expiration(recorded("resource_R_nested_0.88.json"))
    assert expiration is not None and expiration > 0
    assert instance_answers.parse_expiration(recorded("resource_R_top_0.88.json")) is None


def test_output_path_from_recorded_jobspec() -> None:
    path = answers.output_path_from_jobspec(recorded("jobspec_batch_0.88.json"), ids()["OK"])
    assert path is not None and path.endswith(f"/flux-{ids()['OK']}.out")
    assert answers.output_path_from_jobspec("not json", "ƒCFKYzj") is None
    spec = {
        "attributes": {
            "system": {"shell": {"options": {"output": {"stdout": {"path": "/x/{{id.dec}}.log"}}}}}
        }
    }
    assert answers.output_path_from_jobspec(json.dumps(spec), "ƒCFKYzj") == "/x/7381975040.log"


def test_inf_duration_is_none() -> None:
    made = request(resources={"time": "UNLIMITED"})
    assert made.duration is None
    assert not math.isinf(jobspec.jobspec_params(made)["duration"])
