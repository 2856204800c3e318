"""Running the ``hpcbridge`` command as a user would: a subprocess of this Python."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

#: the keys README.md documents for a job in ``--json`` (a record adds ``job_name``, Flux ``kind``)
JSON_KEYS = (
    "job_id",
    "state",
    "exit_code",
    "start_time",
    "end_time",
    "native_state",
    "reason",
    "as_of",
)


def hpcbridge(*args, check=False, timeout=120, env=None):
    """The command in this process's environment with ``env`` over it."""
    result = hpcbridge_in({**os.environ, **(env or {})}, *args, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}: {result.stderr}")
    return result


def hpcbridge_in(env, *args, timeout=180):
    """The command in exactly ``env``: nothing of the test process's environment leaks in
    (a new shell of the user, another machine's settings)."""
    return subprocess.run(
        [sys.executable, "-m", "hpcbridge", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def stoppable() -> None:
    """``preexec_fn`` of a command a test stops by a signal: INT, TERM and HUP at their
    defaults - one started with a signal ignored (the suite under ``nohup``; bash's ``&``
    ignores INT) keeps ignoring it, as it should, and the test would wait for nothing."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
