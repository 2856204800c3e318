"""Flux submission throughput: hpcbridge against a plain ``submit_async`` loop.

On a fresh single-broker instance, N trivial batch jobs are submitted by

- ``raw``         a plain loop of ``flux.job.submit_async`` futures (the ceiling),
- ``native``      ``FluxAdapter(driver="native").submit_many`` (pipelined futures,
                  plus staging one wrapper and recording every job),
- ``cli_bulk``    ``FluxAdapter(driver="cli").submit_many`` (one ``flux python``
                  process submits them all),
- ``cli_single``  ``FluxAdapter(driver="cli").submit_job`` per job (one ``flux
                  batch`` process each) - only a sample, extrapolated.

Rounds are interleaved (the method order rotates) and medians reported.
Scheduling is stopped while submitting, so the rate measured is ingestion,
not 1000 nested brokers starting on the same cores; every round's jobs are
cancelled before the next.

    python bench/flux_bench.py [--jobs 1000] [--rounds 3] [--single 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from hpcbridge import Settings
from hpcbridge.schedulers.flux import jobspec
from hpcbridge.schedulers.flux.adapter import FluxAdapter
from hpcbridge.schedulers.flux.bindings import import_bindings
from hpcbridge.schedulers.flux.jobspec import jobspec_params
from hpcbridge.schedulers.flux.native_driver import BindingsConnection
from hpcbridge.schedulers.flux.request import SubmitRequest

if __package__ in (None, ""):  # run as a script: the repository root holds tests.support
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.flux import FluxInstance, find_flux_commands, flux_version  # noqa: E402


def _script(folder: Path) -> str:
    path = folder / "trivial.sh"
    path.write_text("#!/bin/sh\ntrue\n")
    path.chmod(0o755)
    return str(path)


def _reset(instance: FluxInstance) -> None:
    """Cancel everything submitted so far and wait until nothing is active."""
    instance.run(["cancel", "--all", "--quiet"])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        active = instance.run(["jobs", "--no-header", "-o", "{id}"]).stdout.split()
        if not active:
            return
        time.sleep(0.2)


def run(
    jobs: int = 1000,
    rounds: int = 3,
    single: int = 20,
    flux: Optional[str] = None,
    workdir: Optional[str] = None,
) -> Dict[str, Any]:
    """Run the benchmark; return rates (jobs/s) per method and ratios to ``raw``."""
    commands = [flux] if flux else find_flux_commands()
    if not commands:
        raise RuntimeError("flux-core not found (PATH, HPCBRIDGE_TEST_FLUX_PREFIXES, /opt/flux-*)")
    flux_command = commands[0]
    flux_module = import_bindings(flux_command)
    base = Path(workdir or tempfile.mkdtemp(prefix="hpcb-flux-bench-"))
    script = _script(base)
    samples: Dict[str, List[float]] = {"raw": [], "native": [], "cli_bulk": [], "cli_single": []}
    with FluxInstance(flux_command, workdir=str(base / "broker")) as instance:
        # Ingest only: jobs stay in SCHED while the queue is stopped.
        instance.check(["queue", "stop"])
        settings = Settings.from_env(env={}, state_dir=str(base / "state"))
        native = FluxAdapter(
            uri=instance.uri, settings=settings, driver="native", flux_command=flux_command
        )
        cli = FluxAdapter(
            uri=instance.uri, settings=settings, driver="cli", flux_command=flux_command
        )
        remote = str(base / "jobs")

        def raw() -> float:
            connection = BindingsConnection(
                flux_module, instance.uri, flux_bin_dir=os.path.dirname(flux_command)
            )
            request = SubmitRequest(
                wrapper_path=script,
                job_name="trivial",
                output=str(base / "raw-{{id}}.out"),
                cwd=str(base),
            )
            spec = jobspec.build_jobspec(
                flux_module.job.JobspecV1, jobspec_params(request), connection.job_environment()
            )
            handle = flux_module.Flux(instance.uri)
            started = time.perf_counter()
            futures = [flux_module.job.submit_async(handle, spec) for _ in range(jobs)]
            ids = [future.get_id() for future in futures]
            elapsed = time.perf_counter() - started
            assert len(ids) == jobs
            return jobs / elapsed

        def bulk(adapter: FluxAdapter) -> Callable[[], float]:
            def measure() -> float:
                started = time.perf_counter()
                ids = adapter.submit_many([script] * jobs, remote_dir=None)
                elapsed = time.perf_counter() - started
                assert len(ids) == jobs
                return jobs / elapsed

            return measure

        def one_by_one() -> float:
            started = time.perf_counter()
            for _ in range(single):
                cli.submit_job(script)
            return single / (time.perf_counter() - started)

        methods: Dict[str, Callable[[], float]] = {
            "raw": raw,
            "native": bulk(native),
            "cli_bulk": bulk(cli),
            "cli_single": one_by_one,
        }
        # Warm up handles, policies, queue lookups and the validator once.
        native.submit_job(script)
        cli.submit_job(script)
        _reset(instance)
        names = list(methods)
        for round_index in range(rounds):
            order = names[round_index % len(names) :] + names[: round_index % len(names)]
            for name in order:
                samples[name].append(methods[name]())
                _reset(instance)
        native.close()
        cli.close()
        del remote
    medians = {name: statistics.median(values) for name, values in samples.items()}
    result = {
        "flux": flux_command,
        "flux_version": flux_version(flux_command),
        "jobs": jobs,
        "rounds": rounds,
        "single_sample": single,
        "cpus": os.cpu_count(),
        "samples_jobs_per_s": samples,
        "median_jobs_per_s": medians,
        "ratio_to_raw": {name: medians[name] / medians["raw"] for name in medians},
        "extrapolated_seconds_for_all": {name: jobs / medians[name] for name in medians},
    }
    if workdir is None:
        shutil.rmtree(base, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--single", type=int, default=20)
    parser.add_argument("--flux", help="path of the flux command (default: found)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.jobs, args.rounds, args.single, args.flux)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"flux {result['flux_version']} ({result['flux']}), {result['cpus']} cpus, {args.jobs} jobs"
    )
    print(f"{'method':<12}{'median jobs/s':>15}{'vs raw':>9}{'time for all':>15}   samples")
    for name, rate in result["median_jobs_per_s"].items():
        samples = ", ".join(f"{value:.0f}" for value in result["samples_jobs_per_s"][name])
        print(
            f"{name:<12}{rate:>15.1f}{result['ratio_to_raw'][name]:>8.0%}"
            f"{result['extrapolated_seconds_for_all'][name]:>14.1f}s   {samples}"
        )


if __name__ == "__main__":
    main()
