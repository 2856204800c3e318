"""``hpcbridge jobs``/``cost`` refresh: one batched query per scheduler and instance."""

import os

import pytest

from hpcbridge import JobState, JobStatus, factory
from hpcbridge.errors import SchedulerUnavailableError, TransportError
from hpcbridge.routing.refreshing import NOT_ASKED, cached, refreshed
from hpcbridge.settings.config import Settings
from hpcbridge.store.jobs import JobRecord

HOST = os.uname().nodename


class FakeAdapter:
    """Answers RUNNING for every job; remembers each call; fails where told."""

    unavailable = set()  # schedulers whose adapter cannot be built
    failing = set()  # schedulers whose query raises
    unknown = set()  # schedulers that answer UNKNOWN

    def __init__(self, settings, calls):
        if settings.scheduler in self.unavailable:
            raise SchedulerUnavailableError(f"no {settings.scheduler} here")
        self.settings = settings
        self.calls = calls
        self.closed = False
        if settings.transport == "ssh":
            self.host_label = f"{settings.ssh_user}@{settings.ssh_host}:{settings.ssh_port or 22}"
        else:
            self.host_label = HOST

    def get_job_statuses(self, job_ids):
        key = (self.settings.scheduler, self.host_label, self.settings.flux_uri)
        self.calls.append((key, list(job_ids)))
        if self.settings.scheduler in self.failing:
            raise TransportError("connection refused")
        state = JobState.UNKNOWN if self.settings.scheduler in self.unknown else JobState.RUNNING
        return {job_id: JobStatus(job_id, state, reason="fake says so") for job_id in job_ids}

    def close(self):
        self.closed = True


@pytest.fixture
def calls(monkeypatch):
    made = []
    monkeypatch.setattr(FakeAdapter, "unavailable", set())
    monkeypatch.setattr(FakeAdapter, "failing", set())
    monkeypatch.setattr(FakeAdapter, "unknown", set())
    monkeypatch.setattr(
        factory, "adapter_from_settings", lambda settings, *_: FakeAdapter(settings, made)
    )
    return made


def record(job_id, scheduler="mock", state="PENDING", **fields):
    fields.setdefault("host", HOST)
    return JobRecord(job_id=job_id, scheduler=scheduler, state=state, **fields)


def settings():
    return Settings.from_env({"HPCBRIDGE_STATE_DIR": "/nonexistent"})


def test_one_query_per_scheduler_and_instance(calls):
    records = [
        record("1"),
        record("2", state="COMPLETED"),  # final: not asked
        record("3"),
        record("10", "slurm", state="RUNNING"),
        record("\u0192a", "flux", flux_uri="local:///a"),
        record("\u0192b", "flux", flux_uri="local:///b"),
        record("\u0192c", "flux", flux_uri="local:///a"),
        record("11", "slurm", transport="ssh", host="me@login1:2222"),
    ]
    listed = refreshed(records, settings())
    assert sorted(calls) == sorted(
        [
            (("mock", HOST, None), ["1", "3"]),
            (("slurm", HOST, None), ["10"]),
            (("flux", HOST, "local:///a"), ["\u0192a", "\u0192c"]),
            (("flux", HOST, "local:///b"), ["\u0192b"]),
            (("slurm", "me@login1:2222", None), ["11"]),
        ]
    )
    assert [item.record.state for item in listed] == ["RUNNING", "COMPLETED", *["RUNNING"] * 6]
    assert not any(item.stale for item in listed)


def test_an_unreachable_place_keeps_its_records_marked(calls, monkeypatch):
    monkeypatch.setattr(FakeAdapter, "unavailable", {"flux"})
    monkeypatch.setattr(FakeAdapter, "failing", {"slurm"})
    monkeypatch.setattr(FakeAdapter, "unknown", {"mock"})
    records = [
        record("1"),
        record("10", "slurm", state="RUNNING"),
        record("\u0192a", "flux", flux_uri="local:///a"),
    ]
    listed = refreshed(records, settings())
    assert [item.record.state for item in listed] == ["PENDING", "RUNNING", "PENDING"]
    assert [item.stale_reason for item in listed] == [
        "fake says so",
        f"slurm on {HOST}: connection refused",
        f"flux on {HOST}: no flux here",
    ]


def test_a_record_from_another_host_is_not_asked_here(calls):
    [item] = refreshed([record("1", host="elsewhere")], settings())
    assert item.stale and "elsewhere" in item.stale_reason
    assert calls == []


def test_cached_marks_only_the_unfinished():
    listed = cached([record("1"), record("2", state="FAILED")])
    assert [item.stale_reason for item in listed] == [NOT_ASKED, None]
