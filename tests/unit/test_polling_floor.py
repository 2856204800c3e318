"""The floor under every poll interval: a caller asking more often gets the floor (and
one warning); one call's interval is its own; no sleep holds the poller's lock; the
site's settings file sets a floor no user lowers."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Dict, List

import pytest

from hpcbridge.config import Settings
from hpcbridge.engine import polling
from hpcbridge.engine.observation import Observation
from hpcbridge.engine.polling import PollBoard, Poller
from hpcbridge.errors import ConfigurationError
from hpcbridge.model import JobState, JobStatus
from hpcbridge.site_config import parse_site_settings
from hpcbridge.store.jobs import JobStore


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


def test_a_one_off_question_keeps_the_floor_after_a_round(tmp_path: Path) -> None:
    """``hpcbridge status`` in a loop of processes: no round sooner than the floor."""
    scheduler = Scheduler()
    store = tmp_path / "jobs.db"
    first = Poller(scheduler.query, 10.0, board=PollBoard(JobStore(store)), target="t", floor=0.5)
    first.ask(["1"], patient=True)
    other = Poller(scheduler.query, 10.0, board=PollBoard(JobStore(store)), target="t", floor=0.5)
    started = time.monotonic()
    assert set(other.ask(["2"], patient=True)) == {"2"}
    assert time.monotonic() - started >= 0.4  # waited for the floor, then asked
    assert len(scheduler.rounds) == 2
    assert set(other.ask(["1"], patient=True)) == {"1"}  # fresh: served, not asked
    assert len(scheduler.rounds) == 2


def test_no_sleep_holds_the_lock(tmp_path: Path) -> None:
    """A patient question waiting for another process's round leaves the lock free."""
    scheduler = Scheduler()
    store = tmp_path / "jobs.db"
    holder = Poller(scheduler.query, 1.0, board=PollBoard(JobStore(store)), target="t")
    holder.ask(["1"])  # holds the poll for a while
    waiting = Poller(scheduler.query, 1.0, board=PollBoard(JobStore(store)), target="t")
    thread = threading.Thread(target=waiting.ask, args=(["9"], True))
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
