"""Queue handling: what a broker offers (recorded outputs), which queue a job gets
(and what is logged about it), and Flux's refusals in its own words."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from hpcbridge.errors import JobSubmissionError
from hpcbridge.schedulers.flux.answers import scheduler_message, submission_error
from hpcbridge.schedulers.flux.instance import (
    POLICY_0_26,
    POLICY_0_49,
    QueueInfo,
    parse_config_json,
    parse_queue_list,
    queue_info_from_config,
    strip_ansi,
)
from hpcbridge.schedulers.flux.planning import choose_queue

DATA = Path(__file__).resolve().parent.parent / "data" / "flux"


def recorded(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


NAMED = QueueInfo(names=("debug", "batch"), default="batch")
NAMED_NO_DEFAULT = QueueInfo(names=("debug", "batch"))
ANONYMOUS = QueueInfo()


def test_queue_list_named_088_with_colour_codes() -> None:
    text = recorded("queue_list_named_0.88.txt")
    assert "\x1b[" in text  # colour even when piped
    info = parse_queue_list(text)
    assert info.names == ("debug", "batch") and info.default == "batch"
    assert "\x1b" not in strip_ansi(text)


def test_queue_list_stopped_and_limits_088() -> None:
    assert parse_queue_list(recorded("queue_list_named_stopped_0.88.txt")).names == (
        "debug",
        "batch",
    )
    info = parse_queue_list(recorded("queue_list_limits_0.88.txt"))
    assert info.names == ("debug", "batch") and info.default is None


def test_queue_list_anonymous_088_has_no_queue_column() -> None:
    assert parse_queue_list(recorded("queue_list_anon_0.88.txt")).names == ()


def test_queue_list_049_handwritten() -> None:
    info = parse_queue_list(recorded("queue_list_named_0.49.handwritten.txt"))
    assert info.names == ("debug", "batch") and info.default == "batch"
    assert parse_queue_list(recorded("queue_list_anon_0.49.handwritten.txt")).names == ()


def test_config_get_recorded() -> None:
    assert parse_config_json(recorded("config_get_named_0.88.json")) == QueueInfo(
        ("debug", "batch"), "batch", "flux config get"
    )
    assert parse_config_json(recorded("config_get_anon_0.88.json")).names == ()
    limits = parse_config_json(recorded("config_get_limits_0.88.json"))
    assert limits.names == ("debug", "batch") and limits.default is None
    rpc = queue_info_from_config(json.loads(recorded("config_get_named_0.88.json")))
    assert rpc.default == "batch"


def test_anonymous_broker_omits_a_requested_queue(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        assert choose_queue("debug", ANONYMOUS, POLICY_0_49) is None
    assert "omitted" in caplog.text


def test_named_broker_passes_a_valid_queue() -> None:
    assert choose_queue("debug", NAMED, POLICY_0_49) == "debug"


def test_named_broker_unknown_queue_names_the_valid_ones() -> None:
    with pytest.raises(JobSubmissionError, match="valid queues: debug, batch") as caught:
        choose_queue("nosuch", NAMED, POLICY_0_49)
    assert caught.value.scheduler_message == "Invalid queue 'nosuch' specified"


def test_no_queue_falls_back_to_the_default(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        assert choose_queue(None, NAMED, POLICY_0_49) == "batch"
    assert "default queue 'batch'" in caplog.text


def test_no_queue_and_no_default_is_refused_early() -> None:
    with pytest.raises(JobSubmissionError, match="no default queue") as caught:
        choose_queue(None, NAMED_NO_DEFAULT, POLICY_0_49)
    assert caught.value.scheduler_message == "no queue specified"


def test_026_drops_the_queue(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        assert choose_queue("debug", NAMED, POLICY_0_26) is None
    assert "dropped" in caplog.text
    assert choose_queue(None, None, POLICY_0_26) is None


def test_unknown_queue_info_passes_through() -> None:
    assert choose_queue("debug", None, POLICY_0_49) == "debug"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("submit_error_invalid_queue_0.88.stderr", "Invalid queue 'nosuch' specified"),
        ("submit_error_no_queue_0.88.stderr", "no queue specified"),
        ("submit_error_not_valid_queue_0.88.stderr", "'debug' is not a valid queue"),
        ("submit_error_disabled_0.88.stderr", "job submission to debug is disabled: maintenance"),
        (
            "submit_error_duration_0.88.stderr",
            "requested duration (2m) exceeds policy limit of 1m for queue debug",
        ),
        (
            "submit_error_duration_unlimited_0.88.stderr",
            "requested duration (unlimited) exceeds policy limit of 1m for queue debug",
        ),
    ],
)
def test_refusals_keep_flux_words(name: str, message: str) -> None:
    text = recorded(name)
    assert scheduler_message(text) == message
    error = submission_error(text, argv=["flux", "batch"])
    assert isinstance(error, JobSubmissionError)
    assert error.scheduler_message == message and message in str(error)


def test_native_errno_text() -> None:
    # flux.job.submit raises OSError whose text starts with "[Errno 22]".
    assert scheduler_message(
        "[Errno 22] requested duration (2m) exceeds policy limit of 1m for queue debug"
    ).startswith("requested duration")
    assert scheduler_message("flux-batch: ERROR: something new") == "something new"
