"""The seed's hello_bye study on any scheduler: 4 greetings x 4 names, then a dependent bye.

    python examples/hello_bye/study.py                       # mock scheduler, this machine
    HPCBRIDGE_SCHEDULER=slurm python examples/hello_bye/study.py --time 5
    HPCBRIDGE_SCHEDULER=flux  python examples/hello_bye/study.py --time 60s

The 16 hello steps go in with one ``submit_many`` (one ``sbatch --array`` on Slurm,
pipelined ``submit_async`` on Flux); each bye step waits for its own hello step
(``depends_on``), as in the study's topology.  Everything is then followed with
``wait_all``: one scheduler query per poll for all 32 jobs.

On Flux every step is a plain job (``nested=False``: the script runs directly as
the job's tasks, at Flux's own rate); ``--nested`` makes each a batch job, a Flux
instance of its own - the better choice for a step that launches its own parallel
work (``$HPCBRIDGE_LAUNCHER -n 4 ./app``) or wants an instance to itself.  Slurm
and the mock scheduler have one kind of job and ignore the choice.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

from hpcbridge import JobState, get_scheduler_adapter

HERE = Path(__file__).resolve().parent
NAMES = ["Pam", "Jim", "Michael", "Dwight"]
GREETINGS = ["Hello", "Ciao", "Hey", "Hi"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time", default="5", help="per-step time limit (default 5 minutes)")
    parser.add_argument("--poll-interval", type=float, default=2.0)
    parser.add_argument(
        "--nested", action="store_true", help="Flux: batch jobs instead of plain jobs"
    )
    args = parser.parse_args(argv)

    adapter = get_scheduler_adapter()
    resources = {"ntasks": 1, "time": args.time, "job_name": "hello_world"}
    combos = list(itertools.product(GREETINGS, NAMES))
    hello_ids = adapter.submit_many(
        [(str(HERE / "hello.sh"), [greeting, name]) for greeting, name in combos],
        resources=resources,
        nested=args.nested,
    )
    bye_ids = [
        adapter.submit_job(
            HERE / "bye.sh",
            {**resources, "job_name": "bye_world"},
            depends_on=hello_id,
            arguments=[f"{greeting} {name}"],
            nested=args.nested,
        )
        for hello_id, (greeting, name) in zip(hello_ids, combos)
    ]
    print(f"{adapter.describe()}: {len(hello_ids)} hello + {len(bye_ids)} bye jobs submitted")
    final = adapter.wait_all(hello_ids + bye_ids, poll_interval=args.poll_interval)
    failed = [status for status in final.values() if status.state is not JobState.COMPLETED]
    for hello_id in hello_ids[:2]:
        print(f"{hello_id}: {adapter.get_job_logs(hello_id).strip()}")
    print(f"{len(final) - len(failed)} of {len(final)} steps COMPLETED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
