from hpcbridge import TERMINAL_STATES, JobState, JobStatus
from hpcbridge.model import advance
from tests.support.cli import JSON_KEYS


def test_terminal_states():
    assert TERMINAL_STATES == {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
    }
    assert not JobState.UNKNOWN.is_terminal
    assert not JobState.PENDING.is_terminal


def test_order():
    assert JobState.PENDING.rank < JobState.RUNNING.rank < JobState.COMPLETED.rank
    assert JobState.UNKNOWN.rank < JobState.PENDING.rank


def s(state, **kw):
    return JobStatus("1", state, **kw)


def test_never_backwards():
    running = s(JobState.RUNNING)
    assert advance(running, s(JobState.PENDING)).state is JobState.RUNNING
    done = s(JobState.COMPLETED, exit_code=0)
    assert advance(done, s(JobState.RUNNING)).state is JobState.COMPLETED
    assert advance(done, s(JobState.FAILED, exit_code=1)) == done


def test_unknown_never_replaces_known():
    assert advance(s(JobState.RUNNING), s(JobState.UNKNOWN)).state is JobState.RUNNING


def test_forward():
    assert advance(s(JobState.PENDING), s(JobState.RUNNING)).state is JobState.RUNNING
    assert advance(None, s(JobState.FAILED)).state is JobState.FAILED
    assert advance(s(JobState.UNKNOWN), s(JobState.PENDING)).state is JobState.PENDING


def test_seed_dict_shape_and_json():
    status = s(JobState.FAILED, exit_code=3, native_state="FAILED", reason="NonZeroExitCode")
    assert status.to_dict() == {
        "state": "FAILED",
        "exit_code": 3,
        "start_time": None,
        "end_time": None,
    }
    assert set(status.to_json()) == set(JSON_KEYS)
    assert str(JobState.FAILED) == "FAILED"
