"""Start-up: a fresh interpreter importing hpcbridge, and the ``hpcbridge``
command's ``--help``, against ``python -c pass`` (and the peers' imports).

Each sample is one ``subprocess.run`` of the command, wall time, in
interleaved rounds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

from ..common import interleave, peer_versions, row, scenario_result, skipped_row

NAME = "startup"
TITLE = "Start-up: import and --help"


def _timer(argv: List[str]) -> Callable[[], float]:
    def measure() -> float:
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, check=False, timeout=120)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[:200]!r}")
        return elapsed * 1000.0

    return measure


def run(quick: bool, workdir: Path) -> Dict[str, Any]:
    rounds = 3 if quick else 10
    python = sys.executable
    command = shutil.which("hpcbridge")
    help_argv = [command, "--help"] if command else [python, "-m", "hpcbridge.cli", "--help"]
    contenders: Dict[str, Callable[[], float]] = {
        "python -c pass": _timer([python, "-c", "pass"]),
        "python -c 'import hpcbridge'": _timer([python, "-c", "import hpcbridge"]),
        "hpcbridge --help": _timer(help_argv),
    }
    kinds = {
        "python -c pass": "raw",
        "python -c 'import hpcbridge'": "hpcbridge",
        "hpcbridge --help": "hpcbridge",
    }
    peers = peer_versions()
    skipped_peers: Dict[str, str] = {}
    for package, module in (("psij-python", "psij"), ("submitit", "submitit")):
        label = f"python -c 'import {module}'"
        if peers.get(package):
            contenders[label] = _timer([python, "-c", f"import {module}"])
            kinds[label] = "peer"
        else:
            skipped_peers[label] = f"{package} is not installed (pip install '.[bench]')"
    # One untimed warm-up of each (page cache, .pyc files).
    for measure in contenders.values():
        try:
            measure()
        except Exception:  # noqa: BLE001 - the timed rounds report it
            pass
    samples, skipped = interleave(contenders, rounds)
    skipped.update(skipped_peers)
    rows = [
        row(
            name,
            values,
            kind=kinds[name],
            reference_only=kinds[name] == "peer",
        )
        for name, values in samples.items()
    ]
    rows += [skipped_row(name, reason, kind="peer") for name, reason in skipped.items()]
    return scenario_result(
        NAME,
        TITLE,
        unit="ms",
        higher_is_better=False,
        baseline="python -c pass",
        rows=rows,
        params={"rounds": rounds, "samples_per_command": rounds, "command": help_argv},
        notes=[
            "Each sample is a fresh process (subprocess.run, wall time); one untimed warm-up "
            "of each command first.",
            "The peers' imports are shown for reference only (not counted as a loss).",
        ],
        why={
            "python -c 'import hpcbridge'": "any import costs more than an empty interpreter; "
            "hpcbridge imports no paramiko/flux/pyslurm at import time",
            "hpcbridge --help": "the command imports the CLI (argparse, the settings) on top "
            "of the interpreter",
        },
        extra={
            "environment": {"PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE")}
        },
    )
