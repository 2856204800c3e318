"""Tag an MLflow run with the HPC job that trained its model and what it cost (the
source system's tags ``hpc_job_id``, ``hpc_scheduler``, ``slurm_job_id``, and ``hpc_state``,
``hpc_exit_code``, ``hpc_cpu_hours``, ``hpc_gpu_hours``, ``hpc_cost`` from the job store)."""

from __future__ import annotations

import logging
from typing import Any, Dict, Optional

import mlflow
from mlflow.entities import RunTag
from mlflow.tracking import MlflowClient

from ..engine.cost import job_cost
from ..store.jobs import JobStore
from .pipeline import SettingsLike, resolve_settings

log = logging.getLogger("hpcbridge")


def _number(value: float) -> str:
    return f"{round(value, 6):g}" if value else "0"


def job_tags(
    job_id: Any,
    scheduler: Optional[str] = None,
    store: Optional[JobStore] = None,
    settings: SettingsLike = None,
) -> Dict[str, str]:
    """The tags for ``job_id`` (no MLflow call): ids always, usage and cost when recorded
    (``scheduler`` and ``store`` default to the settings')."""
    resolved = resolve_settings(settings)
    scheduler = scheduler or resolved.scheduler
    job_id = str(job_id).strip()
    tags = {"hpc_job_id": job_id, "hpc_scheduler": scheduler, "slurm_job_id": job_id}
    active_store = store if store is not None else JobStore(resolved.database_path)
    try:
        record = active_store.get(job_id, scheduler)
    finally:
        if store is None:  # opened here
            active_store.close()
    if record is None:
        log.warning(
            "no record of %s job %s in %s: tagging its id only",
            scheduler,
            job_id,
            active_store.path,
        )
        return tags
    cost = job_cost(record, resolved.cpu_cost_per_hour, resolved.gpu_cost_per_hour)
    tags["hpc_state"] = record.state
    if record.exit_code is not None:
        tags["hpc_exit_code"] = str(record.exit_code)
    tags["hpc_cpu_hours"] = _number(cost.cpu_hours)
    tags["hpc_gpu_hours"] = _number(cost.gpu_hours)
    tags["hpc_cost"] = _number(cost.cost)
    return tags


def tag_run(
    job_id: Any,
    run_id: Optional[str] = None,
    scheduler: Optional[str] = None,
    store: Optional[JobStore] = None,
    settings: SettingsLike = None,
    client: Optional[MlflowClient] = None,
) -> Dict[str, str]:
    """Tag the active run (or ``run_id``) with the job's tags; return them
    (``RuntimeError`` when no run is active and no ``run_id`` is given)."""
    tags = job_tags(job_id, scheduler=scheduler, store=store, settings=settings)
    if run_id is None and client is None:
        if mlflow.active_run() is None:
            raise RuntimeError(
                "no active MLflow run: call tag_run inside mlflow.start_run() or pass run_id="
            )
        mlflow.set_tags(tags)
        return tags
    if run_id is None:
        active = mlflow.active_run()
        if active is None:
            raise RuntimeError("no active MLflow run: pass run_id=")
        run_id = active.info.run_id
    (client or MlflowClient()).log_batch(
        run_id, tags=[RunTag(key, value) for key, value in tags.items()]
    )
    return tags


__all__ = ["job_tags", "tag_run"]
