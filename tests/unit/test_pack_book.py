"""The packs' record in the job store (``store.packs``): what a resumed feeder reads back
is what the first one wrote, step by step."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hpcbridge.model import JobState, JobStatus
from hpcbridge.store.jobs import JobStore
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
