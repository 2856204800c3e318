#!/usr/bin/env python3
"""The example pipeline: train a tiny model through hpcbridge, log it to MLflow.

A Prefect flow in three steps, as in the source system:

1. ``submit_task`` stages ``run.sh`` and submits it to the scheduler the settings
   name (the embedded mock scheduler by default: a real local process; Slurm or
   Flux with ``--scheduler``/``HPCBRIDGE_SCHEDULER``), locally or over SSH;
2. ``wait_task`` waits for the job, raises unless it COMPLETED, and fetches
   ``model.pkl`` back (a plain copy locally, SFTP over SSH);
3. ``log_to_mlflow`` logs the model's parameters and metrics and the model file
   itself to an MLflow run, and tags the run with the job (``hpc_job_id``,
   ``hpc_scheduler``, ``slurm_job_id``, CPU-/GPU-hours and cost).

    python examples/pipeline/flow.py --dummy
    python examples/pipeline/flow.py --dummy --scheduler slurm --time 5

MLflow writes to ``--tracking-uri``, else ``$MLFLOW_TRACKING_URI``, else the
SQLite database ``./mlflow.db`` in the folder it is run from (MLflow's own
default; the logged model goes to ``./mlruns``).  See README.md beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import mlflow
from prefect import flow, task

from hpcbridge.integrations.mlflow import tag_run
from hpcbridge.integrations.pipeline import JobFailedError, resolve_settings
from hpcbridge.integrations.prefect import submit_task, wait_task

try:
    from prefect.cache_policies import NO_CACHE

    _NO_CACHE: Dict[str, Any] = {"cache_policy": NO_CACHE}
except ImportError:  # Prefect 2
    _NO_CACHE = {}

HERE = Path(__file__).resolve().parent

#: what the training job asks for (a dummy run needs far less)
DEFAULT_RESOURCES: Dict[str, Any] = {"ntasks": 1, "time": "10", "job_name": "hpcbridge-train"}


def tracking_uri_for(uri: Optional[str] = None) -> str:
    """``uri``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<this folder>/mlflow.db``."""
    chosen = uri or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri()
    if chosen.startswith("file:") or "://" not in chosen:
        # A file store was asked for by name: MLflow >= 3.7 keeps it in maintenance
        # mode and refuses it unless MLFLOW_ALLOW_FILE_STORE is set.
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return chosen


def default_tracking_uri() -> str:
    """``./mlflow.db`` as an absolute SQLite URI: where ``mlflow ui`` run here looks."""
    return "sqlite:///" + str(Path.cwd() / "mlflow.db")


@task(name="log-to-mlflow", **_NO_CACHE)
def log_to_mlflow(
    job_id: str,
    model_path: str,
    tracking_uri: str,
    experiment: str,
    settings: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """Log the fetched model, its parameters and metrics; tag the run with the job."""
    with open(model_path, "rb") as handle:
        model = pickle.load(handle)  # noqa: S301 - the model our own job just wrote
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment(experiment)
    scheduler = resolve_settings(settings).scheduler
    with mlflow.start_run(run_name=f"{scheduler}-job-{job_id}") as run:
        mlflow.log_params(model["params"])
        mlflow.log_metrics(model["metrics"])
        mlflow.log_artifact(model_path)
        tags = tag_run(job_id, settings=settings)
    return {
        "run_id": run.info.run_id,
        "experiment_id": run.info.experiment_id,
        "tags": tags,
        "metrics": model["metrics"],
    }


@flow(name="hpcbridge-example-training")
def training_pipeline(
    dummy: bool = False,
    resources: Optional[Dict[str, Any]] = None,
    settings: Optional[Dict[str, Any]] = None,
    tracking_uri: Optional[str] = None,
    experiment: str = "hpcbridge-example",
    poll_interval: float = 5.0,
    timeout: Optional[float] = None,
    local_dir: Optional[str] = None,
    extra_arguments: Optional[List[str]] = None,
) -> Dict[str, Any]:
    """Submit the training job, wait for it, fetch the model, log it to MLflow.

    ``settings`` overrides hpcbridge's settings (``{"scheduler": "slurm"}``);
    everything else comes from the environment, as for ``hpcbridge`` itself.
    """
    uri = tracking_uri_for(tracking_uri)
    environment: Dict[str, str] = {}
    if resolve_settings(settings).transport == "local":
        # The job runs on this machine: it finds train.py here, with this Python.
        environment = {"PIPELINE_DIR": str(HERE), "PIPELINE_PYTHON": sys.executable}
    arguments = (["--dummy"] if dummy else []) + list(extra_arguments or [])
    job_id, remote_model = submit_task(
        script=str(HERE / "run.sh"),
        resources=resources or DEFAULT_RESOURCES,
        artifact="model.pkl",
        arguments=arguments,
        environment=environment,
        settings=settings,
    )
    state, local_model = wait_task(
        job_id,
        remote_model,
        local_dir=local_dir,
        poll_interval=poll_interval,
        timeout=timeout,
        settings=settings,
    )
    logged = log_to_mlflow(job_id, local_model, uri, experiment, settings)
    return {
        "job_id": job_id,
        "state": state.value,
        "remote_model": remote_model,
        "model_path": local_model,
        "tracking_uri": uri,
        **logged,
    }


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Train a tiny model through hpcbridge.")
    parser.add_argument("--dummy", action="store_true", help="the small, fast training run")
    parser.add_argument("--scheduler", choices=["mock", "slurm", "flux"], help="default: env")
    parser.add_argument("--transport", choices=["local", "ssh"], help="default: env")
    parser.add_argument("--time", default="10", help="wall-time limit (default 10 minutes)")
    parser.add_argument("--partition", help="Slurm partition")
    parser.add_argument("--poll-interval", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, help="give up waiting after this many seconds")
    parser.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default sqlite:///$PWD/mlflow.db; a file store only "
        "when named, e.g. file:///path/mlruns)",
    )
    parser.add_argument("--experiment", default="hpcbridge-example")
    parser.add_argument("--local-dir", help="where to fetch model.pkl (default: a temp folder)")
    args = parser.parse_args(argv)

    resources = dict(DEFAULT_RESOURCES, time=args.time)
    if args.partition:
        resources["partition"] = args.partition
    settings = {
        key: value
        for key, value in (("scheduler", args.scheduler), ("transport", args.transport))
        if value
    }
    try:
        result = training_pipeline(
            dummy=args.dummy,
            resources=resources,
            settings=settings or None,
            tracking_uri=args.tracking_uri,
            experiment=args.experiment,
            poll_interval=args.poll_interval,
            timeout=args.timeout,
            local_dir=args.local_dir,
        )
    except JobFailedError as exc:
        print(f"flow.py: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
