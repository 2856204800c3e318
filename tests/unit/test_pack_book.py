"""The packs' record in the job store (``store.packs``): what a resumed feeder reads back
is what the first one wrote, step by step."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hpcbridge import MockAdapter, Settings
from hpcbridge.model import INSTANCE_GONE, JobState, JobStatus
from hpcbridge.packing.settling import is_lost, settle_gone
from hpcbridge.store.jobs import JobRecord, JobStore
from hpcbridge.store.packs import ENDED, SENDING, SENT, WAITING, PackBook, PackRecord, PackTask


def record(name: str = "p1") -> PackRecord:
    return PackRecord(
        name, "nodes=1,time=10:00,count=1", "slurm", "local", "here", None, None,
        {"time": "60.0s"}, "/opt/flux/bin/flux", 60.0, 3, "",
    )  # fmt: skip


def test_a_pack_reads_back_as_written_step_by_step(tmp_path: Path) -> None:
    book = PackBook(JobStore(tmp_path / "jobs.db"))
    tasks = [PackTask(i, "/s/t.sh", (str(i),), {"K": "v"} if i == 2 else {}) for i in range(3)]
    book.create(record(), tasks)
    stored = book.get("p1")
    assert stored is not None and stored.created and stored.feeder
    assert replace(stored, created="", feeder="", beat=0.0) == record()
    with pytest.raises(ValueError):
        book.create(record(), tasks)  # a name is one pack's
    book.asked("p1", "101", 1000.0)
    book.sending("p1", [0, 1], "101", "tok", "2026-12-04T19:00:00")
    book.sent("p1", {0: "f1"})
    end = datetime(2026, 12, 4, 19, 1, tzinfo=timezone.utc)
    book.ended("p1", {0: JobStatus("f1", JobState.COMPLETED, 0, end, end, "COMPLETED")})
    book.waiting("p1", [2], again=True)
    back = book.tasks("p1")
    assert [task.state for task in back] == [ENDED, SENDING, WAITING]
    assert back[0].final == JobStatus("f1", JobState.COMPLETED, 0, end, end, "COMPLETED")
    assert (back[1].allocation, back[1].token, back[1].made) == (
        "101",
        "tok",
        "2026-12-04T19:00:00",
    )
    assert back[2].again and back[2].environment == {"K": "v"} and back[2].arguments == ("2",)
    assert book.counts("p1") == {"COMPLETED": 1, "waiting": 2}  # sending counts as waiting
    book.sent("p1", {1: "f2"})
    assert book.counts("p1") == {"COMPLETED": 1, "sent": 1, "waiting": 1}
    assert book.names() == ["p1"]
    assert book.tasks("p1")[1].state == SENT and book.tasks("p1")[1].job_id == "f2"
    book.renewed("p1", "101")
    book.released("p1", ["101"])
    (held,) = book.allocations("p1")
    assert (held.job_id, held.asked, held.renewed, held.released) == ("101", 1000.0, True, True)


def test_a_live_feeder_keeps_its_pack_and_a_cancel_is_seen_by_all(tmp_path: Path) -> None:
    book = PackBook(JobStore(tmp_path / "jobs.db"))
    book.create(record(), [])
    assert book.take("p1") is None  # this process made it: it feeds it
    assert book.cancelled_by("p1") is None
    book.cancel("p1")
    assert book.cancelled_by("p1")
    with pytest.raises(KeyError):
        book.take("nobody")


def test_a_sent_task_counts_as_its_job_and_one_lost_with_its_instance_as_lost(
    tmp_path: Path,
) -> None:
    """``holders`` finds the sent tasks and their allocations; ``counts`` shows a sent task
    by its job's recorded state, ``lost`` for one whose instance went first; ``state``."""
    store = JobStore(tmp_path / "jobs.db")
    book = PackBook(store)
    book.create(record(), [PackTask(i, "/s/t.sh", (str(i),), {}) for i in range(3)])
    book.asked("p1", "101", 1000.0)
    book.sending("p1", [0, 1], "101", "tok", "2026-12-04T19:00:00")
    book.sent("p1", {0: "f1", 1: "f2"})
    store.add_many(
        [
            JobRecord("f1", "flux", host="here", state="RUNNING"),
            JobRecord("f2", "flux", host="here"),
        ]
    )
    assert book.holders(["f1", "f2", "other"]) == [
        ("f1", "p1", "101", False),
        ("f2", "p1", "101", False),
    ]
    assert book.counts("p1") == {"RUNNING": 1, "PENDING": 1, "waiting": 1}
    gone = JobStatus("f1", JobState.CANCELLED, native_state=INSTANCE_GONE, reason="gone")
    store.update_statuses("flux", "here", [gone])
    assert book.counts("p1") == {"lost": 1, "PENDING": 1, "waiting": 1}
    assert book.state("p1") == "feeding"  # this process made it and lives
    book.let_go("p1")
    assert book.state("p1") == "interrupted"
    book.ended("p1", {i: JobStatus(f"f{i}", JobState.COMPLETED) for i in range(3)})
    assert book.state("p1") == "done"
    book.cancel("p1")
    assert book.state("p1") == "cancelled"


def test_settle_gone_keeps_a_wrappers_end_and_cancels_the_rest(tmp_path: Path) -> None:
    """A pack's tasks whose instance is gone: the one whose wrapper wrote its exit code
    ended so, one recorded as ended stays so, the other ends CANCELLED, instance gone -
    all recorded, nothing asked (the outer adapter is a mock: no Flux here)."""
    outer = MockAdapter(settings=Settings.from_env({}, state_dir=str(tmp_path)))
    host = outer.host_label
    exit_file = tmp_path / "f1.exit"
    exit_file.write_text("0 +1.5\n")
    end = datetime(2026, 12, 4, 19, 1, tzinfo=timezone.utc)
    outer.store.add_many(
        [
            JobRecord("f1", "flux", host=host, state="RUNNING", exit_file=str(exit_file)),
            JobRecord("f2", "flux", host=host, state="RUNNING", exit_file=str(tmp_path / "no")),
            JobRecord("f3", "flux", host=host, state="FAILED", exit_code=3, end_time=end),
        ]
    )
    settled = settle_gone(outer, ["f1", "f2", "f3"], "its allocation 101 was released")
    assert (settled["f1"].state, settled["f1"].exit_code) == (JobState.COMPLETED, 0)
    assert settled["f1"].native_state == INSTANCE_GONE and not is_lost(settled["f1"])
    assert is_lost(settled["f2"]) and settled["f2"].reason == "its allocation 101 was released"
    assert (settled["f3"].state, settled["f3"].exit_code) == (JobState.FAILED, 3)
    recorded = outer.store.statuses("flux", host, ["f1", "f2", "f3"])
    assert {job_id: status.state for job_id, status in recorded.items()} == {
        "f1": JobState.COMPLETED,
        "f2": JobState.CANCELLED,
        "f3": JobState.FAILED,
    }
    assert recorded["f1"].native_state == INSTANCE_GONE  # a status asks no gone instance
    outer.close()
