"""One waiting process of the ``slurm_polite`` scenario: ``python -m bench.polite_worker``.

    python -m bench.polite_worker KIND FOLDER SCRIPT COUNT INTERVAL

submits ``COUNT`` jobs running ``SCRIPT`` the way ``KIND`` does (``hpcbridge`` - with the
CLI driver, ``hpcbridge-native``, ``hpcbridge-rest`` - ``psij``, ``submitit``, ``maestro``,
``raw``), prints ``SUBMITTED``, waits for a line on stdin
(every process of the round has submitted: the controller's counters were just
reset), waits for its jobs with each one's status polling set to ``INTERVAL``
seconds, and prints one JSON line: how many of its jobs it reported COMPLETED.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List, Tuple

#: how the contender submits: returns the function that waits and counts COMPLETED
Waiter = Callable[[], int]


def _sbatch(argv: List[str]) -> str:
    done = subprocess.run(["sbatch", "--parsable", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"sbatch failed: {done.stderr.strip()}")
    return done.stdout.strip().split(";")[0]


def hpcbridge(
    folder: Path, script: str, count: int, interval: float, driver: str = "cli"
) -> Waiter:
    from hpcbridge import RealSlurmAdapter

    from .scenarios.slurm_common import hpcbridge_settings

    # The processes of a round share one state folder: one user's default store.
    settings = hpcbridge_settings(folder.parent / "state")
    adapter = RealSlurmAdapter(remote_workdir=str(folder), settings=settings, driver=driver)
    ids = adapter.submit_many([script] * count)

    def wait() -> int:
        final = adapter.wait_all(ids, poll_interval=interval, timeout=1800)
        return sum(status.state.value == "COMPLETED" for status in final.values())

    return wait


def psij(folder: Path, script: str, count: int, interval: float) -> Waiter:
    import psij
    from psij.executors.batch.slurm import SlurmExecutorConfig

    config = SlurmExecutorConfig(work_directory=folder, queue_polling_interval=int(interval))
    executor = psij.JobExecutor.get_instance("slurm", config=config)
    jobs = []
    for _ in range(count):
        job = psij.Job(
            psij.JobSpec(
                name=Path(script).stem, executable="/bin/sh", arguments=[script], directory=folder
            )
        )
        executor.submit(job)
        jobs.append(job)

    def wait() -> int:
        for job in jobs:
            job.wait()
        return sum(job.status.state == psij.JobState.COMPLETED for job in jobs)

    return wait


def submitit(folder: Path, script: str, count: int, interval: float) -> Waiter:
    import submitit
    from submitit.helpers import CommandFunction
    from submitit.slurm.slurm import SlurmInfoWatcher, SlurmJob

    # Its watcher (one per process, on the job class) asks sacct at most every delay_s.
    SlurmJob.watcher = SlurmInfoWatcher(delay_s=int(interval))
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(timeout_min=10, name=Path(script).stem)
    with executor.batch():
        jobs = [executor.submit(CommandFunction(["sh", script])) for _ in range(count)]

    def wait() -> int:
        for job in jobs:
            job.wait()
        good = 0
        for job in jobs:
            try:
                job.result()  # read from its result file: no sacct
                good += 1
            except Exception:  # noqa: BLE001 - a job that did not complete
                pass
        return good

    return wait


def maestro(folder: Path, script: str, count: int, interval: float) -> Waiter:
    from maestrowf.abstracts.enums import State
    from maestrowf.interfaces.script.slurmscriptadapter import SlurmScriptAdapter

    adapter = SlurmScriptAdapter(host="localhost", bank="", queue="")
    # Maestro submits each step with its own sbatch; its conductor then asks check_jobs
    # for every unfinished step once per sleep interval.
    ids = [_sbatch([f"--chdir={folder}", "--output=/dev/null", script]) for _ in range(count)]

    def wait() -> int:
        pending, done = set(ids), 0
        while pending:
            time.sleep(interval)
            _, status = adapter.check_jobs(sorted(pending))
            for job_id, state in status.items():
                if state in (State.FINISHED, State.FAILED, State.CANCELLED, State.TIMEDOUT):
                    pending.discard(job_id)
                    done += state == State.FINISHED
        return done

    return wait


def raw(folder: Path, script: str, count: int, interval: float) -> Waiter:
    array = _sbatch([f"--array=0-{count - 1}", f"--chdir={folder}", "--output=/dev/null", script])

    def wait() -> int:
        # The ideal client: one squeue of everything unfinished per interval.
        while True:
            time.sleep(interval)
            listed = subprocess.run(
                ["squeue", "--noheader", f"--jobs={array}", "--format=%i"],
                capture_output=True,
                text=True,
            )
            if listed.returncode == 0 and not listed.stdout.strip():
                return -1  # the runner counts COMPLETED with sacct, after the counters are read

    return wait


KINDS = {
    "hpcbridge": hpcbridge,
    # the same with the pyslurm and REST drivers (the REST driver: HPCBRIDGE_SLURM_REST_URL)
    "hpcbridge-native": functools.partial(hpcbridge, driver="native"),
    "hpcbridge-rest": functools.partial(hpcbridge, driver="rest"),
    "psij": psij,
    "submitit": submitit,
    "maestro": maestro,
    "raw": raw,
}


def parse(argv: List[str]) -> Tuple[str, Path, str, int, float]:
    kind, folder, script, count, interval = argv
    return kind, Path(folder), script, int(count), float(interval)


def main(argv: List[str]) -> int:
    kind, folder, script, count, interval = parse(argv)
    folder.mkdir(parents=True, exist_ok=True)
    wait = KINDS[kind](folder, script, count, interval)
    print("SUBMITTED", flush=True)
    sys.stdin.readline()
    print(json.dumps({"completed": wait()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
