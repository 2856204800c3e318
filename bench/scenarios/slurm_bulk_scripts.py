"""Issue 31's bulk scenario: N distinct one-line scripts (``t0.sh`` .. ``t<N-1>.sh``), as
workflow tools write them, through hpcbridge ``submit_many`` vs a plain ``sbatch`` loop
(one script each), with one raw ``sbatch --array`` of the same count as the ceiling and
``submit_many`` of one script N times beside it; N = 100 and 1,000.

On Slurm 22.05 with the CLI driver and on Slurm 25.11 with the pyslurm driver (the
second test cluster, ``/opt/slurm-25.11``).  Every hpcbridge sample is a fresh adapter
(as a new process of the user), opened outside the timing (``scontrol show config``
once), sharing one state folder: the cluster's cap on queued jobs is read once, before
the samples, as any call of the user's in the last 5 minutes would have read it - the
``sacctmgr`` runs are counted all along.  A one-job ``submit_job`` and a cold
``submit_many`` (a fresh state folder) are counted apart.

The cold case (issue 45, N = 100) is a row of its own: each sample a new process whose
state folder is new (``HPCBRIDGE_STATE_DIR``: no cap known, no store), the adapter opened
untimed as above, then one ``submit_many`` of the N distinct scripts timed in that
process (its start and imports not counted): what a new user's first bulk costs.

Jobs are submitted held (``SBATCH_HOLD=1`` for every ``sbatch``; ``priority=0`` for
pyslurm's) and cancelled right after each sample, outside the timing: nothing runs,
and the shared clusters' partitions are left alone.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from .. import rest_cluster
from ..common import (
    CommandCounter,
    Skip,
    interleave,
    prefix_slurm_environment,
    scenario_result,
    skipped_row,
    slurm_available,
)
from . import slurm_common as sc
from .slurm_submit import build, rows_for

NAME = "slurm_bulk_scripts"
TITLE = "Slurm bulk submission of distinct scripts (issue 31): jobs/s"

LOOP = "raw sbatch loop (one script each)"
ARRAY = "raw sbatch --array (ceiling)"
DISTINCT = "hpcbridge submit_many, distinct scripts"
COLD = "hpcbridge submit_many, distinct scripts, cold (new process and state folder)"
SAME = "hpcbridge submit_many, one script"
KINDS = {LOOP: "raw", ARRAY: "raw", DISTINCT: "hpcbridge", COLD: "hpcbridge", SAME: "hpcbridge"}
#: the 25.11 group (``slurm_rest_groups.bulk``, the smaller count): each driver's distinct scripts
REST_LABEL = f"{rest_cluster.LABEL}, each driver"
REST_KINDS = {
    LOOP: "raw",
    ARRAY: "raw",
    **{f"{DISTINCT}, {label}": "hpcbridge" for label in rest_cluster.DRIVERS.values()},
}

REPO = Path(__file__).resolve().parents[2]

GOAL_LOOP = 10.0
#: the cold row's count (issue 45: a new user's first bulk of 100 scripts)
COLD_JOBS = 100
GOAL_ARRAY = 0.3

_names = itertools.count()


def scripts(folder: Path, count: int) -> List[str]:
    """``t0.sh`` .. ``t<count-1>.sh``, one line each."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for index in range(count):
        path = folder / f"t{index}.sh"
        path.write_text(f"#!/bin/sh\necho t{index}\n")
        path.chmod(0o755)
        made.append(str(path))
    return made


@contextmanager
def held() -> Iterator[None]:
    """Every sbatch of the block (raw and hpcbridge's) submits its jobs held."""
    saved = os.environ.get("SBATCH_HOLD")
    os.environ["SBATCH_HOLD"] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("SBATCH_HOLD", None)
        else:
            os.environ["SBATCH_HOLD"] = saved


def _sbatch(argv: List[str]) -> str:
    done = subprocess.run(["sbatch", "--parsable", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"sbatch failed: {done.stderr.strip()[:200]}")
    return done.stdout.strip().splitlines()[-1].split(";")[0]


def raw_loop(paths: List[str], workdir: Path) -> sc.Contender:
    base = ["--output=/dev/null", f"--chdir={workdir}"]

    def submit(ids: List[Optional[str]]) -> None:
        for path in paths:
            ids.append(_sbatch([*base, f"--job-name={os.path.basename(path)}", path]))

    return lambda: sc.submission_rate(len(paths), submit)


def raw_array(paths: List[str], workdir: Path) -> sc.Contender:
    argv = [f"--array=0-{len(paths) - 1}", "--output=/dev/null", f"--chdir={workdir}", paths[0]]
    return lambda: sc.submission_rate(len(paths), lambda ids: ids.append(_sbatch(argv)))


class Adapters:
    """Fresh adapters of one user (one state folder), each opened outside the timing."""

    def __init__(self, workdir: Path, driver: str, hold: bool = True) -> None:
        self.workdir, self.driver, self.hold = workdir, driver, hold
        self.state = workdir / f"state-{driver}"

    def fresh(self, state: Optional[Path] = None) -> Any:
        from hpcbridge import RealSlurmAdapter

        settings = sc.hpcbridge_settings(state or self.state)
        adapter = RealSlurmAdapter(
            remote_workdir=str(self.workdir / "jobs"), settings=settings, driver=self.driver
        )
        sc.opened(adapter)  # opened, MaxArraySize asked: as the same-script bench
        if self.driver == "native" and self.hold:
            _hold_pyslurm(adapter.open().driver)
        return adapter


def _hold_pyslurm(driver: Any) -> None:
    """pyslurm's submissions held (``priority=0``, as ``sbatch --hold``), cancelled after."""
    module = driver.pyslurm
    original = module.JobSubmitDescription

    class Held(original):  # type: ignore[misc, valid-type]
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(priority=0, **kwargs)

    driver.pyslurm = _With(module, JobSubmitDescription=Held)


class _With:
    """A module with some attributes replaced."""

    def __init__(self, module: Any, **replaced: Any) -> None:
        self._module, self._replaced = module, replaced

    def __getattr__(self, name: str) -> Any:
        return self._replaced[name] if name in self._replaced else getattr(self._module, name)


def hpcbridge_many(adapters: Adapters, paths: List[str]) -> sc.Contender:
    def measure() -> float:
        adapter = adapters.fresh()  # a new process of the user: not timed

        def submit(ids: List[Optional[str]]) -> None:
            ids.extend(adapter.submit_many(paths))
            if len(ids) != len(paths):
                raise RuntimeError(f"submit_many returned {len(ids)} ids for {len(paths)}")

        try:
            return sc.submission_rate(len(paths), submit)
        finally:
            adapter.close()

    return measure


def cold_many(adapters: Adapters, paths: List[str]) -> sc.Contender:
    """Each sample: ``cold_sample`` in a new process with a new state folder (it inherits
    ``SBATCH_HOLD``, the command counter's ``PATH`` and the cluster's environment)."""

    def measure() -> float:
        state = adapters.workdir / f"state-cold-{adapters.driver}-{next(_names)}"
        listed = state.with_name(state.name + ".paths")
        listed.write_text("\n".join(paths))
        argv = [sys.executable, "-m", "bench.scenarios.slurm_bulk_scripts", adapters.driver]
        argv += [str(adapters.workdir), str(state), str(listed)]
        python_path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "HPCBRIDGE_STATE_DIR": str(state), "PYTHONPATH": python_path}
        done = subprocess.run(
            argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        lines = done.stdout.strip().splitlines()
        found = json.loads(lines[-1]) if done.returncode == 0 and lines else {}
        sc.scancel(found.get("ids", []))
        if len(found.get("ids", [])) != len(paths):
            raise RuntimeError(f"the cold process failed: {done.stderr.strip()[-300:]}")
        return len(paths) / found["seconds"]

    return measure


def cold_sample(driver: str, workdir: Path, state: Path, listed: Path) -> Dict[str, Any]:
    """In a new process: its adapter opened (untimed), then one ``submit_many`` timed."""
    paths = listed.read_text().split("\n")
    adapter = Adapters(workdir, driver).fresh(state)
    try:
        started = time.perf_counter()
        ids = adapter.submit_many(paths)
        seconds = time.perf_counter() - started
    finally:
        adapter.close()
    return {"seconds": seconds, "ids": ids}


def cold_and_one(adapters: Adapters, paths: List[str], counter: CommandCounter) -> Dict[str, Any]:
    """sacctmgr runs of a one-job submit_job and of a cold submit_many (fresh state
    folders each), and how long that cold submit_many took."""
    found: Dict[str, Any] = {}
    one = adapters.fresh(adapters.workdir / f"state-one-{next(_names)}")
    counter.reset()
    job = one.submit_job(paths[0])
    found["submit_job_sacctmgr_runs"] = counter.counts().get("sacctmgr", 0)
    sc.scancel([job])
    one.close()
    cold = adapters.fresh(adapters.workdir / f"state-cold-{next(_names)}")
    counter.reset()
    ids: List[str] = []
    try:
        started = time.perf_counter()
        ids = cold.submit_many(paths)
        found["cold_submit_many_seconds"] = round(time.perf_counter() - started, 3)
    finally:
        sc.scancel(ids)
        cold.close()
    found["cold_submit_many_sacctmgr_runs"] = counter.counts().get("sacctmgr", 0)
    return found


def factories(
    paths: List[str], adapters: Adapters, workdir: Path
) -> Dict[str, Callable[[], sc.Contender]]:
    made: Dict[str, Callable[[], sc.Contender]] = {
        LOOP: lambda: raw_loop(paths, workdir),
        ARRAY: lambda: raw_array(paths, workdir),
        DISTINCT: lambda: hpcbridge_many(adapters, paths),
        COLD: lambda: cold_many(adapters, paths),
        SAME: lambda: hpcbridge_many(adapters, [paths[0]] * len(paths)),
    }
    if len(paths) > COLD_JOBS:
        # Each row's cancelled jobs stay in slurmctld until purged (MinJobAge, and later):
        # past MaxJobCount (10,000 here) sbatch and pyslurm are refused ("Resource
        # temporarily unavailable"), as this row at N=1,000 once met on 25.11.
        del made[COLD]
    return made


def measure_cluster(
    label: str, driver: str, counts: Tuple[int, ...], rounds: int, workdir: Path
) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
    """The rows of one cluster (a group per count) and what was counted there."""
    rows: List[Dict[str, Any]] = []
    counted: Dict[str, Any] = {}
    adapters = Adapters(workdir, driver)
    with CommandCounter(("sacctmgr",)) as counter, held():
        adapters.fresh().open().driver.queue_limit()  # the user's cap, read once: untimed
        counter.reset()
        for count in counts:
            paths = scripts(workdir / f"scripts-{count}", count)
            group = f"{label}, N={count}"
            contenders, skipped = build(factories(paths, adapters, workdir))
            samples, failed = interleave(contenders, rounds)
            skipped.update(failed)
            rows += rows_for(samples, skipped, KINDS, count, group, reference=(ARRAY,))
        counted["samples_sacctmgr_runs"] = counter.counts().get("sacctmgr", 0)
        counted.update(cold_and_one(adapters, scripts(workdir / "scripts-100", 100), counter))
    return rows, counted


def run(quick: bool, workdir: Path) -> Dict[str, Any]:
    counts = (8,) if quick else (100, 1000)
    rounds = 1 if quick else 5
    rows: List[Dict[str, Any]] = []
    counted: Dict[str, Any] = {}
    reason = slurm_available()
    clusters = [("22.05 CLI", "cli", None), ("25.11 pyslurm", "native", "prefix")]
    for label, driver, prefix in clusters:
        try:
            if rest_cluster.only():
                raise Skip("HPCBRIDGE_BENCH_REST=only")
            if reason and prefix is None:
                raise Skip(reason)
            if prefix is None:
                found, counted[label] = measure_cluster(label, driver, counts, rounds, workdir)
            else:
                with prefix_slurm_environment():
                    _pyslurm_usable()
                    found, counted[label] = measure_cluster(
                        label, driver, counts, rounds, workdir / "2511"
                    )
            rows += found
        except Skip as exc:
            rows += [
                skipped_row(name, str(exc), group=f"{label}, N={count}", kind=kind)
                for count in counts
                for name, kind in KINDS.items()
            ]
    planned = [(f"{REST_LABEL}, N={counts[0]}", name, kind) for name, kind in REST_KINDS.items()]
    rows += rest_cluster.group_rows("slurm_rest_groups.bulk", quick, workdir / "rest", planned)
    result = scenario_result(
        NAME,
        TITLE,
        unit="jobs/s",
        higher_is_better=True,
        baseline=LOOP,
        rows=rows,
        params={
            "jobs": list(counts),
            "rounds": rounds,
            "goal_vs_sbatch_loop": GOAL_LOOP,
            "goal_vs_sbatch_array": GOAL_ARRAY,
            "counted": counted,
        },
        notes=[
            "Each script is one line (t<k>.sh: echo t<k>); the sbatch loop submits each its "
            "own; the raw sbatch --array submits t0.sh N times (the ceiling: one sbatch, "
            "nothing staged or recorded) and is not counted as a loss for hpcbridge.",
            "Jobs are submitted held (SBATCH_HOLD=1; priority=0 through pyslurm) and "
            "cancelled after each sample, untimed: nothing runs, no partition is touched.",
            "Each hpcbridge sample is a fresh adapter (a new process of the user), opened "
            "untimed; all share one state folder, whose cap on queued jobs was read once "
            "before the samples (counted: params.counted).",
            "The 25.11 group: " + rest_cluster.LISTENER + ". There each driver's "
            "submit_many of the distinct scripts (fresh adapters of one state folder per "
            "driver, the REST one's API version found when it is opened, untimed) runs beside "
            "the raw loop and array, the smaller N only; the cluster being the bench's own, "
            "its partitions are held down instead of each job.",
            "The cold row: each sample a new Python process with a new state folder "
            "(HPCBRIDGE_STATE_DIR: no cap known, no job store yet), its adapter opened "
            "untimed, then one submit_many timed in that process (its start and imports "
            "not counted).",
        ],
        why={
            **{
                f"{REST_LABEL}|{DISTINCT}, {label}": "stages the N scripts and the wrapper "
                "with its task table, records every task, around one submission of the array"
                for label in rest_cluster.DRIVERS.values()
            },
            DISTINCT: "stages the N scripts (one copy each) and the wrapper with its task "
            "table, records every task in SQLite, around one sbatch --array",
            COLD: "as the distinct-scripts row, plus creating the job store and the "
            "staging folders of a new state folder; the cluster's cap is not read (no "
            "cap met)",
            SAME: "stages one script and a wrapper without a table, records every task, "
            "around one sbatch --array",
        },
    )
    result["goal"] = _goals(result["rows"])
    for label, found in counted.items():
        result["notes"].append(
            f"{label}: sacctmgr ran {found['samples_sacctmgr_runs']} time(s) in all the "
            f"samples; a one-job submit_job ran it {found['submit_job_sacctmgr_runs']} "
            f"time(s); a cold submit_many of 100 (a fresh state folder) "
            f"{found['cold_submit_many_sacctmgr_runs']} time(s), in "
            f"{found['cold_submit_many_seconds']} s."
        )
    return result


def _pyslurm_usable() -> None:
    from hpcbridge.errors import SchedulerUnavailableError
    from hpcbridge.schedulers.slurm.pyslurm_loading import ensure_loadable, import_pyslurm

    try:
        ensure_loadable(os.environ["SLURM_CONF"])
        import_pyslurm()
    except (SchedulerUnavailableError, ImportError) as exc:
        raise Skip(f"pyslurm not usable for {os.environ['SLURM_CONF']}: {exc}") from exc


def _goals(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Per group: submit_many of distinct scripts vs the loop and vs the raw array."""
    by_group: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for item in rows:
        by_group.setdefault(item["group"], {})[item["contender"]] = item
    groups = {}
    for group, members in by_group.items():
        mine, array = members.get(DISTINCT, {}), members.get(ARRAY, {})
        if mine.get("median") is None:
            continue
        vs_loop = mine.get("speed_vs_baseline")
        vs_array = mine["median"] / array["median"] if array.get("median") else None
        cold = members.get(COLD, {}).get("speed_vs_baseline")
        cold_met = COLD not in members or bool(cold and cold >= GOAL_LOOP)
        groups[group] = {
            "vs_sbatch_loop": round(vs_loop, 2) if vs_loop else None,
            "vs_sbatch_array": round(vs_array, 3) if vs_array else None,
            "cold_vs_sbatch_loop": round(cold, 2) if cold else None,
            "met": bool(vs_loop and vs_loop >= GOAL_LOOP and vs_array and vs_array >= GOAL_ARRAY)
            and cold_met,
        }
    text = "; ".join(
        f"{group}: {item['vs_sbatch_loop']}x the loop"
        + (f" ({item['cold_vs_sbatch_loop']}x cold)" if item["cold_vs_sbatch_loop"] else "")
        + f", {item['vs_sbatch_array']}x the array"
        for group, item in groups.items()
    )
    return {
        "target": f"submit_many of distinct scripts >= {GOAL_LOOP:g}x the sbatch loop, warm "
        f"and cold (a new process and state folder), and >= {GOAL_ARRAY:g}x one raw "
        "sbatch --array",
        "achieved_text": text or "nothing measured",
        "groups": groups,
        "met": bool(groups) and all(item["met"] for item in groups.values()),
    }


if __name__ == "__main__":  # one cold sample: DRIVER WORKDIR STATE PATHS-FILE
    driver, workdir, state, listed = sys.argv[1:5]
    print(json.dumps(cold_sample(driver, Path(workdir), Path(state), Path(listed))))
