"""Slurm 25.11 in process: pyslurm vs the CLI driver vs raw sbatch/squeue, N = 500 jobs.

Runs against the second test cluster (a Slurm built under ``/opt/slurm-25.11``,
containers/slurm/README.md) with pyslurm built against it, in one process:

* submit array: 500 trivial jobs as one array - raw ``sbatch --array`` (the
  baseline), raw ``pyslurm.JobSubmitDescription(array=...).submit()``, hpcbridge
  ``submit_many`` with the CLI driver and with the native (pyslurm) driver;
* submit one by one: 500 jobs, one submission each - raw ``sbatch`` loop, raw
  pyslurm loop, hpcbridge ``submit_job`` loop with each driver;
* refresh: one status refresh of 500 pending jobs (each waits on one held job) -
  raw ``squeue -t all -j <ids>``, raw ``pyslurm.Jobs.load()``, hpcbridge
  ``get_job_statuses`` of a fresh adapter with each driver.

All in ms for the 500 (lower is better).  Submissions are cancelled right after
each sample, outside the timing.
"""

from __future__ import annotations

import itertools
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

from ..common import (
    Skip,
    interleave,
    prefix_slurm_environment,
    row,
    run_command,
    scancel,
    scenario_result,
    skipped_row,
    skipped_scenario,
    trivial_script,
)

NAME = "slurm_pyslurm"
TITLE = "Slurm 25.11: pyslurm vs the CLI driver vs raw commands, 500 jobs (ms)"

RAW = "raw: sbatch / squeue"
RAW_PYSLURM = "raw: pyslurm"
CLI = "hpcbridge, CLI driver"
NATIVE = "hpcbridge, native driver (pyslurm)"
KINDS = {RAW: "raw", RAW_PYSLURM: "raw", CLI: "hpcbridge", NATIVE: "hpcbridge"}
GROUPS = ("submit array", "submit one by one", "refresh")

_names = itertools.count()

#: one sample: the timed work on its own, in ms (it cleans up after itself)
Sample = Callable[[], float]
#: submits jobs, appending their ids
Work = Callable[[List[str]], None]


def _timed(work: Callable[[List[str]], None]) -> float:
    """ms of ``work(ids)``; the jobs it made are cancelled afterwards, even on failure."""
    ids: List[str] = []
    try:
        started = time.perf_counter()
        work(ids)
        return (time.perf_counter() - started) * 1000
    finally:
        scancel(ids)


def _adapter(workdir: Path, driver: str) -> Any:
    from hpcbridge import RealSlurmAdapter, Settings

    folder = workdir / f"hpcbridge-{driver}-{next(_names)}"
    settings = Settings.from_env(env={}, state_dir=str(folder / "state"), scheduler="slurm")
    adapter = RealSlurmAdapter(
        remote_workdir=str(folder / "jobs"), settings=settings, driver=driver
    )
    adapter.max_array_size()  # asked once per adapter: not timed
    return adapter


def _sbatch(argv: List[str]) -> str:
    done = subprocess.run(["sbatch", "--parsable", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"sbatch failed: {done.stderr.strip()[:200]}")
    return done.stdout.strip().split(";")[0]


def _pyslurm_submit(pyslurm: Any, script_text: str, workdir: Path, **extra: Any) -> str:
    description = pyslurm.JobSubmitDescription(
        script=script_text,
        working_directory=str(workdir),
        standard_output="/dev/null",
        name="hpcbb-pyslurm",
        **extra,
    )
    return str(description.submit())


def submitters(
    count: int, script: str, workdir: Path, pyslurm: Any
) -> Dict[str, Dict[str, Sample]]:
    """group -> contender -> one sample."""
    text = Path(script).read_text()
    base = ["--job-name=hpcbb-raw", "--output=/dev/null", f"--chdir={workdir}"]
    cli, native = _adapter(workdir, "cli"), _adapter(workdir, "native")
    array = f"0-{count - 1}"

    def each(submit: Callable[[], str]) -> Work:
        return lambda ids: ids.extend(submit() for _ in range(count))

    works: Dict[str, Dict[str, Work]] = {
        "submit array": {
            RAW: lambda ids: ids.append(_sbatch([*base, f"--array={array}", script])),
            RAW_PYSLURM: lambda ids: ids.append(
                _pyslurm_submit(pyslurm, text, workdir, array=array)
            ),
            CLI: lambda ids: ids.extend(cli.submit_many([script] * count)),
            NATIVE: lambda ids: ids.extend(native.submit_many([script] * count)),
        },
        "submit one by one": {
            RAW: each(lambda: _sbatch([*base, script])),
            RAW_PYSLURM: each(lambda: _pyslurm_submit(pyslurm, text, workdir)),
            CLI: each(lambda: cli.submit_job(script)),
            NATIVE: each(lambda: native.submit_job(script)),
        },
    }
    return {
        group: {name: _sampler(work) for name, work in contenders.items()}
        for group, contenders in works.items()
    }


def _sampler(work: Work) -> Sample:
    return lambda: _timed(work)


def _pending_jobs(count: int, script: str, workdir: Path) -> List[str]:
    """``count`` jobs that stay PENDING: each waits on one held anchor job."""
    anchor = _sbatch(["--hold", "--job-name=hpcbb-anchor", "--output=/dev/null", script])
    argv = [
        f"--dependency=afterok:{anchor}",
        "--job-name=hpcbb-pending",
        "--output=/dev/null",
        f"--chdir={workdir}",
        script,
    ]
    return [anchor, *(_sbatch(argv) for _ in range(count))]


def refreshers(ids: List[str], workdir: Path, pyslurm: Any) -> Dict[str, Sample]:
    """Each refresh of the same ids, its client built untimed; raises when an answer
    is not PENDING."""
    wanted = set(ids)

    def raw_squeue() -> int:
        out = run_command(["squeue", "-h", "-t", "all", "-o", "%i %T", "-j", ",".join(ids)])
        return sum(1 for line in out.stdout.splitlines() if line.endswith("PENDING"))

    def raw_pyslurm() -> int:
        jobs = pyslurm.Jobs.load()
        return sum(1 for job in jobs.values() if str(job.id) in wanted and job.state == "PENDING")

    def hpcbridge(driver: str) -> Callable[[], Callable[[], int]]:
        def prepare() -> Callable[[], int]:
            adapter = _adapter(workdir, driver)  # a fresh client: no records, nothing cached

            def refresh() -> int:
                statuses = adapter.get_job_statuses(ids)
                return sum(1 for status in statuses.values() if status.state.value == "PENDING")

            return refresh

        return prepare

    def timed(prepare: Callable[[], Callable[[], int]]) -> Sample:
        def sample() -> float:
            refresh = prepare()
            started = time.perf_counter()
            answered = refresh()
            elapsed = (time.perf_counter() - started) * 1000
            if answered != len(ids):
                raise RuntimeError(f"{answered} of {len(ids)} reported PENDING")
            return elapsed

        return sample

    return {
        RAW: timed(lambda: raw_squeue),
        RAW_PYSLURM: timed(lambda: raw_pyslurm),
        CLI: timed(hpcbridge("cli")),
        NATIVE: timed(hpcbridge("native")),
    }


def run(quick: bool, workdir: Path) -> Dict[str, Any]:
    count = 100 if quick else 500
    rounds = 1 if quick else 3
    try:
        with prefix_slurm_environment() as env:
            return _run(count, rounds, workdir, env)
    except Skip as exc:
        return skipped_scenario(NAME, TITLE, str(exc))


def _load_pyslurm(env: Dict[str, str]) -> Any:
    from hpcbridge.errors import SchedulerUnavailableError
    from hpcbridge.schedulers.slurm.pyslurm_loading import ensure_loadable, import_pyslurm

    try:
        ensure_loadable(env["SLURM_CONF"])
        return import_pyslurm()
    except (SchedulerUnavailableError, ImportError) as exc:
        raise Skip(f"pyslurm not usable for {env['SLURM_CONF']}: {exc}") from exc


def _run(count: int, rounds: int, workdir: Path, env: Dict[str, str]) -> Dict[str, Any]:
    pyslurm = _load_pyslurm(env)
    script = trivial_script(workdir / "scripts")
    rows: List[Dict[str, Any]] = []
    for group, contenders in submitters(count, script, workdir, pyslurm).items():
        samples, skipped = interleave(contenders, rounds)
        rows.extend(_rows(group, samples, skipped, count))
    started = time.perf_counter()
    pending: List[str] = []
    try:
        pending = _pending_jobs(count, script, workdir)
        setup_s = time.perf_counter() - started
        samples, skipped = interleave(refreshers(pending[1:], workdir, pyslurm), rounds)
        rows.extend(_rows("refresh", samples, skipped, count))
    finally:
        scancel(pending)
    return scenario_result(
        NAME,
        TITLE,
        unit="ms",
        higher_is_better=False,
        baseline=RAW,
        rows=rows,
        params={
            "jobs": count,
            "rounds": rounds,
            "slurm_conf": env["SLURM_CONF"],
            "pyslurm": getattr(pyslurm, "__version__", None),
            "pending_setup_seconds": round(setup_s, 1),
        },
        notes=[
            "submit array / one by one: ms to submit all N trivial jobs (cancelled after each "
            "sample, untimed). refresh: ms for one status refresh of N pending jobs (each waits "
            "on one held job), a fresh hpcbridge adapter per sample (no records: every id asked).",
            "raw pyslurm is the in-process floor: JobSubmitDescription(...).submit() and "
            "Jobs.load() with nothing else; raw sbatch/squeue the command-line floor.",
            "hpcbridge's native driver submits with pyslurm and reads every job with one "
            "Jobs.load() (all jobs of the cluster); its CLI driver runs sbatch and one "
            "squeue for the asked ids.",
        ],
        why={
            f"submit one by one|{CLI}": "stages a wrapper and writes a record per job, plus "
            "one sbatch process each; use submit_many",
            f"submit one by one|{NATIVE}": "stages a wrapper and writes a record per job",
        },
    )


def _rows(
    group: str, samples: Dict[str, List[float]], skipped: Dict[str, str], count: int
) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for name, kind in KINDS.items():
        if name in samples:
            out.append(row(name, samples[name], group=group, kind=kind, jobs=count))
        else:
            out.append(skipped_row(name, skipped.get(name, "not run"), group=group, kind=kind))
    return out
