"""Allocation packing: N one-core ``true`` jobs submitted into one Flux instance
and run to the end, seconds (lower is better).

One fresh single-broker instance (this machine's cores), queue running, one
run per contender, one after the other, the instance drained in between:
raw ``flux submit --cc`` + ``flux queue drain``; raw ``submit_async`` +
``result_async`` futures (the baseline); hpcbridge ``submit_many`` +
``wait_all`` of plain jobs with the native and the CLI driver, and of batch
jobs (nested instances) with the native driver; PSI/J's Flux executor.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence

from ..common import Skip, row, scenario_result, skipped_row, skipped_scenario
from .flux_common import find_flux, flux_instance, flux_uri_env, psij_flux_executor, psij_flux_job

NAME = "flux_packing"
TITLE = "Allocation packing: one-core `true` jobs submitted and run to the end, seconds"

RAW_CC = "raw flux submit --cc + flux queue drain"
RAW_ASYNC = "raw submit_async + result futures"
PLAIN_NATIVE = "hpcbridge plain jobs (native)"
PLAIN_CLI = "hpcbridge plain jobs (CLI)"
BATCH_NATIVE = "hpcbridge batch jobs (native)"
PSIJ = "PSI/J FluxJobExecutor"
KINDS = {
    RAW_CC: "raw",
    RAW_ASYNC: "raw",
    PLAIN_NATIVE: "hpcbridge",
    PLAIN_CLI: "hpcbridge",
    BATCH_NATIVE: "hpcbridge",
    PSIJ: "peer",
}
#: the issue's targets: hpcbridge's speed as a fraction of the raw futures'
TARGETS = {PLAIN_NATIVE: 0.8, PLAIN_CLI: 0.5}


def _timed(work: Callable[[], None]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def _raw_cc(
    instance: Any, jobs: int, command: Sequence[str] = ("true",), options: Sequence[str] = ()
) -> float:
    """``flux submit --cc=1-N [options] command`` and ``flux queue drain``, seconds."""

    def work() -> None:
        submit = [*instance.submit_words("submit"), f"--cc=1-{jobs}", "--quiet", *options]
        instance.check([*submit, *command], timeout=600)
        instance.check(["queue", "drain"], timeout=1800)

    return _timed(work)


def _raw_async(flux: Any, uri: str, jobs: int, folder: Path) -> float:
    handle = flux.Flux(uri)
    spec = flux.job.JobspecV1.from_command(["true"])
    spec.environment = dict(os.environ)
    spec.cwd = str(folder)

    def work() -> None:
        futures = [flux.job.submit_async(handle, spec) for _ in range(jobs)]
        ids = [future.get_id() for future in futures]
        results = [flux.job.result_async(handle, job_id) for job_id in ids]
        for result in results:
            result.get()

    return _timed(work)


def _hpcbridge(
    flux_command: str,
    uri: str,
    driver: str,
    nested: bool,
    jobs: int,
    folder: Path,
    poll_interval: float = 10.0,
) -> float:
    from hpcbridge import JobState, Settings
    from hpcbridge.schedulers.flux.adapter import FluxAdapter

    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "true.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    script.chmod(0o755)
    settings = Settings.from_env(env={}, state_dir=str(folder / "state"), scheduler="flux")
    adapter = FluxAdapter(
        uri=uri,
        settings=settings,
        driver=driver,
        flux_command=flux_command,
        remote_workdir=str(folder / "jobs"),
    )
    adapter.open().driver  # noqa: B018 - the session is made once, outside the timing
    final: Dict[str, Any] = {}

    def work() -> None:
        ids = adapter.submit_many([str(script)] * jobs, {"ntasks": 1}, nested=nested)
        final.update(adapter.wait_all(ids, poll_interval=poll_interval, timeout=3600))

    try:
        elapsed = _timed(work)
    finally:
        adapter.close()
    bad = [status for status in final.values() if status.state is not JobState.COMPLETED]
    if bad:
        raise RuntimeError(f"{len(bad)} job(s) did not complete, e.g. {bad[0]}")
    return elapsed


def _psij(uri: str, jobs: int, folder: Path) -> float:
    import psij

    with flux_uri_env(uri):
        try:
            executor = psij_flux_executor()
        except Exception as exc:  # noqa: BLE001 - e.g. bindings of another release
            raise Skip(f"PSI/J's Flux executor does not work here: {exc}"[:400]) from exc

        def work() -> None:
            batch = [psij_flux_job("true", directory=folder) for _ in range(jobs)]
            for job in batch:
                executor.submit(job)
            for job in batch:
                status = job.wait()
                if status is None or status.state is not psij.JobState.COMPLETED:
                    raise RuntimeError(f"PSI/J job ended {status}")

        return _timed(work)


def _contenders(
    flux_command: str, flux: Any, instance: Any, jobs: int, folder: Path
) -> Dict[str, Callable[[], float]]:
    uri = instance.uri
    return {
        RAW_CC: lambda: _raw_cc(instance, jobs),
        RAW_ASYNC: lambda: _raw_async(flux, uri, jobs, folder),
        PLAIN_NATIVE: lambda: _hpcbridge(
            flux_command, uri, "native", False, jobs, folder / "plain-native"
        ),
        PLAIN_CLI: lambda: _hpcbridge(flux_command, uri, "cli", False, jobs, folder / "plain-cli"),
        BATCH_NATIVE: lambda: _hpcbridge(
            flux_command, uri, "native", True, jobs, folder / "batch-native"
        ),
        PSIJ: lambda: _psij(uri, jobs, folder),
    }


def _measure(jobs: int, folder: Path, only: List[str]) -> List[Dict[str, Any]]:
    flux_command, flux = find_flux()
    rows: List[Dict[str, Any]] = []
    with flux_instance(flux_command, str(folder / "broker")) as instance:
        contenders = _contenders(flux_command, flux, instance, jobs, folder)
        for name in only:
            try:
                seconds = contenders[name]()
            except ImportError as exc:
                rows.append(skipped_row(name, f"not installed: {exc}", kind=KINDS[name]))
            except Skip as exc:
                rows.append(skipped_row(name, str(exc), kind=KINDS[name]))
            except Exception as exc:  # noqa: BLE001 - one contender failing is a result
                reason = f"failed: {type(exc).__name__}: {exc}"[:400]
                rows.append(skipped_row(name, reason, kind=KINDS[name]))
            else:
                rows.append(row(name, [seconds], kind=KINDS[name], jobs=jobs))
            instance.run(["cancel", "--all", "--quiet"])
            instance.run(["queue", "drain"], timeout=600)
    return rows


def _goals(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    by_name = {item["contender"]: item for item in rows}
    baseline = (by_name.get(RAW_ASYNC) or {}).get("median")
    goals: Dict[str, Any] = {}
    for name, target in TARGETS.items():
        seconds = (by_name.get(name) or {}).get("median")
        if baseline and seconds:
            achieved = round(baseline / seconds, 2)
            goals[name] = {"target": target, "achieved": achieved, "met": achieved >= target}
    return goals


def run(quick: bool, workdir: Path) -> Dict[str, Any]:
    try:
        find_flux()
    except Skip as exc:
        return skipped_scenario(NAME, TITLE, str(exc))
    jobs = 40 if quick else 200
    rows = _measure(jobs, workdir / "packing", list(KINDS))
    result = scenario_result(
        NAME,
        TITLE,
        unit="s",
        higher_is_better=False,
        baseline=RAW_ASYNC,
        rows=rows,
        params={"jobs": jobs, "rounds": 1, "job": "true, one core"},
        notes=[
            "One instance with this machine's cores, queue running; each contender submits "
            "every job, then waits until all have ended; one run each.",
            "hpcbridge stages one wrapper (exit-code file, task choice) and records every job "
            "in SQLite; its plain jobs run that wrapper as the job's task, its batch jobs a "
            "nested instance each.",
        ],
        why={
            BATCH_NATIVE: "every batch job boots and shuts down a Flux broker of its own",
            PLAIN_CLI: "one `flux python` process submits the batch; `flux jobs` is polled "
            "at most 1 s apart while jobs run",
        },
    )
    goals = _goals(rows)
    if goals:
        result["goals"] = goals
        for name, goal in goals.items():
            result["notes"].append(
                f"Issue 13 goal ({name} >= {goal['target']}x raw submit_async): "
                f"{goal['achieved']:.2f}x - {'met' if goal['met'] else 'NOT met'}."
            )
    return result
