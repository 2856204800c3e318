"""Contenders that submit N trivial jobs (``true``) to the Slurm test cluster.

Each factory returns a callable that submits, times only the submission,
cancels what it submitted (``scancel`` of exactly those ids, then waits until
none is pending or running) and returns jobs per second.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

from ..common import Skip, scancel

Contender = Callable[[], float]

_names = itertools.count()


def _sbatch_id(out: str) -> str:
    return out.strip().splitlines()[-1].split(";")[0].strip()


def submission_rate(count: int, submit: Callable[[List[Optional[str]]], None]) -> float:
    """Jobs/s of ``submit(ids)`` (which appends the ids it made); those jobs are then
    cancelled, even when it fails half-way.  Only the submission is timed."""
    ids: List[Optional[str]] = []
    try:
        started = time.perf_counter()
        submit(ids)
        elapsed = time.perf_counter() - started
    finally:
        scancel([job_id for job_id in ids if job_id])
    return count / elapsed


@contextmanager
def partitions_held() -> Iterator[None]:
    """Every partition State=DOWN meanwhile: sbatch still queues jobs, none runs.

    Submission is then measured alone: no contender pays for starting the jobs
    it (or the contender before it) just submitted on the same two cores.
    """
    listed = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True)
    names = sorted(set(listed.stdout.split()))

    def set_state(state: str) -> None:
        for name in names:
            subprocess.run(
                ["scontrol", "update", f"PartitionName={name}", f"State={state}"],
                capture_output=True,
                check=False,
            )

    set_state("DOWN")
    try:
        yield
    finally:
        set_state("UP")


def hpcbridge_settings(state_dir: Path) -> Any:
    """The adapters' settings: the defaults, and slurmrestd's URL where the REST rows run
    (``bench/rest_cluster.py``; the driver reads its token from ``SLURM_JWT``)."""
    from hpcbridge import Settings

    env = {k: v for k, v in os.environ.items() if k == "HPCBRIDGE_SLURM_REST_URL"}
    return Settings.from_env(env=env, state_dir=str(state_dir), scheduler="slurm")


def hpcbridge_adapter(workdir: Path, driver: str = "cli") -> Any:
    from hpcbridge import RealSlurmAdapter

    folder = workdir / f"hpcbridge-{next(_names)}"
    settings = hpcbridge_settings(folder / "state")
    return RealSlurmAdapter(remote_workdir=str(folder / "jobs"), settings=settings, driver=driver)


def opened(adapter: Any) -> Any:
    """What a client asks once, before its first job (untimed): ``MaxArraySize``, and for
    the REST driver the API version both sides speak (``GET /openapi/v3``)."""
    adapter.max_array_size()
    if adapter.open().driver.name == "rest":
        adapter.open().driver.api_version()
    return adapter


def raw_sbatch_loop(script: str, count: int, workdir: Path) -> Contender:
    argv = [
        "sbatch",
        "--parsable",
        "--job-name=hpcbb-raw",
        "--output=/dev/null",
        f"--chdir={workdir}",
        script,
    ]

    def submit(ids: List[Optional[str]]) -> None:
        for _ in range(count):
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"sbatch failed: {done.stderr.strip()[:200]}")
            ids.append(_sbatch_id(done.stdout))

    def measure() -> float:
        return submission_rate(count, submit)

    return measure


def raw_sbatch_array(script: str, count: int, workdir: Path) -> Contender:
    argv = [
        "sbatch",
        "--parsable",
        f"--array=0-{count - 1}",
        "--job-name=hpcbb-rawarray",
        "--output=/dev/null",
        f"--chdir={workdir}",
        script,
    ]

    def submit(ids: List[Optional[str]]) -> None:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"sbatch --array failed: {done.stderr.strip()[:200]}")
        ids.append(_sbatch_id(done.stdout))

    def measure() -> float:
        return submission_rate(count, submit)

    return measure


def hpcbridge_submit_loop(script: str, count: int, workdir: Path, driver: str = "cli") -> Contender:
    adapter = opened(hpcbridge_adapter(workdir, driver))  # not timed

    def submit(ids: List[Optional[str]]) -> None:
        for _ in range(count):
            ids.append(adapter.submit_job(script))

    def measure() -> float:
        return submission_rate(count, submit)

    return measure


def hpcbridge_submit_many(script: str, count: int, workdir: Path, driver: str = "cli") -> Contender:
    adapter = opened(hpcbridge_adapter(workdir, driver))  # scontrol show config: not timed

    def submit(ids: List[Optional[str]]) -> None:
        ids.extend(adapter.submit_many([script] * count))
        if len(ids) != count:
            raise RuntimeError(f"submit_many returned {len(ids)} ids for {count} jobs")

    def measure() -> float:
        return submission_rate(count, submit)

    return measure


def psij_slurm_executor(workdir: Path, **config: Any) -> Any:
    try:
        import psij
        from psij.executors.batch.slurm import SlurmExecutorConfig
    except ImportError as exc:
        raise Skip(f"psij-python is not installed ({exc}); pip install '.[bench]'") from exc
    folder = workdir / f"psij-{next(_names)}"
    folder.mkdir(parents=True, exist_ok=True)
    return psij.JobExecutor.get_instance(
        "slurm", config=SlurmExecutorConfig(work_directory=folder, **config)
    )


def psij_submit_loop(count: int, workdir: Path) -> Contender:
    import psij

    executor = psij_slurm_executor(workdir)

    def submit(ids: List[Optional[str]]) -> None:
        for _ in range(count):
            job = psij.Job(psij.JobSpec(executable="true", directory=workdir))
            executor.submit(job)
            ids.append(job.native_id)

    def measure() -> float:
        return submission_rate(count, submit)

    return measure


def submitit_executor(workdir: Path) -> Any:
    try:
        import submitit
    except ImportError as exc:
        raise Skip(f"submitit is not installed ({exc}); pip install '.[bench]'") from exc
    executor = submitit.AutoExecutor(folder=workdir / f"submitit-{next(_names)}", cluster="slurm")
    executor.update_parameters(timeout_min=5, name="hpcbb-submitit")
    return executor


def submitit_submit_loop(count: int, workdir: Path) -> Contender:
    from submitit.helpers import CommandFunction

    executor = submitit_executor(workdir)

    def submit(ids: List[Optional[str]]) -> None:
        for _ in range(count):
            ids.append(executor.submit(CommandFunction(["true"])).job_id)

    def measure() -> float:
        return submission_rate(count, submit)

    return measure


def submitit_batch(count: int, workdir: Path) -> Contender:
    from submitit.helpers import CommandFunction

    executor = submitit_executor(workdir)

    def submit(ids: List[Optional[str]]) -> None:
        with executor.batch():
            jobs = [executor.submit(CommandFunction(["true"])) for _ in range(count)]
        ids.extend(job.job_id for job in jobs)

    def measure() -> float:
        return submission_rate(count, submit)

    return measure
