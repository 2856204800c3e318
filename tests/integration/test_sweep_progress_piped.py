"""``hpcbridge wait NAME`` of a sweep whose feeder died, its stderr a pipe: the feeding it
resumes says how it goes on a line of its own (it was silent until every task was sent),
in words ("2 failed, cancelled or timed out", not "2 not") - on the mock (issue 46,
item 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hpcbridge import MockAdapter, Settings
from hpcbridge.engine.sweeping import Sweep
from tests.conftest import REPO


def test_wait_name_piped_shows_the_feeding(state_dir: Path, make_script: Any) -> None:
    quick = make_script('sleep 0.2\n[ "$1" != 1 ]', "quick.sh")
    adapter = MockAdapter(settings=Settings.from_env({}, state_dir=str(state_dir)))
    sweep = Sweep(adapter, "resumed", max_queued=2)
    sweep.add([(quick, [str(index)]) for index in range(6)])
    sweep._record = sweep._create(None)  # recorded, not fed: as if its feeder died at once
    sweep.book.release("resumed")
    adapter.close()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HPCBRIDGE_STATE_DIR": str(state_dir)}
    waited = subprocess.run(
        [sys.executable, "-m", "hpcbridge", "wait", "resumed", "--poll-interval", "0.3"],
        capture_output=True,  # a pipe, not a terminal
        text=True,
        env=env,
        timeout=300,
    )
    assert waited.returncode == 1, waited.stderr  # task 1 failed
    progress = [line for line in waited.stderr.splitlines() if "sweep resumed:" in line]
    assert progress, waited.stderr
    assert progress[0].startswith("hpcbridge: sweep resumed: ")
    assert " sent, " in progress[0] and "failed, cancelled or timed out" in progress[0]
    assert "\r" not in waited.stderr  # no terminal line rewritten in a pipe
