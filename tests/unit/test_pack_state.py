"""Where a named pack stands, read from its record (``packing.state.standing``: the one
way a new pack and a resumed one start), and the lease taken or its live feeder followed
(``engine.feeding.take_or_follow``, for sweeps and packs alike)."""

from __future__ import annotations

import os
import socket
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import List

from hpcbridge.engine.feeding import take_or_follow
from hpcbridge.model import JobState, JobStatus
from hpcbridge.packing.state import standing
from hpcbridge.store.jobs import JobStore
from hpcbridge.store.packs import (
    ENDED,
    SENDING,
    SENT,
    WAITING,
    PackAllocation,
    PackBook,
    PackRecord,
    PackTask,
)

END = datetime(2026, 12, 4, 19, 1, tzinfo=timezone.utc)
DONE = JobStatus("f0", JobState.COMPLETED, 0, END, END, "COMPLETED")


def task(index: int, state: str = WAITING, **fields: object) -> PackTask:
    return PackTask(index, "/s/t.sh", (str(index),), {}, state, **fields)  # type: ignore[arg-type]


def test_a_new_pack_stands_with_every_task_waiting_and_no_allocation() -> None:
    stands = standing([task(i) for i in range(3)], [], 1000.0, 50.0)
    assert list(stands.pending) == [0, 1, 2]
    assert stands.held == [] and stands.finals == {} and stands.sent_again == set()


def test_each_recorded_task_stands_where_its_record_says() -> None:
    made = "2026-12-04T19:00:00"
    tasks = [
        task(0, ENDED, allocation="101", job_id="f0", final=DONE),
        task(1, SENT, allocation="101", job_id="f1"),
        task(2, SENDING, allocation="101", token="tok", made=made),
        task(3, SENT, allocation="102", job_id="f3", again=True),  # its allocation released
        task(4, WAITING, again=True),  # lost once, waiting to be sent again
        task(5),
    ]
    allocations = [
        PackAllocation("101", 990.0, renewed=True, released=False),
        PackAllocation("102", 900.0, renewed=False, released=True),
    ]
    stands = standing(tasks, allocations, 1000.0, 50.0)
    first, gone = stands.held
    assert (first.job_id, first.asked_at, first.renewed, first.released) == (
        "101",
        40.0,
        True,
        False,
    )
    assert first.in_flight == {"f1": 1} and first.sending == {"tok": [2]}
    assert stands.made == {"tok": datetime.fromisoformat(made)}
    # a released allocation keeps what was in it: the feeder settles it as lost with it
    assert gone.released and gone.in_flight == {"f3": 3}
    assert stands.finals == {0: DONE}
    assert list(stands.pending) == [4, 5]
    assert stands.sent_again == {3, 4}


def record() -> PackRecord:
    return PackRecord(
        "p1", "nodes=1,time=10:00,count=1", "slurm", "local", "here", None, None,
        {"time": "60.0s"}, "flux", 60.0, 0, "",
    )  # fmt: skip


def held_by(book: PackBook, pid: int) -> None:
    """The pack's lease as held by process ``pid`` of this host."""
    book.store.write_many(
        "UPDATE packs SET feeder = ? WHERE name = ?", [(f"{socket.gethostname()}:{pid}", "p1")]
    )


def test_a_live_feeder_is_followed_and_its_lease_taken_once_it_died(tmp_path: Path) -> None:
    book = PackBook(JobStore(tmp_path / "jobs.db"))
    book.create(record(), [])
    held_by(book, os.getppid())  # alive: the process that started this one
    followed: List[str] = []

    def follow(holder: str) -> bool:
        followed.append(holder)
        held_by(book, _pid_of_ended())  # its feeder dies meanwhile
        return False

    assert take_or_follow(book, "p1", follow, "pack p1")
    assert followed == [f"{socket.gethostname()}:{os.getppid()}"]
    assert book.take("p1") is None  # this process holds it now


def test_following_stops_once_nothing_is_left_to_feed(tmp_path: Path) -> None:
    book = PackBook(JobStore(tmp_path / "jobs.db"))
    book.create(record(), [])
    held_by(book, os.getppid())
    followed: List[str] = []
    assert not take_or_follow(book, "p1", lambda holder: not followed.append(holder), "pack p1")
    assert len(followed) == 1
    assert book.take("p1") is not None  # still its feeder's


def _pid_of_ended() -> int:
    """The id of a process that has ended (and was reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid
