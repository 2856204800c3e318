"""The hello/bye sweep of the Slurm sweep tests: PAIRS hellos, each bye after its hello;
imported by the test and by the feeder process it starts and kills."""

from __future__ import annotations

from typing import Any, Dict

PAIRS = 300  # 600 jobs


def add_pairs(sweep: Any, made: Dict[str, str]) -> None:
    """Add the hellos, then the byes after them, to ``sweep`` (``made``: the scripts)."""
    hellos = sweep.add([(made["hello"], [str(i)]) for i in range(PAIRS)], {"time": "5"})
    sweep.add([(made["bye"], [str(i)]) for i in range(PAIRS)], {"time": "5"}, after=hellos)
