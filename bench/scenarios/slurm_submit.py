"""Slurm submission: N trivial jobs (``true``) through each contender.

Raw ``sbatch`` loop (the baseline), hpcbridge ``submit_job`` in a loop,
hpcbridge ``submit_many`` (one ``sbatch --array``), PSI/J's Slurm executor
(``executor.submit(job)`` per job) and submitit (``executor.submit`` of a
``CommandFunction(["true"])`` per job).  Only the submission is timed; each
contender's jobs are cancelled (``scancel`` of exactly those ids) right after.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from .. import rest_cluster
from ..common import (
    Skip,
    interleave,
    row,
    scenario_result,
    skipped_row,
    skipped_scenario,
    slurm_available,
    trivial_script,
)
from . import slurm_common as sc

NAME = "slurm_submit"
TITLE = "Slurm submission: trivial jobs, jobs/s"

KINDS = {
    "raw sbatch loop": "raw",
    "hpcbridge submit_job loop": "hpcbridge",
    "hpcbridge submit_many (array)": "hpcbridge",
    "PSI/J SlurmJobExecutor.submit loop": "peer",
    "submitit submit loop (CommandFunction)": "peer",
}

#: the 25.11 group (``slurm_rest_groups.submit``): raw sbatch and REST, each driver
REST_GROUP = f"{rest_cluster.LABEL}, each driver"
RAW_REST = "raw REST: POST job/submit loop"
REST_KINDS = {
    "raw sbatch loop": "raw",
    RAW_REST: "raw",
    **{
        f"hpcbridge {call}, {label}": "hpcbridge"
        for call in ("submit_job loop", "submit_many (array)")
        for label in rest_cluster.DRIVERS.values()
    },
}

WHY = {
    "hpcbridge submit_job loop": "pays one sbatch per job like raw (~8 ms here), plus per job "
    "~1 ms staging (two folders, the script copied, the wrapper written atomically), ~0.4 ms "
    "for its SQLite record and ~1 ms running sbatch in a session of its own with a timeout "
    "(so a hung sbatch can be killed with its children); for many jobs use submit_many",
    "hpcbridge submit_many (array)": "stages one wrapper per array and records every task; "
    "one sbatch --array for all",
}
_STAGED = "per job the same staging and SQLite record as with sbatch (~1.5 ms), around "
WHY.update(
    {
        f"{rest_cluster.LABEL}|hpcbridge submit_job loop, CLI driver": WHY[
            "hpcbridge submit_job loop"
        ],
        f"{rest_cluster.LABEL}|hpcbridge submit_job loop, pyslurm driver": _STAGED
        + "one in-process submission (pyslurm)",
        f"{rest_cluster.LABEL}|hpcbridge submit_job loop, REST driver": _STAGED
        + "one POST job/submit (the raw REST loop's ~2 ms)",
        **{
            f"{rest_cluster.LABEL}|hpcbridge submit_many (array), {label}": "stages one "
            "wrapper per array and records every task, around one submission of the array"
            for label in rest_cluster.DRIVERS.values()
        },
    }
)


def build(
    factories: Dict[str, Callable[[], sc.Contender]],
) -> Tuple[Dict[str, sc.Contender], Dict[str, str]]:
    contenders: Dict[str, sc.Contender] = {}
    skipped: Dict[str, str] = {}
    for name, factory in factories.items():
        try:
            contenders[name] = factory()
        except Skip as exc:
            skipped[name] = str(exc)
        except Exception as exc:  # noqa: BLE001 - listed as skipped with the reason
            skipped[name] = f"failed to set up: {type(exc).__name__}: {exc}"[:400]
    return contenders, skipped


def rows_for(
    samples: Dict[str, List[float]],
    skipped: Dict[str, str],
    kinds: Dict[str, str],
    count: int,
    group: str = "",
    reference: Tuple[str, ...] = (),
) -> List[Dict[str, Any]]:
    out = []
    for name in kinds:
        if name in samples:
            values = samples[name]
            out.append(
                row(
                    name,
                    values,
                    group=group,
                    kind=kinds[name],
                    jobs=count,
                    seconds_for_all=[round(count / v, 4) for v in values],
                    reference_only=name in reference,
                )
            )
        elif name in skipped:
            out.append(skipped_row(name, skipped[name], group=group, kind=kinds[name]))
    return out


def run(quick: bool, workdir: Path) -> Dict[str, Any]:
    count = 5 if quick else 100
    rounds = 1 if quick else 5
    reason = "HPCBRIDGE_BENCH_REST=only" if rest_cluster.only() else slurm_available()
    rows = [skipped_row(n, reason, kind=k) for n, k in KINDS.items()] if reason else []
    if not reason:
        rows = _rows_2205(count, rounds, workdir)
    planned = [(REST_GROUP, name, kind) for name, kind in REST_KINDS.items()]
    rows += rest_cluster.group_rows("slurm_rest_groups.submit", quick, workdir / "rest", planned)
    if all(item.get("skipped") for item in rows):
        return skipped_scenario(NAME, TITLE, reason or rows[-1]["skipped"])
    return scenario_result(
        NAME,
        TITLE,
        unit="jobs/s",
        higher_is_better=True,
        baseline="raw sbatch loop",
        rows=rows,
        params={"jobs": count, "rounds": rounds, "job": "true"},
        notes=[
            "Only submission is timed; every contender's jobs are scancel'ed (those ids only) "
            "right after, outside the timing, and the queue settles before the next one.",
            "The partitions are set State=DOWN for the scenario: sbatch queues the jobs and none "
            "runs, so no contender's submission competes with starting jobs on the 2 cores.",
            "submitit sleeps 0.2 s between single submissions by design (its _throttle); "
            "its batch() context (scenario slurm_bulk) submits one array instead.",
            "PSI/J writes a submit script per job and runs one sbatch per job.",
            "The rows without a group are the shared Slurm 22.05 cluster; the 25.11 group: "
            + rest_cluster.LISTENER
            + ". Each hpcbridge client is opened before the timing (MaxArraySize; pyslurm "
            "loaded; the REST API's version, GET /openapi/v3). The raw REST loop is one POST "
            "job/submit per job (http.client, a connection each, as hpcbridge's client).",
        ],
        why=WHY,
    )


def _rows_2205(count: int, rounds: int, workdir: Path) -> List[Dict[str, Any]]:
    """The shared (22.05) cluster's rows: the CLI driver beside raw sbatch and the peers."""
    script = trivial_script(workdir)
    factories: Dict[str, Callable[[], sc.Contender]] = {
        "raw sbatch loop": lambda: sc.raw_sbatch_loop(script, count, workdir),
        "hpcbridge submit_job loop": lambda: sc.hpcbridge_submit_loop(script, count, workdir),
        "hpcbridge submit_many (array)": lambda: sc.hpcbridge_submit_many(script, count, workdir),
        "PSI/J SlurmJobExecutor.submit loop": lambda: sc.psij_submit_loop(count, workdir),
        "submitit submit loop (CommandFunction)": lambda: sc.submitit_submit_loop(count, workdir),
    }
    contenders, skipped = build(factories)
    with sc.partitions_held():
        samples, failed = interleave(contenders, rounds)
    skipped.update(failed)
    return rows_for(samples, skipped, KINDS, count)
