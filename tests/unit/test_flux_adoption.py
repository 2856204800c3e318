"""Flux exactly-once: each job's key in its jobspec, and a submission whose answer was
lost found by it (adopted) or sent once more - the pure builders and parsers, and the
CLI driver against a scripted ``flux`` (``tests.support.fake_flux``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

from hpcbridge import Settings
from hpcbridge.engine import adoption
from hpcbridge.engine.driver import PartialSubmissionError, SubmitBatch
from hpcbridge.engine.jobscript import PreparedJob
from hpcbridge.errors import JobTimeoutError, SubmissionUncertainError
from hpcbridge.resources import Resources
from hpcbridge.schedulers.flux import answers as flux_answers
from hpcbridge.schedulers.flux import command_runner, commands, jobspec, planning
from hpcbridge.schedulers.flux import request as flux_request
from hpcbridge.schedulers.flux.adapter import FluxAdapter
from hpcbridge.schedulers.flux.ids import canonical_job_id
from hpcbridge.schedulers.flux.instance import POLICY_0_26, POLICY_0_49
from hpcbridge.schedulers.flux.instance import facts as instance_facts
from hpcbridge.transports.base import CommandResult
from tests.support.fake_flux import FakeFlux


def no_native(*_: object) -> tuple:
    raise AssertionError("no native options in these batches")


NO_QUESTIONS = planning.Questions(None, no_native, lambda: None)


LOST = "the connection to login dropped while flux was running"


def batch_of(count: int, token: str = "3fa9c2e1b7d0") -> SubmitBatch:
    job = PreparedJob(token, "/j", f"/j/.hpcbridge/{token}.sh", "/j/x.exit", ["/j/x.sh"], "train")
    return SubmitBatch(job, count, Resources.from_mapping({}), (), "/j/flux-{{id}}.out")


def planned(count: int) -> flux_request.FluxPlan:
    facts = instance_facts(None, "0.88.0", POLICY_0_49, "test", None)
    return planning.flux_plan(planning.plan_batch(batch_of(count), facts, NO_QUESTIONS, 60.0))


# -- the key, where each job carries it ---------------------------------------------


def test_one_job_carries_the_token_many_the_token_and_their_index() -> None:
    one, many = planned(1), planned(3)
    assert one.request.key == "3fa9c2e1b7d0" and one.job(0).key == "3fa9c2e1b7d0"
    assert many.request.key is None
    assert [many.job(index).key for index in range(3)] == [f"3fa9c2e1b7d0.{i}" for i in range(3)]
    assert many.job(2).environment["HPCBRIDGE_TASK_INDEX"] == "2"


@pytest.mark.parametrize("policy", [POLICY_0_49, POLICY_0_26], ids=["0.49+", "0.26"])
def test_the_key_is_a_json_string_so_a_hex_token_stays_text(policy: Any) -> None:
    request = planning.translate(batch_of(1, token="123e4567"), None, policy)
    argv = commands.submit_argv("flux", policy, request)
    # Unquoted, --setattr would read 123e4567 as the number 1.23e+4569.
    assert '--setattr=user.hpcbridge_key="123e4567"' in argv
    assert argv[-1] == "/j/.hpcbridge/123e4567.sh"


def test_bulk_input_carries_each_jobs_key() -> None:
    many = planned(2)
    payload = json.loads(
        commands.bulk_input(jobspec.jobspec_params(many.request), many.environments, many.keys)
    )
    assert payload["keys"] == ["3fa9c2e1b7d0.0", "3fa9c2e1b7d0.1"]
    assert payload["job"]["key"] is None


class FakeSpec:
    """The bits of ``JobspecV1`` the builder touches."""

    def __init__(self) -> None:
        self.attributes: Dict[str, Any] = {}
        self.environment: Dict[str, str] = {}

    @classmethod
    def from_batch_command(cls, *args: Any, **kwargs: Any) -> FakeSpec:
        return cls()

    def setattr(self, name: str, value: Any) -> None:
        self.attributes[name] = value

    def dumps(self) -> str:
        return json.dumps(self.attributes)


class FakeJobModule:
    JobspecV1 = FakeSpec

    def __init__(self) -> None:
        self.sent: List[Dict[str, Any]] = []

    def submit_async(self, handle: Any, text: str) -> Any:
        self.sent.append(json.loads(text))
        number = len(self.sent)
        return type("Future", (), {"get_id": lambda self: number})()


def test_native_jobspecs_carry_the_key_of_each_job() -> None:
    many, module = planned(2), FakeJobModule()
    params = jobspec.jobspec_params(many.request)
    found = jobspec.submit_all(None, module, params, many.environments, {}, many.keys)
    assert found == [(True, 1), (True, 2)]
    assert [sent[jobspec.KEY_ATTRIBUTE] for sent in module.sent] == [
        "3fa9c2e1b7d0.0",
        "3fa9c2e1b7d0.1",
    ]
    one = jobspec.build_jobspec(FakeSpec, jobspec.jobspec_params(planned(1).request), {})
    assert one.attributes[jobspec.KEY_ATTRIBUTE] == "3fa9c2e1b7d0"


# -- listing and reading back ---------------------------------------------------------


def test_recent_jobs_argv_per_release() -> None:
    assert commands.recent_jobs_argv("flux", POLICY_0_49, 1796132514.9) == [
        "flux",
        "jobs",
        "-a",
        "-n",
        "-c",
        "0",
        "--since=1796132514",
        "-o",
        "{id.dec} {t_submit}",
    ]
    # 0.26 has no --since: every job is listed, the submit times filter them.
    assert not any(
        a.startswith("--since") for a in commands.recent_jobs_argv("flux", POLICY_0_26, 1.0)
    )


def test_parse_recent_jobs_keeps_those_submitted_since_newest_first() -> None:
    listed = (
        "518919290880 1796132514.1393769\n"
        "513852571648 1796132513.8372781\n"
        "10234101760 1796132483.8962266\n"
        "garbage line here\n"
        "\n"
    )
    assert flux_answers.parse_recent_jobs(listed, 1796132500.0) == [
        canonical_job_id(518919290880),
        canonical_job_id(513852571648),
    ]


def test_key_of_jobspec() -> None:
    spec = {"attributes": {"system": {}, "user": {"hpcbridge_key": "3fa9c2e1b7d0"}}}
    assert flux_answers.key_of_jobspec(json.dumps(spec)) == "3fa9c2e1b7d0"
    assert flux_answers.key_of_jobspec(json.dumps({"attributes": {"system": {}}})) is None
    # Another tool's number under the same name is no key of ours.
    number = {"attributes": {"user": {"hpcbridge_key": 1.23e47}}}
    assert flux_answers.key_of_jobspec(json.dumps(number)) is None
    with pytest.raises(ValueError, match="not a jobspec"):
        flux_answers.key_of_jobspec("flux-job: Permission denied")


def test_parse_clock() -> None:
    assert commands.clock_argv() == ["date", "+%s"]
    assert flux_answers.parse_clock("1796132550\n") == 1796132550.0
    with pytest.raises(ValueError):
        flux_answers.parse_clock("date: invalid")


# -- the CLI driver when an answer is lost ---------------------------------------------


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Looks a few milliseconds apart, a short settling and budget."""
    monkeypatch.setattr(adoption, "LOOK_EVERY", 0.01)
    monkeypatch.setattr(command_runner, "SETTLE", 0.2)
    monkeypatch.setattr(command_runner, "ADOPTION_BUDGET", 2.0)


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/sh\necho hi\n")
    path.chmod(0o755)
    return str(path)


def make(executor: Any, tmp_path: Path) -> FluxAdapter:
    settings = Settings.from_env(env={}, state_dir=str(tmp_path / "state"))
    return FluxAdapter(
        executor=executor,
        remote_workdir=str(tmp_path / "jobs"),
        settings=settings,
        driver="cli",
        unknown_limit=2,
    )


def losing(
    executor: FakeFlux,
    went_in: Callable[[List[str], Optional[str]], None],
    times: int = 1,
    error: Optional[Exception] = None,
) -> List[List[str]]:
    """The first ``times`` submissions do what ``went_in`` does, then their answer is lost."""
    calls: List[List[str]] = []

    def answer(argv: List[str], input: Optional[str]) -> CommandResult:
        calls.append(argv)
        if len(calls) > times:
            out = (
                executor.submit(argv)
                if argv[1] != "python"
                else "\n".join(executor.submit_bulk(input))
            )
            return CommandResult(argv, 0, out + "\n", "")
        went_in(argv, input)
        raise error or SubmissionUncertainError(LOST, argv=argv)

    for sub in ("batch", "python"):
        executor.handlers[sub] = answer
    return calls


def went_in_one(executor: FakeFlux, argv: List[str]) -> None:
    executor.submit(argv)


def key_of(adapter: FluxAdapter, job_id: str) -> str:
    record = adapter.store.get(job_id, "flux", adapter.host_label)
    assert record is not None and record.exit_file
    name = Path(record.exit_file).name  # <token>.exit, <token>.exit.<index>
    token, _, index = name.partition(".exit")
    return token + index


@pytest.mark.usefixtures("quick")
def test_a_job_whose_answer_was_lost_is_adopted(
    tmp_path: Path, script: str, caplog: pytest.LogCaptureFixture
) -> None:
    executor = FakeFlux()
    calls = losing(executor, lambda argv, _: went_in_one(executor, argv))
    adapter = make(executor, tmp_path)
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        job_id = adapter.submit_job(script)
    assert len(calls) == 1  # never sent again
    assert executor.with_key(key_of(adapter, job_id)) == [job_id]
    assert "adopted job " + job_id in caplog.text
    assert adapter.store.get(job_id, "flux", adapter.host_label) is not None


@pytest.mark.usefixtures("quick")
def test_a_job_that_never_went_in_is_sent_once_more(
    tmp_path: Path, script: str, caplog: pytest.LogCaptureFixture
) -> None:
    executor = FakeFlux()
    calls = losing(executor, lambda argv, _: None)
    adapter = make(executor, tmp_path)
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        job_id = adapter.submit_job(script)
    assert len(calls) == 2
    assert executor.with_key(key_of(adapter, job_id)) == [job_id]
    assert "surely has no such job; submitting it once more" in caplog.text


@pytest.mark.usefixtures("quick")
def test_a_timed_out_submission_is_looked_for_too(tmp_path: Path, script: str) -> None:
    executor = FakeFlux()
    timeout = JobTimeoutError("flux did not finish within 60 s on login")
    calls = losing(executor, lambda argv, _: went_in_one(executor, argv), error=timeout)
    job_id = make(executor, tmp_path).submit_job(script)
    assert len(calls) == 1 and list(executor.jobs) == [job_id]


@pytest.mark.usefixtures("quick")
def test_an_instance_that_cannot_tell_ends_uncertain_naming_the_key(
    tmp_path: Path, script: str
) -> None:
    executor = FakeFlux()
    calls = losing(executor, lambda argv, _: None)
    executor.handlers["jobs"] = lambda argv, _: CommandResult(
        argv, 1, "", "flux-jobs: ERROR: Unable to connect to Flux: Connection refused"
    )
    with pytest.raises(SubmissionUncertainError, match="user.hpcbridge_key=[0-9a-f]{12} before"):
        make(executor, tmp_path).submit_job(script)
    assert len(calls) == 1 and not executor.jobs


@pytest.mark.usefixtures("quick")
def test_bulk_adopts_the_jobs_that_went_in_and_sends_only_the_rest(
    tmp_path: Path, script: str, caplog: pytest.LogCaptureFixture
) -> None:
    executor = FakeFlux()

    def first_two(argv: List[str], input: Optional[str]) -> None:
        request = json.loads(input or "{}")
        request["environments"], request["keys"] = request["environments"][:2], request["keys"][:2]
        executor.submit_bulk(json.dumps(request))

    calls = losing(executor, first_two)
    adapter = make(executor, tmp_path)
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        ids = adapter.submit_many([script] * 4)
    assert len(calls) == 2 and len(ids) == 4 and len(executor.jobs) == 4
    for job_id in ids:
        assert executor.with_key(key_of(adapter, job_id)) == [job_id]
    assert "adopted jobs " in caplog.text and "no job for 2 of its keys" in caplog.text


@pytest.mark.usefixtures("quick")
def test_bulk_past_the_budget_keeps_the_jobs_found(tmp_path: Path, script: str) -> None:
    executor = FakeFlux()
    listings = iter(range(10**6))

    def first_only(argv: List[str], input: Optional[str]) -> None:
        request = json.loads(input or "{}")
        request["environments"], request["keys"] = request["environments"][:1], request["keys"][:1]
        executor.submit_bulk(json.dumps(request))

    def flapping(argv: List[str], _: Optional[str]) -> CommandResult:
        if next(listings) % 2:  # never two answers in a row: the rest never settles
            return CommandResult(argv, 1, "", "flux-jobs: ERROR: Connection reset by peer")
        return executor._recent(argv)

    losing(executor, first_only)
    executor.handlers["jobs"] = flapping
    adapter = make(executor, tmp_path)
    with pytest.raises(PartialSubmissionError, match="2 of 3 submissions did not go in") as caught:
        adapter.submit_many([script] * 3)
    assert caught.value.submitted_ids == list(executor.jobs)
    assert "user.hpcbridge_key=" in caught.value.failures[0]


def test_a_submission_that_could_not_connect_is_sent_again(
    tmp_path: Path, script: str, caplog: pytest.LogCaptureFixture
) -> None:
    executor = FakeFlux()
    adapter = make(executor, tmp_path)
    adapter.submit_job(script)  # the driver is ready: what follows is the submission's own
    refused = "flux-submit: ERROR: Unable to connect to Flux: broker socket /tmp/x was not found"
    answers = [CommandResult([], 1, "", refused)] * 2

    def answer(argv: List[str], _: Optional[str]) -> CommandResult:
        return answers.pop(0) if answers else CommandResult(argv, 0, executor.submit(argv), "")

    executor.handlers["batch"] = answer
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        job_id = adapter.submit_job(script)
    assert executor.with_key(key_of(adapter, job_id)) == [job_id] and len(executor.jobs) == 2
    assert "did not reach the system Flux instance (Unable to connect to Flux" in caplog.text
