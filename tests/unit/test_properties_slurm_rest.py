"""Property tests of the REST driver's pure half (slurm/rest_answers.py, rest_requests.py):
any answer, of any status and any JSON, is read into statuses, states, an id or the error it
means - never another exception; the numbers and exit codes read back what was written."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbridge.engine.driver import Again, NotAskedNow
from hpcbridge.errors import JobSubmissionError, SchedulerAdapterError
from hpcbridge.model import JobStatus
from hpcbridge.schedulers.slurm import rest_answers as answers
from hpcbridge.schedulers.slurm import rest_requests as requests
from hpcbridge.schedulers.slurm.queries import NoHistory

SETTINGS = settings(max_examples=50, deadline=None)

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False),
    st.text(max_size=12),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)
_numbers = st.one_of(
    st.integers(0, 2**33),
    st.fixed_dictionaries(
        {"set": st.booleans(), "infinite": st.booleans(), "number": st.integers(0, 2**33)}
    ),
    _scalars,
)
_states = st.lists(
    st.sampled_from(
        [
            "PENDING",
            "RUNNING",
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "TIMEOUT",
            "COMPLETING",
            "REQUEUED",
            "NEW_STATE",
            "",
        ]
    ),
    max_size=3,
)
_ctld_job = st.fixed_dictionaries(
    {"job_id": st.one_of(st.integers(0, 10**6), st.text(max_size=6)), "job_state": _states},
    optional={
        "array_job_id": _numbers,
        "array_task_id": _numbers,
        "array_task_string": st.sampled_from(["", "1-4%1", "0x3", "[2,5]", "x"]),
        "start_time": _numbers,
        "end_time": _numbers,
        "state_reason": _json,
        "exit_code": st.one_of(
            _json,
            st.fixed_dictionaries(
                {"return_code": _numbers, "signal": st.fixed_dictionaries({"id": _numbers})}
            ),
        ),
        "comment": _json,
    },
)
_db_job = st.fixed_dictionaries(
    {
        "job_id": st.integers(0, 10**6),
        "state": st.fixed_dictionaries({"current": _states, "reason": _json}),
    },
    optional={
        "array": st.fixed_dictionaries(
            {"job_id": _numbers, "task_id": _numbers, "task": st.sampled_from(["", "0x3", "1-2"])}
        ),
        "time": st.fixed_dictionaries({"start": _numbers, "end": _numbers}),
        "exit_code": _json,
        "comment": _json,
    },
)
_bodies = st.one_of(
    _json,
    st.fixed_dictionaries(
        {"jobs": st.lists(st.one_of(_ctld_job, _db_job, _json), max_size=5)},
        optional={
            "errors": _json,
            "warnings": _json,
            "job_id": _json,
            "status": _json,
            "paths": _json,
        },
    ),
)
_answers = st.builds(answers.Answer, st.sampled_from([200, 404, 422, 500, 502, 503]), _bodies)
_wanted = st.lists(st.sampled_from(["1", "2", "7_1", "7_4", "9", "999999"]), max_size=4)


@SETTINGS
@given(_answers, _wanted)
def test_status_answers_are_statuses_or_the_errors_they_mean(answer: Any, wanted: list) -> None:
    for parse, errors in (
        (answers.live_answer, (NotAskedNow, Again)),
        (answers.history_answer, (NoHistory,)),
    ):
        try:
            found = parse(answer, wanted)
        except errors:
            continue
        assert set(found) <= set(wanted)
        assert all(isinstance(status, JobStatus) for status in found.values())


@SETTINGS
@given(_answers)
def test_other_answers_are_values_or_the_errors_they_mean(answer: Any) -> None:
    try:
        states = answers.states_answer(answer, {"5": "7_1"})
        assert all(isinstance(word, str) for word in states.values())
    except (NotAskedNow, Again):
        pass
    try:
        assert answers.submitted_answer(answer)
    except (JobSubmissionError, Again):
        pass
    try:
        answers.cancel_answer(answer)
    except SchedulerAdapterError:
        pass
    assert isinstance(answers.keys_answer(answer, ["k"]), dict)
    assert all(version.startswith("v") for version in answers.spoken_versions(answer))
    assert isinstance(answer.message(), str)


@SETTINGS
@given(st.integers(0, 2**32), st.booleans())
def test_numbers_read_back(value: int, infinite: bool) -> None:
    written = requests.number(float("inf") if infinite else value)
    assert answers.number(written) == (float("inf") if infinite else value)
    assert answers.number({"set": False, "infinite": False, "number": value}) is None


@SETTINGS
@given(st.integers(0, 255), st.integers(0, 64))
def test_exit_codes_read_as_sacct_writes_them(code: int, signal: int) -> None:
    value = {
        "status": ["SIGNALED" if signal else "ERROR"],
        "return_code": {"set": not signal, "infinite": False, "number": code},
        "signal": {"id": {"set": bool(signal), "infinite": False, "number": signal}},
    }
    assert answers.exit_text(value) == (f"0:{signal}" if signal else f"{code}:0")


@SETTINGS
@given(_states)
def test_a_state_list_is_one_of_its_words(states: list) -> None:
    word = answers.state_word(states)
    assert word in states or (word == "" and not states)


@SETTINGS
@given(st.integers(1, 10**6), st.sampled_from(["K", "M", "G", "T", ""]))
def test_memory_in_mib_is_never_less_than_asked(count: int, unit: str) -> None:
    kib = count * {"K": 1, "M": 1024, "G": 1024**2, "T": 1024**3, "": 1024}[unit]
    mib = requests.megabytes(f"{count}{unit}")
    assert mib * 1024 >= kib > (mib - 1) * 1024 or mib == 1
