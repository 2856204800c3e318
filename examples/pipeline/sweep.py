#!/usr/bin/env python3
"""An async Prefect 3 flow that awaits 100 jobs at once: a parameter sweep.

Each trial is a job that scores one value of a parameter and writes ``score.txt``; the
flow submits every trial (``submit_task_async``), then awaits them all together
(``wait_task_async`` under ``asyncio.gather``: each fetches its trial's score as soon
as that job ends) and picks the best.  The flow's event loop is never blocked: one
adapter, hence one thread, follows the 100 jobs, asking the scheduler as one waiter
would (at the adapter's poll interval, ``HPCBRIDGE_POLL_INTERVAL``).

    python examples/pipeline/sweep.py                    # the mock scheduler, 100 trials
    python examples/pipeline/sweep.py --trials 20 --scheduler slurm --time 5

See README.md beside this file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections import Counter
from typing import Any, Dict, List, Optional

from prefect import flow

from hpcbridge.engine.awaiting import off_loop
from hpcbridge.factory import adapter_from_settings
from hpcbridge.integrations.pipeline import JobFailedError, resolve_settings
from hpcbridge.integrations.prefect import submit_task_async, wait_task_async

#: one trial: the loss of the parameter ``$1`` (the best is 42), into score.txt
TRIAL = 'echo "$1 $(( ($1 - 42) * ($1 - 42) ))" > score.txt'


def read_score(path: str) -> Dict[str, int]:
    with open(path, encoding="utf-8") as handle:
        value, loss = handle.read().split()
    return {"value": int(value), "loss": int(loss)}


@flow(name="hpcbridge-example-sweep")
async def sweep(
    trials: int = 100,
    resources: Optional[Dict[str, Any]] = None,
    settings: Optional[Dict[str, Any]] = None,
    timeout: Optional[float] = None,
    local_dir: Optional[str] = None,
) -> Dict[str, Any]:
    """Submit ``trials`` jobs, await them all at once, return the best trial; each score
    is fetched to ``<local_dir>/<job id>/score.txt`` (a new temporary folder when None)."""
    scores_dir = local_dir or tempfile.mkdtemp(prefix="hpcbridge-sweep-")
    # One adapter for every trial: one follower thread waits on all of them.
    adapter = adapter_from_settings(resolve_settings(settings))
    try:
        submitted = await asyncio.gather(
            *(
                submit_task_async(
                    command=TRIAL,
                    arguments=[value],
                    resources=resources or {"ntasks": 1, "time": "5"},
                    artifact="score.txt",
                    adapter=adapter,
                )
                for value in range(trials)
            )
        )
        ended = await asyncio.gather(
            *(
                wait_task_async(
                    job_id,
                    remote,
                    local_dir=os.path.join(scores_dir, job_id),
                    timeout=timeout,
                    adapter=adapter,
                )
                for job_id, remote in submitted
            )
        )
    finally:
        await off_loop(adapter.close)
    scores: List[Dict[str, Any]] = [
        {"job_id": job_id, "state": state.value, **read_score(local)}
        for (job_id, _), (state, local) in zip(submitted, ended)
    ]
    return {
        "scores_dir": scores_dir,
        "trials": len(scores),
        "states": dict(Counter(score["state"] for score in scores)),
        "best": min(scores, key=lambda score: score["loss"]),
        "scores": scores,
    }


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--scheduler", choices=["mock", "slurm", "flux"], help="default: env")
    parser.add_argument("--transport", choices=["local", "ssh"], help="default: env")
    parser.add_argument("--time", default="5", help="each trial's time limit (minutes)")
    parser.add_argument("--timeout", type=float, help="give up on a trial after this many s")
    args = parser.parse_args(argv)
    settings = {
        key: value
        for key, value in (("scheduler", args.scheduler), ("transport", args.transport))
        if value
    }
    try:
        result = asyncio.run(
            sweep(
                trials=args.trials,
                resources={"ntasks": 1, "time": args.time},
                settings=settings or None,
                timeout=args.timeout,
            )
        )
    except JobFailedError as exc:
        print(f"sweep.py: {exc}", file=sys.stderr)
        return 1
    del result["scores"]
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
