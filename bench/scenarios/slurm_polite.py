"""What waiting costs the Slurm daemons: 8 processes of one user, 25 jobs each.

Each contender's processes (``bench/polite_worker.py``) submit their jobs their
own way and say so; once all have, the daemons' counters are reset
(``sdiag --reset``, ``sacctmgr clear stats``) and every process waits on its
jobs, its status polling set to the same interval (10 s):

* raw        one process, one ``sbatch --array`` of all 200, then one
  ``squeue --jobs=<array>`` per interval until it lists none: the floor (the
  baseline);
* hpcbridge  ``submit_many`` + ``wait_all(poll_interval=10)``, one process on all
  200 and 8 processes on 25 each (one state folder: the shared poll);
* PSI/J      8 ``SlurmJobExecutor``s (``queue_polling_interval=10``), ``job.wait()``;
* submitit   8 processes, each with its own ``SlurmInfoWatcher(delay_s=10)``
  (``sacct``), ``job.wait()``;
* Maestro    8 ``SlurmScriptAdapter``s, ``check_jobs`` of the unfinished steps
  every 10 s (its conductor's loop, the sleep set to 10 s).

Counted: slurmctld's job-info RPCs (``sdiag``), slurmdbd's job queries (``sacctmgr
show stats``: ``sacct`` asks slurmdbd), every other RPC the wait caused, the
commands the processes ran (a shim on PATH), the wall time of the wait and how
many jobs each contender reported COMPLETED (all of them do complete).
"""

from __future__ import annotations

import getpass
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

from .. import rest_cluster, slurm_rpcs
from ..common import (
    CommandCounter,
    Skip,
    patched_environ,
    row,
    run_command,
    scancel,
    scenario_result,
    skipped_row,
    skipped_scenario,
    slurm_available,
)

NAME = "slurm_polite"
TITLE = "Slurm load of waiting: 8 processes x 25 jobs, status RPCs per wait"

RAW = "raw: one squeue of all per interval (1 process)"
HPCB1 = "hpcbridge wait_all, 1 process x all"
HPCB8 = "hpcbridge wait_all, 8 processes x 25"
PSIJ = "PSI/J, 8 executors x 25"
SUBMITIT = "submitit, 8 watchers x 25"
MAESTRO = "Maestro, 8 adapters x 25"

#: contender -> (worker kind, kind of row, processes)
CONTENDERS = {
    RAW: ("raw", "raw", 1),
    HPCB1: ("hpcbridge", "hpcbridge", 1),
    HPCB8: ("hpcbridge", "hpcbridge", 8),
    PSIJ: ("psij", "peer", 8),
    SUBMITIT: ("submitit", "peer", 8),
    MAESTRO: ("maestro", "peer", 8),
}
PEERS = {PSIJ: "psij", SUBMITIT: "submitit", MAESTRO: "maestrowf"}
#: the 25.11 group (the bench's own cluster with slurmrestd, ``bench/rest_cluster.py``):
#: the raw floor, 8 processes of each driver, and one process of the REST driver
REST_GROUP = f"{rest_cluster.LABEL}, each driver"
REST_CONTENDERS = {
    RAW: ("raw", "raw", 1),
    f"{HPCB8}, CLI driver": ("hpcbridge", "hpcbridge", 8),
    f"{HPCB8}, pyslurm driver": ("hpcbridge-native", "hpcbridge", 8),
    f"{HPCB8}, REST driver": ("hpcbridge-rest", "hpcbridge", 8),
    f"{HPCB1}, REST driver": ("hpcbridge-rest", "hpcbridge", 1),
}

#: each job sleeps 1 to 3 s: 200 of them on the test node's 8 CPUs end steadily for ~1 min
BODY = "#!/bin/sh\nsleep $(( 1 + $$ % 3 ))\n"


#: every contender's jobs are named so (their script's name, or set): drained by it
JOB_NAME = "hpcbb-polite"


def drain(timeout: float = 300.0) -> None:
    """Until none of this scenario's jobs is queued or running (then cancel those)."""
    deadline = time.monotonic() + timeout
    ours: List[str] = []
    while time.monotonic() < deadline:
        listed = run_command(
            ["squeue", "-h", "-u", getpass.getuser(), "-t", "PD,R,CG,S"] + ["-o", "%i %j"]
        )
        ours = [
            line.split()[0]
            for line in listed.stdout.splitlines()
            if line.split()[1:2] and line.split()[1].startswith(JOB_NAME)
        ]
        if listed.returncode == 0 and not ours:
            return
        time.sleep(1)
    scancel(ours)


def start(kind: str, folder: Path, script: str, per: int, interval: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.polite_worker", kind, str(folder), script, str(per)]
        + [str(interval)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(Path(__file__).resolve().parents[2]),
    )


def completed_in_sacct(job_name: str) -> int:
    """The raw contender's COMPLETED tasks (asked after the counters were read)."""
    out = run_command(
        ["sacct", "-n", "-X", "-P", "-o", "State", "-S", "now-1hour", f"--name={job_name}"]
    )
    return sum(line.strip() == "COMPLETED" for line in out.stdout.splitlines())


def one_wait(
    name: str, workdir: Path, total: int, interval: float, contenders: Dict = CONTENDERS
) -> Dict[str, Any]:
    """One contender once: submit, reset the counters, wait, count."""
    kind, _, processes = contenders[name]
    folder = workdir / f"{JOB_NAME}-{kind}-{processes}-{time.monotonic_ns()}"
    script = folder / f"{folder.name}.sh"
    folder.mkdir(parents=True)
    script.write_text(BODY)
    script.chmod(0o755)
    per = total // processes
    with CommandCounter() as counter:
        workers = [
            start(kind, folder / f"p{index}", str(script), per, interval)
            for index in range(processes)
        ]
        try:
            for worker in workers:
                assert worker.stdout is not None and worker.stderr is not None
                line = worker.stdout.readline()
                if not line.startswith("SUBMITTED"):
                    raise RuntimeError(f"{name}: {line}{worker.stderr.read()[-400:]}")
            counter.reset()
            slurm_rpcs.reset()
            started = time.monotonic()
            for worker in workers:
                assert worker.stdin is not None
                worker.stdin.write("go\n")
                worker.stdin.flush()
            outputs = [worker.communicate(timeout=1800) for worker in workers]
            waited = time.monotonic() - started
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.kill()
        ctld, dbd, commands = (
            slurm_rpcs.controller_counts(),
            slurm_rpcs.dbd_counts(),
            counter.counts(),
        )
    failed = [err[-400:] for worker, (_, err) in zip(workers, outputs) if worker.returncode]
    if failed:
        raise RuntimeError(f"{name}: a process failed: {failed[0]}")
    completed = sum(json.loads(out.strip().splitlines()[-1])["completed"] for out, _ in outputs)
    if completed < 0:  # the raw loop: ask sacct now, outside the counting
        completed = completed_in_sacct(script.name)
    drain()
    return {
        "job_info": slurm_rpcs.total(ctld, slurm_rpcs.JOB_INFO),
        "dbd_queries": slurm_rpcs.total(dbd, slurm_rpcs.DBD_JOB_QUERIES),
        "other_rpcs": slurm_rpcs.total(ctld)
        - slurm_rpcs.total(ctld, slurm_rpcs.JOB_INFO)
        + slurm_rpcs.total(dbd)
        - slurm_rpcs.total(dbd, slurm_rpcs.DBD_JOB_QUERIES),
        "by_type": {**ctld, **{f"dbd:{key}": value for key, value in dbd.items()}},
        "commands": commands,
        "waited_s": round(waited, 1),
        "completed": completed,
    }


def rows_for(
    samples: Dict[str, List[Dict[str, Any]]],
    skipped: Dict[str, str],
    total: int,
    contenders: Dict = CONTENDERS,
    group: str = "",
) -> list:
    rows = []
    for name, (_, kind, processes) in contenders.items():
        if name in skipped:
            rows.append(skipped_row(name, skipped[name], group=group, kind=kind))
            continue
        runs = samples.get(name) or []
        if not runs:
            continue

        def median(key: str, runs: List[Dict[str, Any]] = runs) -> float:
            return statistics.median(run[key] for run in runs)

        commands: Dict[str, List[int]] = {}
        for run in runs:
            for command, count in run["commands"].items():
                commands.setdefault(command, []).append(count)
        rows.append(
            row(
                name,
                [run["job_info"] + run["dbd_queries"] for run in runs],
                group=group,
                kind=kind,
                processes=processes,
                job_info=median("job_info"),
                dbd_queries=median("dbd_queries"),
                other_rpcs=median("other_rpcs"),
                waited_s=median("waited_s"),
                commands_run=", ".join(
                    f"{statistics.median(counts):g} {command}"
                    for command, counts in sorted(commands.items())
                ),
                answered=min(run["completed"] for run in runs),
                tracked=total,
                runs=runs,
            )
        )
    return rows


def peer_missing(name: str) -> str:
    module = PEERS.get(name)
    if not module:
        return ""
    try:
        __import__(module)
    except ImportError as exc:
        return f"{module} is not installed ({exc}); pip install '.[bench]'"
    return ""


def goal_lines(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    by_name = {item["contender"]: item for item in rows if item.get("median") is not None}
    shared, alone = by_name.get(HPCB8), by_name.get(HPCB1)
    if shared is None:
        return {}
    peers = [by_name[name] for name in (PSIJ, SUBMITIT, MAESTRO) if name in by_name]
    cheapest = min((item["median"] for item in peers), default=None)
    met = cheapest is not None and shared["median"] < cheapest
    if alone is not None:
        within = abs(shared["median"] - alone["median"]) <= max(1.0, 0.1 * alone["median"])
        met = met and within
    return {
        "target": "8 hpcbridge processes cost fewer status RPCs than every peer's 8, and "
        "within 10% of one hpcbridge process on all the jobs",
        "achieved": round(cheapest / shared["median"], 1) if cheapest and shared["median"] else 0,
        "met": met,
    }


def run(quick: bool, workdir: Path) -> Dict[str, Any]:
    reason = slurm_available()
    if reason:
        return skipped_scenario(NAME, TITLE, reason)
    total = 8 if quick else 200
    interval = 2.0 if quick else 10.0
    processes_note = 2 if quick else 8
    reason = "HPCBRIDGE_BENCH_REST=only" if rest_cluster.only() else slurm_available()
    if reason:
        rows = [skipped_row(name, reason, kind=kind) for name, (_, kind, _) in CONTENDERS.items()]
    else:
        rows = rows_for(*waits(CONTENDERS, workdir, total, interval), total)
    goal = goal_lines(rows)
    rows += _rest_rows(quick, workdir / "rest", total, interval)
    if all(item.get("skipped") for item in rows):
        return skipped_scenario(NAME, TITLE, reason or rows[-1]["skipped"])
    result = scenario_result(
        NAME,
        TITLE,
        unit="status RPCs",
        higher_is_better=False,
        baseline=RAW,
        rows=rows,
        params={"jobs": total, "processes": processes_note, "poll_interval_s": interval},
        notes=[
            "status RPCs = slurmctld job-info RPCs (sdiag: REQUEST_JOB_INFO, _SINGLE, "
            "REQUEST_JOB_STATE) + slurmdbd job queries (sacctmgr show stats: "
            "DBD_GET_JOBS_COND, what sacct costs), counted from the moment every process "
            "had submitted to the last one's exit; speed vs baseline = the raw floor's count "
            "over the contender's (> 1: fewer RPCs than one bare squeue per interval).",
            f"Every contender polls at the same {interval:g} s: PSI/J's queue_polling_interval, "
            "submitit's watcher delay_s (it asks sooner while jobs are young: 2, 4, 8 s "
            "after the last submission), Maestro's conductor sleep, hpcbridge's "
            "poll_interval. hpcbridge's 8 processes share one state folder.",
            "One round: each wait takes about a minute of the cluster's 8 CPUs.",
            "The rows without a group are the shared Slurm 22.05 cluster; the 25.11 group: "
            + rest_cluster.LISTENER
            + ". Its daemons count only these waits. The REST driver's light round is "
            "GET jobs/state (slurmctld's REQUEST_JOB_STATE), its first a GET jobs/ "
            "(REQUEST_JOB_INFO); pyslurm's and the REST driver's questions run no command.",
        ],
        why={
            HPCB1: "one squeue per interval like raw, plus one sacct for the jobs squeue "
            "forgot and the full fields of the jobs whose state changed",
            HPCB8: "one shared poll for the 8 processes: as one process on all the jobs",
            f"{REST_GROUP}|{HPCB8}, CLI driver": "one shared poll: its rounds' squeue --me "
            "(REQUEST_JOB_INFO) and light squeue --only-job-state (REQUEST_JOB_STATE), "
            "by type in the JSON",
            f"{REST_GROUP}|{HPCB8}, REST driver": "one shared poll: its rounds' GET jobs/state "
            "(REQUEST_JOB_STATE), GET jobs/ (REQUEST_JOB_INFO) and GET slurmdb jobs "
            "(DBD_GET_JOBS_COND, each with DBD_GET_QOS and DBD_GET_TRES among the other RPCs), "
            "by type in the JSON; the CLI driver's rounds asked slurmdbd nothing",
            f"{REST_GROUP}|{HPCB1}, REST driver": "its rounds' GET jobs/state, GET jobs/ and "
            "GET slurmdb jobs (DBD_GET_JOBS_COND), by type in the JSON",
        },
        extra={
            "columns": [
                ("job_info", "slurmctld job-info"),
                ("dbd_queries", "slurmdbd job queries"),
                ("other_rpcs", "other RPCs"),
                ("waited_s", "wait s"),
                ("commands_run", "commands run"),
            ]
        },
    )
    if goal:
        result["goal"] = goal
    return result


def waits(
    contenders: Dict, workdir: Path, total: int, interval: float, rounds: int = 1
) -> Tuple[Dict[str, List[Dict[str, Any]]], Dict[str, str]]:
    """Each contender's waits (rounds in turned order) and why any was skipped."""
    names = list(contenders)
    skipped = {name: why for name in names if (why := peer_missing(name))}
    samples: Dict[str, List[Dict[str, Any]]] = {}
    drain()
    for index in range(rounds):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            if name in skipped:
                continue
            try:
                found = one_wait(name, workdir, total, interval, contenders)
                samples.setdefault(name, []).append(found)
            except Exception as exc:  # noqa: BLE001 - reported in the row, the rest still runs
                skipped[name] = f"failed: {type(exc).__name__}: {exc}"[:400]
                drain()
    return samples, skipped


def _rest_rows(quick: bool, workdir: Path, total: int, interval: float) -> List[Dict[str, Any]]:
    """The 25.11 group: on the bench's own cluster, whose daemons count only these waits."""
    try:
        reason = rest_cluster.wanted(quick)
        if reason:
            raise Skip(reason)
        with rest_cluster.rest_cluster() as env, patched_environ(env):
            found = waits(REST_CONTENDERS, workdir, total, interval)
    except Skip as exc:
        return [
            skipped_row(name, str(exc), group=REST_GROUP, kind=kind)
            for name, (_, kind, _) in REST_CONTENDERS.items()
        ]
    return rows_for(*found, total, REST_CONTENDERS, REST_GROUP)
