"""The floor under every poll interval: a caller asking more often gets the floor (and
one warning); one call's interval is its own; no sleep holds the poller's lock; the
site's settings file sets a floor no user lowers; a status call never waits for the
floor (only a wait waits): it answers with what is known, and since when."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from hpcbridge.engine import polling
from hpcbridge.engine.observation import Observation, Source
from hpcbridge.engine.polling import PollBoard, Poller
from hpcbridge.errors import ConfigurationError
from hpcbridge.model import JobState, JobStatus
from hpcbridge.retrying import Deadline
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from hpcbridge.settings.config import Settings
from hpcbridge.settings.site import parse_site_settings
from hpcbridge.store.jobs import JobStore
from tests.unit.test_slurm_adapter import FakeSlurm


class Scheduler:
    def __init__(self) -> None:
        self.rounds: List[List[str]] = []

    def query(self, job_ids: List[str]) -> Dict[str, Observation]:
        self.rounds.append(list(job_ids))
        return {i: Observation(JobStatus(i, JobState.RUNNING)) for i in job_ids}


@pytest.fixture(autouse=True)
def warn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(polling, "_warned_floor", False)


def test_an_interval_under_the_floor_gets_the_floor_and_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    scheduler = Scheduler()
    poller = Poller(scheduler.query, 10.0, floor=1.0)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="hpcbridge"):
        while time.monotonic() - started < 0.5:  # half the floor, however busy the machine
            poller.ask(["1"], interval=0.01)
            time.sleep(0.05)
    assert len(scheduler.rounds) == 1  # asked every 0.05 s for half the floor: one round
    warnings = [r for r in caplog.records if "under this site's floor" in r.getMessage()]
    assert len(warnings) == 1 and "1 s" in warnings[0].getMessage()
    deadline = time.monotonic() + 10
    while len(scheduler.rounds) < 2 and time.monotonic() < deadline:
        poller.ask(["1"], interval=0.01)
        time.sleep(0.05)
    assert len(scheduler.rounds) == 2  # once the floor has passed, the next round
    assert time.monotonic() - started >= 1.0


def test_one_calls_interval_does_not_change_the_next_calls() -> None:
    """A short interval asked once is not the poller's interval from then on."""
    scheduler = Scheduler()
    poller = Poller(scheduler.query, 30.0)
    poller.ask(["1"], interval=0.05)
    time.sleep(0.1)
    poller.ask(["1"], interval=0.05)
    assert len(scheduler.rounds) == 2
    time.sleep(0.1)
    poller.ask(["1"])  # no interval: the poller's own 30 s, the last round 0.1 s ago
    assert len(scheduler.rounds) == 2
    assert poller.interval == 30.0


def test_the_shared_poll_keeps_the_holders_floor(tmp_path: Path) -> None:
    """Another process's want of 0.01 s does not make the holder poll under its floor."""
    scheduler = Scheduler()
    store = tmp_path / "jobs.db"
    holder = Poller(scheduler.query, 0.3, board=PollBoard(JobStore(store)), target="t", floor=0.3)
    eager = Poller(scheduler.query, 0.01, board=PollBoard(JobStore(store)), target="t")
    holder.ask(["1"])
    started = time.monotonic()
    while time.monotonic() - started < 1.0:
        eager.ask(["2"])  # it wants 0.01 s, and holds no poll
        holder.ask(["1"])
        time.sleep(0.01)
    # One round at once, then one per 0.3 s at most: 4 in 1 s (not 100).
    assert 2 <= len(scheduler.rounds) <= 5, len(scheduler.rounds)


def test_a_one_off_question_keeps_the_floor_after_a_round_and_does_not_wait(
    tmp_path: Path,
) -> None:
    """``hpcbridge status`` in a loop of processes: no round sooner than the floor, and no
    call waits for one (a floor of an hour: a wait would hang the test)."""
    scheduler = Scheduler()
    store = tmp_path / "jobs.db"
    hour = 3600.0
    first = Poller(scheduler.query, hour, board=PollBoard(JobStore(store)), target="t", floor=hour)
    first.ask(["1"], one_off=True)
    first.release()  # nobody holds the poll: only the floor's pace stands in the way
    other = Poller(scheduler.query, hour, board=PollBoard(JobStore(store)), target="t", floor=hour)
    assert other.ask(["2"], one_off=True) == {}  # not asked: what is known answers (tracker)
    assert set(other.ask(["1"], one_off=True)) == {"1"}  # fresh: served, not asked
    assert len(scheduler.rounds) == 1


def test_next_answers_keeps_the_floor(tmp_path: Path) -> None:
    """An id nothing is known of waits for the next round the floor allows, not sooner."""
    scheduler = Scheduler()
    store = tmp_path / "jobs.db"
    first = Poller(scheduler.query, 10.0, board=PollBoard(JobStore(store)), target="t", floor=0.5)
    first.ask(["1"], one_off=True)
    other = Poller(scheduler.query, 10.0, board=PollBoard(JobStore(store)), target="t", floor=0.5)
    assert set(other.next_answers(["2"])) == {"2"}
    assert len(scheduler.rounds) == 2
    lease = other.board.store.query("SELECT last_round FROM poll_lease", ())  # type: ignore[union-attr]
    assert lease[0][0] - first._latest_at["1"] >= 0.5  # the second round: the floor after


def test_no_sleep_holds_the_lock(tmp_path: Path) -> None:
    """A question waiting for another process's round leaves the lock free."""
    scheduler = Scheduler()
    store = tmp_path / "jobs.db"
    holder = Poller(scheduler.query, 1.0, board=PollBoard(JobStore(store)), target="t")
    holder.ask(["1"])  # holds the poll for a while
    waiting = Poller(scheduler.query, 1.0, board=PollBoard(JobStore(store)), target="t")
    thread = threading.Thread(target=waiting.next_answers, args=(["9"],))
    thread.start()
    time.sleep(0.3)  # it is waiting for the holder's next round now
    took = waiting._lock.acquire(timeout=0.5)
    assert took, "the poller's lock is held while it waits"
    waiting._lock.release()
    thread.join(timeout=10)


def test_the_site_floor_beats_the_users_variable(tmp_path: Path) -> None:
    site = tmp_path / "settings.toml"
    site.write_text("# the site's\nmin_poll_interval = 30\npoll_interval = 60\n")
    env = {"HPCBRIDGE_SITE_CONFIG": str(site)}
    settings = Settings.from_env({**env, "HPCBRIDGE_MIN_POLL_INTERVAL": "0"})
    assert settings.min_poll_interval == 30.0
    assert str(site) in settings.sources["min_poll_interval"]
    assert Settings.from_env(env, min_poll_interval=1).min_poll_interval == 30.0
    # A user may raise the floor, and change the site's defaults.
    raised = Settings.from_env({**env, "HPCBRIDGE_MIN_POLL_INTERVAL": "90"})
    assert raised.min_poll_interval == 90.0
    changed = Settings.from_env({**env, "HPCBRIDGE_POLL_INTERVAL": "45"})
    assert changed.poll_interval == 45.0
    assert Settings.from_env(env).poll_interval == 60.0
    with pytest.raises(ConfigurationError, match="site settings file"):
        Settings.from_env(env, site_min_poll_interval=0)


def test_without_a_site_file_the_floor_is_five_seconds_and_0_lifts_it(tmp_path: Path) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("# nothing set here\n")
    env = {"HPCBRIDGE_SITE_CONFIG": str(empty)}
    assert Settings.from_env(env).min_poll_interval == 5.0
    assert Settings.from_env({**env, "HPCBRIDGE_MIN_POLL_INTERVAL": "0"}).min_poll_interval == 0
    with pytest.raises(ConfigurationError, match="HPCBRIDGE_MIN_POLL_INTERVAL='-1'"):
        Settings.from_env({**env, "HPCBRIDGE_MIN_POLL_INTERVAL": "-1"})
    with pytest.raises(ConfigurationError, match="no such file"):
        Settings.from_env({"HPCBRIDGE_SITE_CONFIG": str(tmp_path / "absent.toml")})


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("min_poll_interval = -1", ":1: min_poll_interval = -1: expected a number of seconds"),
        ("\nunknown_limit = 0.5", ":2: unknown_limit = 0.5: expected a whole number"),
        ("poll_interval = 0", "poll_interval = 0: expected a number of seconds of at least"),
        ("squeue_every = 60", ":1: unknown key 'squeue_every'"),
        ("[hpcbridge]", ":1: expected key = value"),
        ("min_poll_interval = 1\nmin_poll_interval = 2", ":2: min_poll_interval is set twice"),
        ("min_poll_interval = true", "expected a number of seconds"),
    ],
)
def test_a_bad_site_file_is_an_error_naming_file_and_line(text: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_site_settings(text, "/etc/hpcbridge/settings.toml")
    message = str(raised.value)
    assert message.startswith("/etc/hpcbridge/settings.toml")
    assert says in message and "ask them" in message


# -- only a wait waits: a status call under the floor answers with what is known ----------


class NoWaiting(Deadline):
    def sleep(self, seconds: float) -> None:
        raise AssertionError("a status call waited for the poll")


@pytest.fixture
def floored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Tuple[RealSlurmAdapter, FakeSlurm]]:
    """An adapter on a fake Slurm with a floor of an hour, whose poller may not wait."""
    monkeypatch.setattr(polling, "Deadline", NoWaiting)
    fake = FakeSlurm()
    env = {"HPCBRIDGE_MIN_POLL_INTERVAL": "3600", "HPCBRIDGE_POLL_INTERVAL": "3600"}
    settings = Settings.from_env(env=env, state_dir=str(tmp_path / "state"), scheduler="slurm")
    adapter = RealSlurmAdapter(
        executor=fake,
        settings=settings,
        store=JobStore(tmp_path / "jobs.db"),
        remote_workdir=str(tmp_path / "jobs"),
        driver="cli",
    )
    yield adapter, fake
    adapter.close()


def squeues(fake: FakeSlurm) -> int:
    return sum(1 for argv in fake.calls if argv[0] in ("squeue", "sacct"))


def test_a_status_right_after_submit_many_answers_from_the_record(
    floored: Tuple[RealSlurmAdapter, FakeSlurm], tmp_path: Path
) -> None:
    adapter, fake = floored
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    first = adapter.submit_job(str(script))
    assert adapter.get_job_status(first).state is JobState.PENDING
    assert squeues(fake) == 1  # the round the floor counts from
    ids = adapter.submit_many([str(script)] * 3)
    for job_id in ids:
        fake.jobs[job_id]["state"] = "RUNNING"  # the scheduler moved on
    asked = time.time()
    observed = adapter.observe(ids)
    assert squeues(fake) == 1  # no round under the floor ...
    records = adapter.store.get_many("slurm", adapter.host_label, ids)
    for job_id in ids:
        seen = observed[job_id]
        assert seen.source is Source.KNOWN and seen.status.state is JobState.PENDING
        # ... and no wait for one: the state is the submission's, as of its record
        assert seen.status.as_of == records[job_id].updated_at
        assert seen.status.as_of is not None and seen.status.as_of.timestamp() <= asked
        assert seen.status.age() is not None
    # the library's statuses are the same, with their age
    statuses = adapter.get_job_statuses(ids)
    assert [statuses[i].as_of for i in ids] == [observed[i].status.as_of for i in ids]
    assert squeues(fake) == 1
    # the first job's answer is fresh (the round's): served as it was, not asked again
    again = adapter.observe([first])[first]
    assert again.source is Source.SCHEDULER and again.answered_at is not None
    assert again.status.as_of is not None and again.status.as_of.timestamp() < asked


def test_under_the_floor_an_exit_code_file_still_tells_an_end(
    floored: Tuple[RealSlurmAdapter, FakeSlurm], tmp_path: Path
) -> None:
    adapter, fake = floored
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\nexit 2\n")
    first = adapter.submit_job(str(script))
    adapter.get_job_status(first)
    job_id = adapter.submit_job(str(script))
    record = adapter.store.get(job_id, "slurm")
    assert record is not None and record.exit_file
    Path(record.exit_file).write_text("2 +1\n")  # the wrapper's last act
    status = adapter.get_job_status(job_id)
    assert (status.state, status.exit_code) == (JobState.FAILED, 2)
    assert squeues(fake) == 1


def test_an_id_nothing_is_known_of_is_asked_at_the_floor(tmp_path: Path) -> None:
    """No record, no answer: nothing to answer with - the next round the floor allows."""
    fake = FakeSlurm()
    env = {"HPCBRIDGE_MIN_POLL_INTERVAL": "0.5"}
    settings = Settings.from_env(env=env, state_dir=str(tmp_path / "state"), scheduler="slurm")
    adapter = RealSlurmAdapter(
        executor=fake, settings=settings, store=JobStore(tmp_path / "jobs.db"), driver="cli"
    )
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    first = adapter.submit_job(str(script))
    adapter.get_job_status(first)
    fake.jobs["4242"] = {"state": "RUNNING", "exit": "0", "reason": ""}  # not submitted here
    assert adapter.get_job_status("4242").state is JobState.RUNNING
    assert squeues(fake) == 2
    adapter.close()
