"""Futures and asyncio (issue 51): how soon a future resolves, and whether the loop is free.

Flux (a fresh broker): a job sleeps 2 s and writes its end time as its last act; the
latency is the moment the waiting call returned minus that time - raw
``flux.job.result`` after ``flux.job.submit`` (the baseline), hpcbridge's
``adapter.future(job).result()`` and ``await adapter.wait_async(job)`` (native driver,
plain jobs: the follower waits on the job manager's journal).  Target: within 0.1 s of
the raw wait.

asyncio: an event loop submits 100 jobs (``submit_many_async``), follows them with
``async for change in adapter.changes(ids)`` and ``await adapter.wait_all_async(ids)``,
while a 10 ms ticker task records how late each of its ticks came; the figure is the
worst lateness over the whole run (target: 0.1 s at most - hpcbridge never blocks the
loop).  On the mock scheduler (25 slots, each job ``sleep 1``) and on Flux (native,
plain jobs); for reference, a blocking ``wait_all`` called on the loop (what not to do).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

from ..common import Skip, interleave, row, scenario_result, skipped_row
from .flux_common import find_flux, flux_instance
from .wait_latency import latency, marked_script

NAME = "futures"
TITLE = "Futures and asyncio: job end -> result; a 10 ms ticker's worst lateness, seconds"

JOBS = 100
TICK = 0.01
RAW = "raw flux.job.result"
KINDS = {
    "Flux: job end -> result": {
        RAW: "raw",
        "hpcbridge future().result() (native, plain job)": "hpcbridge",
        "hpcbridge await wait_async() (native, plain job)": "hpcbridge",
    },
    f"asyncio: {JOBS} jobs, worst ticker lateness": {
        "hpcbridge async (mock)": "hpcbridge",
        "hpcbridge async (Flux native, plain jobs)": "hpcbridge",
        "blocking wait_all on the loop (mock, reference)": "other",
    },
}


async def _ticker(stop: asyncio.Event, lateness: List[float]) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        planned = loop.time() + TICK
        await asyncio.sleep(TICK)
        lateness.append(loop.time() - planned)


def worst_lateness(adapter: Any, script: str, blocking: bool = False, **options: Any) -> float:
    """Submit ``JOBS`` jobs and follow them on a loop beside a ticker: its worst lateness."""

    async def main() -> float:
        stop, lateness = asyncio.Event(), []
        ticker = asyncio.ensure_future(_ticker(stop, lateness))
        await asyncio.sleep(TICK * 3)
        ids = await adapter.submit_many_async([script] * JOBS, **options)
        if blocking:
            adapter.wait_all(ids, timeout=600)  # what not to do on a loop
        else:
            async for _change in adapter.changes(ids):
                pass
            await adapter.wait_all_async(ids)
        stop.set()
        await ticker
        return max(lateness)

    return asyncio.run(main())


def asyncio_contenders(folder: Path, flux_adapter: Any) -> Dict[str, Callable[[], float]]:
    from hpcbridge import MockAdapter, Settings

    settings = Settings.from_env(env={}, state_dir=str(folder / "mock-state"))
    mock = MockAdapter(settings=settings, slots=25)
    script = folder / "one-second.sh"
    script.write_text("#!/bin/sh\nsleep 1\n")
    script.chmod(0o755)
    names = list(KINDS[f"asyncio: {JOBS} jobs, worst ticker lateness"])
    contenders = {
        names[0]: lambda: worst_lateness(mock, str(script)),
        names[2]: lambda: worst_lateness(mock, str(script), blocking=True),
    }
    if flux_adapter is not None:
        contenders[names[1]] = lambda: worst_lateness(flux_adapter, str(script), nested=False)
    return contenders


def flux_contenders(folder: Path, flux: Any, handle: Any, adapter: Any) -> Dict[str, Any]:
    def raw() -> float:
        script, marker = marked_script(folder)
        spec = flux.job.JobspecV1.from_command(["/bin/sh", script])
        spec.cwd = str(folder)
        flux.job.result(handle, flux.job.submit(handle, spec))
        return latency(marker, time.time())

    def future() -> float:
        script, marker = marked_script(folder)
        adapter.future(adapter.submit_job(script, nested=False)).result(timeout=300)
        return latency(marker, time.time())

    def awaited() -> float:
        script, marker = marked_script(folder)
        job = adapter.submit_job(script, nested=False)
        asyncio.run(adapter.wait_async(job))
        return latency(marker, time.time())

    names = list(KINDS["Flux: job end -> result"])
    return {names[0]: raw, names[1]: future, names[2]: awaited}


def _rows(samples: Dict[str, List[float]], skipped: Dict[str, str]) -> List[Dict[str, Any]]:
    out = []
    for group, kinds in KINDS.items():
        for name, kind in kinds.items():
            if name in samples:
                out.append(row(name, samples[name], group=group, kind=kind))
            else:
                reason = skipped.get(name, "not run")
                out.append(skipped_row(name, reason, group=group, kind=kind))
    return out


def _measure(folder: Path, rounds: int) -> Dict[str, Any]:
    skipped: Dict[str, str] = {}
    try:
        flux_command, flux = find_flux()
    except Skip as exc:
        skipped = {name: str(exc) for name in KINDS["Flux: job end -> result"]}
        skipped["hpcbridge async (Flux native, plain jobs)"] = str(exc)
        samples, failed = interleave(asyncio_contenders(folder, None), rounds)
        return {"samples": samples, "skipped": {**skipped, **failed}}
    from hpcbridge import Settings
    from hpcbridge.schedulers.flux.adapter import FluxAdapter

    with flux_instance(flux_command, str(folder / "broker")) as instance:
        settings = Settings.from_env(env={}, state_dir=str(folder / "state"), scheduler="flux")
        adapter = FluxAdapter(
            uri=instance.uri, settings=settings, driver="native", flux_command=flux_command
        )
        adapter.open()
        contenders = flux_contenders(folder, flux, flux.Flux(instance.uri), adapter)
        contenders.update(asyncio_contenders(folder, adapter))
        samples, failed = interleave(contenders, rounds)
        adapter.close()
    return {"samples": samples, "skipped": failed}


def run(quick: bool, workdir: Path) -> Dict[str, Any]:
    rounds = 1 if quick else 3
    folder = workdir / "futures"
    folder.mkdir(parents=True, exist_ok=True)
    measured = _measure(folder, rounds)
    return scenario_result(
        NAME,
        TITLE,
        unit="s",
        higher_is_better=False,
        baseline=RAW,
        rows=_rows(measured["samples"], measured["skipped"]),
        params={"rounds": rounds, "jobs": JOBS, "ticker": TICK, "mock_slots": 25},
        notes=[
            "Flux latency = the waiting call returned - the script's last act (a timestamp "
            "it wrote); targets: within 0.1 s of raw flux.job.result.",
            "Ticker lateness: the worst delay of a 10 ms asyncio.sleep over the whole run "
            "(submission included, off the loop); target: 0.1 s at most.",
            "The blocking reference shows what a loop suffers when a blocking wait runs on it.",
        ],
        why={
            "hpcbridge future().result() (native, plain job)": "the follower's wait is woken "
            "by the journal's end event, then reads the final state: one status round",
            "hpcbridge await wait_async() (native, plain job)": "as the future, and the "
            "loop is told through call_soon_threadsafe",
        },
    )
