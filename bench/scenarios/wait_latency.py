"""Wait latency: from a job's end to the waiting call returning.

Each sample submits one job whose script sleeps 2 s and, as its last act,
writes ``date +%s.%N`` to a marker file; the waiter is started right after the
submission and the latency is (the time the wait returned) - (the marker's
timestamp), both on this machine's clock.  What follows the script's last act
(the scheduler noticing the end, Slurm's epilog, a Flux batch job's nested
instance shutting down) is part of the latency, as a user sees it.

Slurm: raw ``sbatch --wait`` (the baseline), hpcbridge ``submit_job`` +
``wait_until_complete`` (default ``poll_interval=10``: first poll after 0.25 s,
backing off x1.5 while nothing changes), PSI/J ``job.wait()`` with its default
configuration (its thread polls squeue 2 s after start, then every 30 s).
Flux (a fresh broker, queue running): raw ``flux.job.result`` after
``submit`` (event-driven; the baseline), hpcbridge native driver (waits on
``result_async`` futures between polls), hpcbridge CLI driver (polls
``flux jobs``), PSI/J's ``FluxJobExecutor`` ``job.wait()`` (event-driven).
"""

from __future__ import annotations

import itertools
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from ..common import (
    Skip,
    interleave,
    row,
    scancel,
    scenario_result,
    skipped_row,
    slurm_available,
)
from . import slurm_common as sc
from .flux_common import find_flux, flux_instance, flux_uri_env, psij_flux_executor, psij_flux_job

NAME = "wait_latency"
TITLE = "Wait latency: job end -> wait returns, seconds"

SLEEP = 2
RAW_BATCH = "raw flux.job.result (hpcbridge's batch job)"
_serial = itertools.count()

KINDS = {
    "Slurm": {
        "raw sbatch --wait": "raw",
        "hpcbridge wait_until_complete": "hpcbridge",
        "PSI/J job.wait()": "peer",
    },
    "Flux": {
        "raw flux.job.result": "raw",
        "raw flux.job.result (hpcbridge's batch job)": "raw",
        "hpcbridge wait_until_complete (native)": "hpcbridge",
        "hpcbridge wait_until_complete (CLI)": "hpcbridge",
        "hpcbridge wait_until_complete (native, plain job)": "hpcbridge",
        "hpcbridge wait_until_complete (CLI, plain job)": "hpcbridge",
        "PSI/J job.wait()": "peer",
    },
}


def marked_script(folder: Path) -> Tuple[str, Path]:
    """A script that sleeps, then writes its end time as its last act."""
    index = next(_serial)
    marker = folder / f"end-{index}.txt"
    script = folder / f"marked-{index}.sh"
    script.write_text(f"#!/bin/sh\nsleep {SLEEP}\ndate +%s.%N > {marker}\n")
    script.chmod(0o755)
    return str(script), marker


def latency(marker: Path, returned: float) -> float:
    text = marker.read_text().strip() if marker.exists() else ""
    if not text:
        raise RuntimeError(f"the job wrote no end marker ({marker})")
    return returned - float(text)


# -- Slurm ---------------------------------------------------------------------------


def slurm_contenders(
    folder: Path, quick: bool
) -> Tuple[Dict[str, Callable[[], float]], Dict[str, str]]:
    contenders: Dict[str, Callable[[], float]] = {}
    skipped: Dict[str, str] = {}

    def raw() -> float:
        script, marker = marked_script(folder)
        done = subprocess.run(
            ["sbatch", "--wait", "--parsable", "--output=/dev/null", f"--chdir={folder}", script],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        returned = time.time()
        if done.returncode != 0:
            raise RuntimeError(f"sbatch --wait exited {done.returncode}: {done.stderr[:200]}")
        return latency(marker, returned)

    contenders["raw sbatch --wait"] = raw
    adapter = sc.hpcbridge_adapter(folder)

    def hpcbridge() -> float:
        script, marker = marked_script(folder)
        job_id = adapter.submit_job(script)
        try:
            adapter.wait_until_complete(job_id, timeout=300)
            returned = time.time()
        finally:
            scancel([job_id], settle=5)
        return latency(marker, returned)

    contenders["hpcbridge wait_until_complete"] = hpcbridge
    psij_name = "PSI/J job.wait()"
    try:
        import psij

        psij_config: Dict[str, Any] = {"queue_polling_interval": 2} if quick else {}

        def psij_wait() -> float:
            # A fresh executor per job, as a script that submits one job and waits.
            executor = sc.psij_slurm_executor(folder, **psij_config)
            script, marker = marked_script(folder)
            job = psij.Job(psij.JobSpec(executable="/bin/sh", arguments=[script], directory=folder))
            executor.submit(job)
            try:
                job.wait(timeout=None)
                returned = time.time()
            finally:
                scancel([job.native_id] if job.native_id else [], settle=5)
            return latency(marker, returned)

        contenders[psij_name] = psij_wait
    except ImportError as exc:
        skipped[psij_name] = f"psij-python is not installed ({exc})"
    return contenders, skipped


# -- Flux ----------------------------------------------------------------------------


def flux_rows(folder: Path, rounds: int) -> List[Dict[str, Any]]:
    kinds = KINDS["Flux"]
    try:
        flux_command, flux = find_flux()
    except Skip as exc:
        return [
            skipped_row(name, str(exc), group="Flux", kind=kind) for name, kind in kinds.items()
        ]
    from hpcbridge import Settings
    from hpcbridge.schedulers.flux.adapter import FluxAdapter

    skipped: Dict[str, str] = {}
    with flux_instance(flux_command, str(folder / "broker")) as instance:
        handle = flux.Flux(instance.uri)
        settings = Settings.from_env(env={}, state_dir=str(folder / "state"), scheduler="flux")
        contenders: Dict[str, Callable[[], float]] = {}

        def raw() -> float:
            script, marker = marked_script(folder)
            spec = flux.job.JobspecV1.from_command(["/bin/sh", script])
            spec.cwd = str(folder)
            job_id = flux.job.submit(handle, spec)
            flux.job.result(handle, job_id)
            return latency(marker, time.time())

        contenders["raw flux.job.result"] = raw

        def adapter_waiter(driver: str, nested: bool) -> Callable[[], float]:
            adapter = FluxAdapter(
                uri=instance.uri, settings=settings, driver=driver, flux_command=flux_command
            )
            adapter.open().driver  # noqa: B018 - choose the driver now, not in the first sample

            def measure() -> float:
                script, marker = marked_script(folder)
                job_id = adapter.submit_job(script, nested=nested)
                adapter.wait_until_complete(job_id, timeout=300)
                return latency(marker, time.time())

            return measure

        try:
            submitter = FluxAdapter(
                uri=instance.uri, settings=settings, driver="native", flux_command=flux_command
            )
            submitter.open()

            def raw_batch() -> float:
                script, marker = marked_script(folder)
                job_id = submitter.submit_job(script, nested=True)
                flux.job.result(handle, flux.job.JobID(job_id))
                return latency(marker, time.time())

            contenders[RAW_BATCH] = raw_batch
        except Exception as exc:  # noqa: BLE001
            skipped[RAW_BATCH] = f"failed to set up: {type(exc).__name__}: {exc}"[:400]
        for driver, nested in (("native", True), ("cli", True), ("native", False), ("cli", False)):
            label = "native" if driver == "native" else "CLI"
            name = f"hpcbridge wait_until_complete ({label}{'' if nested else ', plain job'})"
            try:
                contenders[name] = adapter_waiter(driver, nested)
            except Exception as exc:  # noqa: BLE001
                skipped[name] = f"failed to set up: {type(exc).__name__}: {exc}"[:400]
        with flux_uri_env(instance.uri):
            try:
                executor = psij_flux_executor()

                def psij_wait() -> float:
                    script, marker = marked_script(folder)
                    job = psij_flux_job("/bin/sh", [script], folder)
                    executor.submit(job)
                    job.wait()
                    return latency(marker, time.time())

                contenders["PSI/J job.wait()"] = psij_wait
            except Exception as exc:  # noqa: BLE001
                skipped["PSI/J job.wait()"] = f"PSI/J's Flux executor: {exc}"[:400]
            samples, failed = interleave(contenders, rounds)
        skipped.update(failed)
    return _rows("Flux", samples, skipped)


def _rows(group: str, samples: Dict[str, List[float]], skipped: Dict[str, str]) -> List[dict]:
    out = []
    for name, kind in KINDS[group].items():
        if name in samples:
            out.append(row(name, samples[name], group=group, kind=kind))
        elif name in skipped:
            out.append(skipped_row(name, skipped[name], group=group, kind=kind))
    return out


def run(quick: bool, workdir: Path) -> Dict[str, Any]:
    rounds = 1 if quick else 3
    rows: List[Dict[str, Any]] = []
    reason = slurm_available()
    if reason:
        rows += [
            skipped_row(name, reason, group="Slurm", kind=k) for name, k in KINDS["Slurm"].items()
        ]
    else:
        folder = workdir / "slurm"
        folder.mkdir(parents=True, exist_ok=True)
        contenders, skipped = slurm_contenders(folder, quick)
        samples, failed = interleave(contenders, rounds)
        skipped.update(failed)
        rows += _rows("Slurm", samples, skipped)
    folder = workdir / "flux"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        rows += flux_rows(folder, rounds)
    except Exception as exc:  # noqa: BLE001
        reason = f"failed: {type(exc).__name__}: {exc}"[:400]
        rows += [
            skipped_row(name, reason, group="Flux", kind=k) for name, k in KINDS["Flux"].items()
        ]
    return scenario_result(
        NAME,
        TITLE,
        unit="s",
        higher_is_better=False,
        baseline=None,
        rows=rows,
        params={
            "rounds": rounds,
            "job": f"sleep {SLEEP}; date +%s.%N > marker",
            "hpcbridge_poll_interval": 10.0,
            "psij_slurm_queue_polling_interval": 2 if quick else 30,
        },
        notes=[
            "Latency = wait returned - the script's last act (a timestamp it wrote); both on "
            "this machine's clock.  Baseline per group: the scheduler's own wait.",
            "hpcbridge's Flux lines without 'plain job' are batch jobs (a nested instance whose "
            "shutdown after the script is included); its 'plain job' lines, like the raw and "
            "PSI/J Flux jobs, run the script directly.",
            (
                "PSI/J's Slurm executor is used here with queue_polling_interval=2 (--quick)."
                if quick
                else "PSI/J's Slurm executor is used with its defaults (squeue every 30 s); "
                "SlurmExecutorConfig(queue_polling_interval=...) makes it quicker."
            ),
            "The second Flux raw line waits with flux.job.result on the same batch job "
            "hpcbridge submits: the gap between the two raw lines is the batch job's own "
            "shutdown, the gap above it hpcbridge's waiting.",
        ],
        why={
            "hpcbridge wait_until_complete": "polls squeue (then sacct) with back-off up to "
            "poll_interval; the job's end is seen at the next poll, not pushed",
            "hpcbridge wait_until_complete (CLI)": "the CLI driver polls `flux jobs` with "
            "back-off (no event stream without the bindings)",
            "hpcbridge wait_until_complete (native)": "hpcbridge's Flux job is a batch job "
            "(its nested instance shuts down after the script: see the batch-job raw line)",
            "hpcbridge wait_until_complete (native, plain job)": "the end comes with the job's "
            "result event, which also carries its final state: no status query after it",
            "hpcbridge wait_until_complete (CLI, plain job)": "polls `flux jobs`, at most 1 s "
            "apart while the job runs",
        },
    )
