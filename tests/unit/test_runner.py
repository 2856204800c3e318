"""The engine's runner: asking again while a parser says ``Again``, long id lists in chunks,
a submission never repeated by the transport, and a lost answer adopted by its key - against
a scripted executor (the faults here are ones a real scheduler cannot be made to give)."""

from __future__ import annotations

from typing import Any, Callable, Collection, Dict, List, Mapping, Optional, Sequence

import pytest

from hpcbridge.engine import adoption
from hpcbridge.engine.driver import (
    Again,
    Call,
    CannotAsk,
    Command,
    Keyed,
    NotAskedNow,
    Outcome,
    Reply,
)
from hpcbridge.engine.runner import Runner
from hpcbridge.errors import JobSubmissionError, JobTimeoutError, SubmissionUncertainError
from hpcbridge.transports.base import CommandResult
from tests.support.scripted import Scripted


def said(argv: List[str], out: str = "", code: int = 0, err: str = "") -> CommandResult:
    return CommandResult(argv, code, out, err)


def busy_then(times: int, final: CommandResult) -> Callable[[List[str]], CommandResult]:
    left = [times]

    def answer(argv: List[str]) -> CommandResult:
        if left[0] > 0:
            left[0] -= 1
            return said(argv, code=1, err="busy")
        return final

    return answer


def parse(reply: Reply) -> str:
    if not reply.ok:
        raise Again(reply.message())
    return reply.stdout


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pauses of a few milliseconds, so that a case of many looks stays short."""
    monkeypatch.setattr("hpcbridge.retrying.Deadline.sleep", lambda self, seconds: None)
    monkeypatch.setattr(adoption, "LOOK_EVERY", 0.0)


@pytest.mark.usefixtures("quick")
def test_a_question_is_asked_again_while_its_parser_says_again() -> None:
    executor = Scripted(busy_then(2, said(["q"], "fine")))
    assert Runner(executor, patience=30).ask(["q"], parse) == "fine"
    assert len(executor.calls) == 3


def test_past_its_patience_the_parsers_error_is_raised() -> None:
    executor = Scripted(lambda argv: said(argv, code=1, err="busy"))

    def refuse(reply: Reply) -> str:
        raise Again("busy", NotAskedNow("the controller is busy"))

    with pytest.raises(NotAskedNow, match="the controller is busy"):
        Runner(executor, patience=0).ask(["q"], refuse)
    assert len(executor.calls) == 1


def test_an_again_without_an_error_is_not_asked_now() -> None:
    executor = Scripted(lambda argv: said(argv, code=1, err="down"))
    with pytest.raises(NotAskedNow, match="down"):
        Runner(executor, patience=0).ask(["q"], parse)


def test_a_call_into_bindings_runs_as_a_command_does() -> None:
    answers = iter([RuntimeError("no controller"), 7])

    def load() -> int:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    runner = Runner(Scripted(lambda argv: said(argv)), patience=30)
    with pytest.raises(RuntimeError):
        Runner(Scripted(lambda argv: said(argv)), patience=0).ask(
            Call("load", lambda: load()), retry_on=(RuntimeError,)
        )
    assert runner.ask(Call("load", load), lambda n: n * 6) == 42


def test_a_long_id_list_is_asked_in_chunks_and_merged() -> None:
    executor = Scripted(lambda argv: said(argv, "\n".join(argv[1:])))
    ids = [str(n) for n in range(25)] + ["3"]

    def by_id(reply: Reply, chunk: Sequence[str]) -> Dict[str, str]:
        return {job_id: f"seen with {len(chunk)}" for job_id in reply.stdout.split()}

    found = Runner(executor).ask_each(lambda chunk: ["q", *chunk], ids, by_id, size=10)
    assert sorted(found, key=int) == [str(n) for n in range(25)]
    assert [len(call) - 1 for call in executor.calls] == [10, 10, 5]
    assert found["24"] == "seen with 5"


def test_a_submission_is_never_repeated_by_the_transport() -> None:
    executor = Scripted(lambda argv: said(argv, "42"))
    assert Runner(executor).send(["submit"], parse) == "42"
    assert executor.idempotent == [False]


@pytest.mark.usefixtures("quick")
def test_a_submission_that_never_reached_is_sent_again() -> None:
    executor = Scripted(busy_then(1, said(["submit"], "42")))
    assert Runner(executor, timeout=30).send(["submit"], parse) == "42"
    assert len(executor.calls) == 2


def test_a_submission_past_its_timeout_is_uncertain() -> None:
    def slow(argv: List[str]) -> CommandResult:
        raise JobTimeoutError("no answer in 1 s")

    with pytest.raises(SubmissionUncertainError, match="submit did not answer in time"):
        Runner(Scripted(slow)).send(["submit"], parse)


def test_a_command_runs_in_its_folder_with_its_input_and_timeout() -> None:
    executor = Scripted(lambda argv: said(argv, "42"))
    runner = Runner(executor, timeout=60, env={"FLUX_URI": "local:///x"})
    sent = Command(["submit", "-"], cwd="/jobs/a", stdin="payload", timeout=5)
    assert runner.send(sent, parse) == "42"
    assert runner.ask(Command(["q"]), parse) == "42"
    assert executor.calls == [["submit", "-"], ["q"]] and executor.idempotent == [False, True]
    first, second = executor.options
    assert (first["cwd"], first["input"], first["timeout"]) == ("/jobs/a", "payload", 5)
    assert (second["cwd"], second["input"], second["timeout"]) == (None, None, 60)
    assert first["env"] == second["env"] == {"FLUX_URI": "local:///x"}


def test_a_command_past_its_timeout_is_uncertain_naming_its_argv() -> None:
    def slow(argv: List[str]) -> CommandResult:
        raise JobTimeoutError("no answer in 5 s")

    with pytest.raises(SubmissionUncertainError, match="submit did not answer") as caught:
        Runner(Scripted(slow)).send(Command(["submit", "-"], stdin="payload"), parse)
    assert caught.value.argv == ["submit", "-"]


def losing(
    went_in: bool, found_after: int = 0
) -> tuple[Scripted, Callable[[Collection[str]], Dict[str, str]]]:
    """An executor whose first submission's answer is lost (the job went in or not), and a
    finder that sees the job after ``found_after`` looks that could not ask."""
    jobs: Dict[str, str] = {}
    sent = [0]

    def answer(argv: List[str]) -> CommandResult:
        sent[0] += 1
        job_id = str(100 + sent[0])
        if sent[0] == 1:
            if went_in:
                jobs["k1"] = job_id
            raise JobTimeoutError("lost")
        jobs["k1"] = job_id
        return said(argv, job_id)

    looks = [found_after]

    def find(keys: Collection[str]) -> Dict[str, str]:
        if looks[0] > 0:
            looks[0] -= 1
            raise CannotAsk("restarting")
        return {key: jobs[key] for key in keys if key in jobs}

    return Scripted(answer), find


@pytest.mark.usefixtures("quick")
def test_a_lost_answer_is_adopted_by_its_key() -> None:
    executor, find = losing(went_in=True, found_after=2)
    job_id = Runner(executor).submit(["submit"], parse, key="k1", find=find, settle=60)
    assert job_id == "101"
    assert len(executor.calls) == 1  # never sent again


@pytest.mark.usefixtures("quick")
def test_a_lost_submission_surely_absent_is_sent_once_more() -> None:
    executor, find = losing(went_in=False)
    job_id = Runner(executor).submit(["submit"], parse, key="k1", find=find, settle=0)
    assert job_id == "102"
    assert len(executor.calls) == 2


def test_a_lost_answer_no_one_can_tell_about_is_uncertain() -> None:
    executor, _ = losing(went_in=True)

    def cannot(keys: Collection[str]) -> Dict[str, str]:
        raise CannotAsk("down")

    runner = Runner(executor, adoption_budget=0)
    with pytest.raises(SubmissionUncertainError, match="look for a job with the comment"):
        runner.submit(["submit"], parse, key="k1", find=cannot, settle=0)


def test_a_submission_without_a_key_is_not_looked_for() -> None:
    executor, find = losing(went_in=True)
    with pytest.raises(SubmissionUncertainError):
        Runner(executor).submit(["submit"], parse, key="", find=find, settle=0)


@pytest.mark.usefixtures("quick")
def test_many_keys_found_as_they_arrive_the_rest_sent_once_more() -> None:
    arrived: List[Dict[str, str]] = [{"a": "1"}, {"a": "1", "b": "2"}]
    resent: List[List[str]] = []

    def find(keys: Collection[str]) -> Dict[str, str]:
        seen = arrived.pop(0) if len(arrived) > 1 else arrived[0]
        return {key: job for key, job in seen.items() if key in keys}

    found = Runner(Scripted(lambda argv: said(argv))).look_up(
        ["a", "b", "c"], find, settle=0, resend=resent.append
    )
    assert found == {"a": "1", "b": "2"}
    assert resent == [["c"]]


def test_a_refusal_is_no_lost_answer() -> None:
    def refuse(reply: Reply) -> Optional[str]:
        raise JobSubmissionError("refused")

    executor, find = losing(went_in=False)
    executor.answer = lambda argv: said(argv, code=1)
    with pytest.raises(JobSubmissionError, match="refused"):
        Runner(executor).submit(["submit"], refuse, key="k1", find=find, settle=0)
    assert len(executor.calls) == 1


# -- several jobs sent at once, each with its key (Runner.send_keyed) ----------------

LOST = "lost: "


def keyed(
    jobs: Dict[str, str], resent: List[List[str]], settle: float = 0.0
) -> Callable[[Runner], Keyed]:
    """A driver's words over a scheduler holding ``jobs`` (key -> id): found by the runner's
    one adoption routine; a batch is its list of keys."""

    def made(runner: Runner) -> Keyed:
        def look_up(
            keys: Sequence[str], _since: float, resend: Callable[[List[str]], None]
        ) -> Mapping[str, str]:
            def find(asked: Collection[str]) -> Dict[str, str]:
                return {key: jobs[key] for key in asked if key in jobs}

            return runner.look_up(keys, find, settle=settle, resend=resend)

        def only(batch: List[str], indices: List[int]) -> List[str]:
            resent.append([batch[index] for index in indices])
            return resent[-1]

        return Keyed(look_up, lambda text: text.startswith(LOST), lambda key: (False, key), only)

    return made


def reached(outcomes: List[Outcome]) -> List[Outcome]:
    if outcomes and all(not ok and "not up" in text for ok, text in outcomes):
        raise Again("not up", JobSubmissionError("never reached"))
    return outcomes


@pytest.mark.usefixtures("quick")
def test_the_jobs_whose_answers_were_lost_are_found_and_the_absent_sent_once_more() -> None:
    jobs = {"b": "2"}  # b went in, its answer lost; c never went in
    resent: List[List[str]] = []
    runner = Runner(Scripted(lambda argv: said(argv)))

    def send(batch: List[str]) -> List[Outcome]:
        if batch == ["a", "b", "c"]:
            return [(True, "1"), (False, LOST + "late"), (False, LOST + "late")]
        return [(True, str(10 + len(resent)))]

    outcomes = runner.send_keyed(
        "bulk", send, ["a", "b", "c"], ["a", "b", "c"], reached, keyed=keyed(jobs, resent)(runner)
    )
    assert outcomes == [(True, "1"), (True, "2"), (True, "11")]
    assert resent == [["c"]]  # b never sent twice


@pytest.mark.usefixtures("quick")
def test_a_sending_whose_whole_answer_was_lost_says_which_jobs_none_could_tell_about() -> None:
    runner = Runner(Scripted(lambda argv: said(argv)))
    sent: List[List[str]] = []

    def send(batch: List[str]) -> List[Outcome]:
        sent.append(batch)
        raise SubmissionUncertainError("the connection dropped")

    def look_up(keys: Sequence[str], _since: float, _resend: Any) -> Mapping[str, str]:
        return {"a": "1"}  # b: neither found nor surely absent in time

    words = Keyed(look_up, lambda text: False, lambda key: (False, f"look for {key}"), list)
    outcomes = runner.send_keyed("bulk", send, ["a", "b"], ["a", "b"], reached, keyed=words)
    assert outcomes == [(True, "1"), (False, "look for b")]
    assert sent == [["a", "b"]]


@pytest.mark.usefixtures("quick")
def test_a_sending_that_never_reached_is_sent_again_and_a_refusal_is_not() -> None:
    runner = Runner(Scripted(lambda argv: said(argv)))
    answers = [[(False, "not up")], [(True, "7")]]
    outcomes = runner.send_keyed(
        "bulk", lambda batch: answers.pop(0), ["a"], ["a"], reached, keyed=keyed({}, [])(runner)
    )
    assert outcomes == [(True, "7")] and not answers
    refused: List[List[str]] = []

    def refuse(batch: List[str]) -> List[Outcome]:
        refused.append(batch)
        return [(False, "no such queue")]

    outcomes = runner.send_keyed("bulk", refuse, ["a"], ["a"], reached, keyed=keyed({}, [])(runner))
    assert outcomes == [(False, "no such queue")]  # the driver's parser reads a refusal
    assert refused == [["a"]]  # sent once: neither again nor looked for
