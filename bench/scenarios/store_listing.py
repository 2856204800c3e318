"""The job store with 100,000 records: ``hpcbridge jobs`` (the table: the newest 500
and a sweep of 10,000 as one line of counts), ``jobs --all`` and ``jobs --json`` (every
job), against Python's own ``sqlite3`` reading every row of the same file.

Each sample is one ``subprocess.run`` of the command, wall time, in interleaved
rounds; every job is final, so no scheduler is asked (``--cached`` is not needed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List

from ..common import interleave, row, scenario_result

REPO = Path(__file__).resolve().parents[2]
NAME = "store_listing"
TITLE = "hpcbridge jobs on a store of 100,000 records"

RAW = (
    "import sqlite3, sys\n"
    "rows = sqlite3.connect(sys.argv[1]).execute('SELECT * FROM hpc_jobs ORDER BY id')\n"
    "sys.stdout.write(''.join(repr(r) + '\\n' for r in rows))\n"
)


def make_store(state: Path, count: int, in_sweep: int) -> None:
    """``count`` final mock jobs, the last ``in_sweep`` of them one sweep's."""
    from hpcbridge.store.jobs import JobRecord, JobStore
    from hpcbridge.store.sweeps import FED, Step, SweepBook, SweepRecord, SweepTask, now_text

    store = JobStore(state / "jobs.db")
    now = datetime.now(timezone.utc)
    states = ["COMPLETED"] * 8 + ["FAILED", "CANCELLED"]
    store.add_many(
        JobRecord(
            job_id=str(100000 + i),
            scheduler="mock",
            host="bench",
            job_name=f"job{i}",
            state=states[i % 10],
            exit_code=0 if states[i % 10] == "COMPLETED" else 1,
            submit_time=now - timedelta(seconds=count - i),
            start_time=now - timedelta(seconds=count - i),
            end_time=now - timedelta(seconds=count - i - 5),
            script="/bench/job.sh",
        )
        for i in range(count)
    )
    book = SweepBook(store)
    sweep = SweepRecord(
        name="bench-sweep",
        scheduler="mock",
        transport="local",
        host="bench",
        flux_uri=None,
        folder="/bench",
        max_queued=50,
        steps=[Step({}, {}, ())],
        total=in_sweep,
        created=now_text(),
    )
    book.create(sweep, [SweepTask(i, 0, "/bench/job.sh") for i in range(in_sweep)])
    first = count - in_sweep
    book.mark_sent("bench-sweep", {i: str(100000 + first + i) for i in range(in_sweep)})
    book.release("bench-sweep", FED)
    store.close()


def _timer(argv: List[str], env: Dict[str, str]) -> Callable[[], float]:
    def measure() -> float:
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, env=env, check=False, timeout=300)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[:300]!r}")
        return elapsed * 1000.0

    return measure


def run(quick: bool, workdir: Path) -> Dict[str, Any]:
    count, in_sweep, rounds = (10_000, 1_000, 2) if quick else (100_000, 10_000, 5)
    state = workdir / "store"
    state.mkdir(parents=True, exist_ok=True)
    made = time.perf_counter()
    make_store(state, count, in_sweep)
    made_s = time.perf_counter() - made
    # This checkout's hpcbridge, whichever one is installed.
    env = {**os.environ, "HPCBRIDGE_STATE_DIR": str(state), "PYTHONPATH": str(REPO)}
    base = [sys.executable, "-m", "hpcbridge"]
    raw = [sys.executable, "-c", RAW, str(state / "jobs.db")]
    contenders = {
        "python sqlite3: every row": _timer(raw, env),
        "hpcbridge jobs": _timer([*base, "jobs"], env),
        "hpcbridge jobs --all": _timer([*base, "jobs", "--all"], env),
        "hpcbridge jobs --json": _timer([*base, "jobs", "--json"], env),
    }
    kinds = {name: "hpcbridge" for name in contenders}
    kinds["python sqlite3: every row"] = "raw"
    for measure in contenders.values():  # one untimed warm-up (page cache)
        measure()
    samples, skipped = interleave(contenders, rounds)
    rows = [row(name, values, kind=kinds[name]) for name, values in samples.items()]
    return scenario_result(
        NAME,
        TITLE,
        unit="ms",
        higher_is_better=False,
        baseline="python sqlite3: every row",
        rows=rows,
        params={"rounds": rounds, "records": count, "in_the_sweep": in_sweep},
        notes=[
            f"A store of {count} final mock jobs, the last {in_sweep} one sweep's "
            f"(made in {made_s:.1f} s); every command reads the same file.",
            "The table shows the newest 500 jobs of no sweep and the sweep as one line "
            "(its counts by one grouped query); --all and --json every job.",
        ],
        why={
            "hpcbridge jobs": "the command's import (~0.1 s) over a bare interpreter; the "
            "500 rows and the sweep's counts are two indexed queries",
            "hpcbridge jobs --all": "each row becomes a record, then a formatted line "
            "(~20 us a job in Python)",
            "hpcbridge jobs --json": "each row becomes a record, then a JSON object with "
            "its status and staleness (~25 us a job)",
        },
        extra={"skipped": skipped} if skipped else None,
    )
