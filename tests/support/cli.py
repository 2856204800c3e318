"""Running the ``hpcbridge`` command as a user would: a subprocess of this Python."""

from __future__ import annotations

import os
import subprocess
import sys


def hpcbridge(*args, check=False, timeout=120, env=None):
    result = subprocess.run(
        [sys.executable, "-m", "hpcbridge", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}: {result.stderr}")
    return result
