"""Sweeps on the mock scheduler (real detached processes): the cap, parents within a
sweep, a feeder killed halfway and resumed, cancel, the listing, bad input.

The cluster's own cap - a refusal the mock cannot make - is a driver that refuses
past a number of unfinished jobs, as Slurm's ``MaxSubmitJobs`` does; the real one
is in ``test_sweeps_slurm.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from hpcbridge import JobState, JobSubmissionError, LimitRefusedError, MockAdapter, Settings
from hpcbridge.engine.driver import PartialSubmissionError
from hpcbridge.engine.sweeping import Sweep
from hpcbridge.schedulers.mock import MockDriver
from hpcbridge.store.sweeps import SweepBook
from tests.conftest import REPO
from tests.support.spans import most_at_once


def intervals(adapter: Any, ids: List[str]) -> List[Tuple[datetime, datetime]]:
    """(submitted, ended) of each job, from its record."""
    records = adapter.store.get_many("mock", adapter.host_label, ids)
    return [(records[i].submit_time, records[i].end_time) for i in ids]


def test_at_most_max_queued_and_each_bye_after_its_hello(
    mock_adapter: Any, make_script: Any
) -> None:
    hello = make_script("echo hello $1; sleep 0.5", "hello.sh")
    bye = make_script("echo bye $1", "bye.sh")
    sweep = Sweep(mock_adapter, "hb", max_queued=4)
    hellos = sweep.add([(hello, [str(i)]) for i in range(10)])
    byes = sweep.add([(bye, [str(i)]) for i in range(10)], after=hellos)
    final = sweep.wait(poll_interval=1, timeout=300)
    ids = sweep.job_ids()
    assert len(ids) == 20 and {s.state for s in final.values()} == {JobState.COMPLETED}
    assert most_at_once(intervals(mock_adapter, ids)) <= 4
    records = mock_adapter.store.get_many("mock", mock_adapter.host_label, ids)
    for h, b in zip(ids[: len(hellos)], ids[len(hellos) : len(hellos) + len(byes)]):
        assert records[b].start_time >= records[h].end_time  # afterok its own hello
    assert sweep.counts() == {"COMPLETED": 20}


def test_submit_many_with_max_queued_returns_every_id_in_order(
    mock_adapter: Any, make_script: Any, tmp_path: Path
) -> None:
    out = tmp_path / "ran"
    script = make_script(f"echo $1 >> {out}", "each.sh")
    ids = mock_adapter.submit_many([(script, [str(i)]) for i in range(9)], max_queued=2)
    assert len(ids) == 9 and len(set(ids)) == 9
    mock_adapter.wait_all(ids, poll_interval=1, timeout=120)
    assert sorted(out.read_text().split(), key=int) == [str(i) for i in range(9)]
    [name] = SweepBook(mock_adapter.store).names()  # recorded as a sweep, named for it
    assert name.startswith("sweep-")


class CappedDriver(MockDriver):
    """Refuses a submission past ``cap`` unfinished jobs, as Slurm's MaxSubmitJobs does."""

    cap = 3
    refusals = 0

    def submit_many(self, planned: Any) -> Any:
        live = [
            job_id for job_id, status in self.query(self._ids()).items() if not status.is_terminal
        ]
        if len(live) + planned.batch.count > self.cap:
            type(self).refusals += 1
            raise LimitRefusedError("AssocMaxSubmitJobLimit (the test's own cap)")
        return super().submit_many(planned)

    def queue_limit(self, account: Optional[str] = None, *, ask: bool = True) -> Optional[int]:
        return None  # unknown: met on the way, as when the accounting cannot be read

    def _ids(self) -> List[str]:
        folder = self.root / "jobs"
        return [p.name for p in folder.iterdir()] if folder.is_dir() else []


def test_a_refusal_for_the_cluster_cap_holds_the_rest_back_and_is_no_failure(
    state_dir: Path, make_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hpcbridge.schedulers.mock.MockDriver", CappedDriver)
    adapter = MockAdapter(settings=Settings.from_env({}, state_dir=str(state_dir)))
    script = make_script("sleep 0.5", "nap.sh")
    said: List[Tuple[str, str]] = []
    # no cap given, none known: met on the way, and the sweep made for it named
    ids = adapter.submit_many([script] * 8, on_sweep=lambda name, why: said.append((name, why)))
    final = adapter.wait_all(ids, poll_interval=1, timeout=120)
    assert len(ids) == 8 and {s.state for s in final.values()} == {JobState.COMPLETED}
    assert CappedDriver.refusals > 0
    assert [name for name, _ in said] == SweepBook(adapter.store).names(), said
    assert "no more" in said[0][1]
    assert most_at_once(intervals(adapter, ids)) <= CappedDriver.cap
    adapter.close()


class PartlyDriver(MockDriver):
    """Takes tasks 0 and 2 of its first submission and refuses the rest for a cap, as
    Flux does a pipelined batch when a job ends midway (not the first ones only)."""

    calls = 0

    def submit_many(self, planned: Any) -> Any:
        type(self).calls += 1
        batch = planned.batch
        if type(self).calls > 1 or batch.count < 4:
            return super().submit_many(planned)
        took = self._start(batch, [0, 2])  # under one supervisor
        refused = ["flux-job: user has max active jobs"] * (batch.count - 2)
        raise PartialSubmissionError(took, refused, batch.count, limited=True)


def test_the_rest_of_a_partly_refused_submission_is_fed_each_task_once(
    state_dir: Path, make_script: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hpcbridge.schedulers.mock.MockDriver", PartlyDriver)
    adapter = MockAdapter(settings=Settings.from_env({}, state_dir=str(state_dir)))
    out = tmp_path / "ran"
    scripts = [make_script(f"echo {i} >> {out}", f"task{i}.sh") for i in range(6)]
    ids = adapter.submit_many(scripts)  # no cap given or known: met on the way
    final = adapter.wait_all(ids, poll_interval=1, timeout=120)
    assert PartlyDriver.calls > 1 and len(set(ids)) == 6
    assert {status.state for status in final.values()} == {JobState.COMPLETED}
    assert sorted(out.read_text().split(), key=int) == [str(i) for i in range(6)]
    records = adapter.store.get_many("mock", adapter.host_label, ids)
    assert [records[job_id].script for job_id in ids] == scripts  # each id is its task's
    adapter.close()


FEEDER = textwrap.dedent(
    """
    import sys
    from hpcbridge import MockAdapter, Settings
    from hpcbridge.engine.sweeping import Sweep
    state, script = sys.argv[1:3]
    adapter = MockAdapter(settings=Settings.from_env({}, state_dir=state))
    sweep = Sweep(adapter, "killed", max_queued=3)
    sweep.add([(script, [str(i)]) for i in range(30)])
    sweep.submit()
    """
)


def test_a_feeder_killed_halfway_is_resumed_with_each_job_run_once(
    state_dir: Path, make_script: Any, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    script = make_script(f"echo $1 >> {ran}; sleep 0.3", "count.sh")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    feeder = subprocess.Popen([sys.executable, "-c", FEEDER, str(state_dir), script], env=env)
    deadline = time.monotonic() + 60
    while not ran.exists() or len(ran.read_text().split()) < 8:
        assert time.monotonic() < deadline and feeder.poll() is None
        time.sleep(0.1)
    feeder.send_signal(signal.SIGKILL)
    feeder.wait()
    adapter = MockAdapter(settings=Settings.from_env({}, state_dir=str(state_dir)))
    assert SweepBook(adapter.store).counts(SweepBook(adapter.store).get("killed"))["waiting"] > 0
    said = cli("status", "killed", state=state_dir).stdout  # its feeder is dead: it says so
    assert said.startswith("killed: sweep of 30, interrupted: ") and "wait killed" in said, said
    final = Sweep.resume(adapter, "killed").wait(poll_interval=1, timeout=300)
    assert len(final) == 30 and {s.state for s in final.values()} == {JobState.COMPLETED}
    runs = ran.read_text().split()
    assert sorted(runs, key=int) == [str(i) for i in range(30)]  # each task ran once
    adapter.close()


def test_a_sweep_keeps_its_resources_as_validated_when_added(
    state_dir: Path, make_script: Any
) -> None:
    """The settings' defaults of the process that added the tasks are the sweep's: a
    feeder in a shell with other settings sends what was asked."""
    script = make_script("true", "quick.sh")
    env = {"HPCBRIDGE_JOB_NAME": "from-add", "HPCBRIDGE_TIME": "2m"}
    adding = MockAdapter(settings=Settings.from_env(env, state_dir=str(state_dir)))
    sweep = Sweep(adding, "defaults", max_queued=1)
    sweep.add([script] * 2, {"nodes": 1})
    sweep.submit()
    record = SweepBook(adding.store).get("defaults")
    assert record is not None
    asked = {"job_name": "from-add", "time": "120.0s", "nodes": 1}
    assert dict(record.steps[0].resources) == asked
    other = MockAdapter(
        settings=Settings.from_env({"HPCBRIDGE_JOB_NAME": "other"}, state_dir=str(state_dir))
    )
    final = Sweep.resume(other, "defaults").wait(poll_interval=1, timeout=120)
    records = other.store.get_many("mock", other.host_label, list(final))
    assert {r.job_name for r in records.values()} == {"from-add"}
    adding.close()
    other.close()


def test_steps_whose_scripts_share_a_name_each_run_their_own(
    mock_adapter: Any, tmp_path: Path
) -> None:
    """prep/run.sh and train/run.sh in one sweep (one folder, sent in several
    submissions): each task runs the script it was given."""
    ran = tmp_path / "ran"
    scripts = []
    for step in ("prep", "train"):
        folder = tmp_path / step
        folder.mkdir()
        script = folder / "run.sh"
        script.write_text(f"#!/bin/sh\necho {step} $1 >> {ran}\n")
        script.chmod(0o755)
        scripts.append(str(script))
    sweep = Sweep(mock_adapter, "same-names", max_queued=1)
    preps = sweep.add([(scripts[0], [str(i)]) for i in range(2)])
    sweep.add([(scripts[1], [str(i)]) for i in range(2)], after=preps)
    final = sweep.wait(poll_interval=1, timeout=120)
    assert {s.state for s in final.values()} == {JobState.COMPLETED}
    assert sorted(ran.read_text().split("\n")[:-1]) == ["prep 0", "prep 1", "train 0", "train 1"]
    # one name per script in the sweep's one folder, whichever submission staged it
    records = mock_adapter.store.get_many("mock", mock_adapter.host_label, list(final))
    [folder] = {Path(record.remote_dir) for record in records.values()}
    staged = {path.name: path.read_text() for path in folder.glob("run.sh*")}
    assert set(staged) == {"run.sh", "run.sh.2"}
    assert "echo prep" in staged["run.sh"] and "echo train" in staged["run.sh.2"]


def cli(*args: str, state: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HPCBRIDGE_STATE_DIR": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "hpcbridge", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_the_command_feeds_lists_waits_and_cancels_a_sweep(
    state_dir: Path, make_script: Any, tmp_path: Path
) -> None:
    script = make_script("sleep 0.2", "quick.sh")
    lines = tmp_path / "args"
    lines.write_text("\n".join(str(i) for i in range(6)) + "\n")
    made = cli(
        "submit-many",
        script,
        "--args-file",
        str(lines),
        "--max-queued",
        "2",
        "--sweep",
        "quick",
        state=state_dir,
    )
    assert made.returncode == 0, made.stderr
    assert len(made.stdout.split()) == 6
    listed = json.loads(cli("jobs", "--json", state=state_dir).stdout)
    assert [entry.get("sweep") for entry in listed] == ["quick"]  # one entry, not six
    assert listed[0]["total"] == 6 and sum(listed[0]["counts"].values()) == 6
    table = cli("jobs", state=state_dir).stdout
    assert "quick" in table and "sweep of 6" in table
    assert len(json.loads(cli("jobs", "quick", "--json", state=state_dir).stdout)) == 6
    waited = cli("wait", "quick", "--json", state=state_dir)
    assert waited.returncode == 0, waited.stderr
    assert {item["state"] for item in json.loads(waited.stdout)} == {"COMPLETED"}
    # status NAME: the sweep's state and counts, as a line and as jobs --json's entry
    status = cli("status", "quick", state=state_dir)
    assert status.returncode == 0, status.stderr
    assert status.stdout.strip() == "quick: sweep of 6, fed: 6 COMPLETED", status.stdout
    entry = json.loads(cli("status", "quick", "--json", state=state_dir).stdout)
    assert (entry["sweep"], entry["state"], entry["counts"]) == ("quick", "fed", {"COMPLETED": 6})

    slow = make_script("sleep 30", "slow.sh")
    adapter = MockAdapter(settings=Settings.from_env({}, state_dir=str(state_dir)))
    sweep = Sweep(adapter, "slow", max_queued=1)
    sweep.add([slow] * 3)
    sweep._record = sweep._create(None)  # recorded, not fed: as if its feeder died at once
    sweep.book.release("slow")
    cancelled = cli("cancel", "slow", state=state_dir)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "3 job(s) not sent will not be" in cancelled.stdout
    assert sweep.counts() == {"cancelled": 3}
    assert (
        "slow: sweep of 3, cancelled: 3 cancelled" in cli("status", "slow", state=state_dir).stdout
    )
    adapter.close()


def test_bad_input_fails_before_anything_is_recorded(mock_adapter: Any, make_script: Any) -> None:
    script = make_script("true")
    book = SweepBook(mock_adapter.store)
    with pytest.raises(ValueError, match="max_queued"):
        Sweep(mock_adapter, max_queued=0)
    with pytest.raises(ValueError, match="name"):
        Sweep(mock_adapter, "12 bad")
    sweep = Sweep(mock_adapter, "bad")
    with pytest.raises(ValueError, match="not an earlier task"):
        sweep.add([script], after=[0])
    with pytest.raises(JobSubmissionError, match="script not found"):
        sweep.add(["/no/such/script.sh"])
    with pytest.raises(JobSubmissionError, match="no tasks"):
        sweep.submit()
    assert book.names() == []
    Sweep(mock_adapter, "twice").add([script])
    first = Sweep(mock_adapter, "twice")
    first.add([script])
    first.submit()
    second = Sweep(mock_adapter, "twice")
    second.add([script])
    with pytest.raises(JobSubmissionError, match="already recorded"):
        second.submit()
    assert book.names() == ["twice"]


def counts_of(adapter: Any, name: str) -> Dict[str, int]:
    book = SweepBook(adapter.store)
    record = book.get(name)
    assert record is not None
    return book.counts(record)
