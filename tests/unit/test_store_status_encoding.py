"""A job's status as the store writes it (``store.records``): one encoding for a record's
columns, a poll round's entry and a pack task's final status, read back the same; a pack
task's final status written by the previous release (``JobStatus.to_json``) still reads."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from hypothesis import given, settings

from hpcbridge.model import JobState, JobStatus
from hpcbridge.store.records import (
    status_from_json,
    status_from_row,
    status_from_values,
    status_json,
    status_values,
)
from tests.support.statuses import job_statuses

_statuses = job_statuses()


def _whole(status: JobStatus) -> tuple:
    return (status, status.extra, status.as_of)


@settings(max_examples=80, deadline=None)
@given(_statuses)
def test_a_status_round_trips_as_values_and_as_json(status: JobStatus) -> None:
    assert _whole(status_from_values(status.job_id, status_values(status))) == _whole(status)
    assert _whole(status_from_json(status_json(status))) == _whole(status)


@settings(max_examples=80, deadline=None)
@given(_statuses)
def test_a_record_row_reads_as_the_status_without_extra(status: JobStatus) -> None:
    values = status_values(status)
    row = (status.job_id, *values[:6], values[7])  # the columns of SELECT_STATUS
    assert _whole(status_from_row(row)) == _whole(status.with_(extra={}))


def test_a_final_status_of_the_previous_release_still_reads() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    status = JobStatus("7", JobState.FAILED, 3, moment, moment, "FAILED", "NonZeroExitCode")
    old = json.dumps(status.to_json())  # how packs kept it before
    assert _whole(status_from_json(old)) == _whole(status)
