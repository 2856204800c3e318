"""Cost attribution from the job records: CPU-hours and GPU-hours, priced."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Dict, Iterable, List, Optional

from .store.jobs import JobRecord


@dataclass(frozen=True)
class JobCost:
    job_id: str
    scheduler: str
    state: str
    cpu_hours: float
    gpu_hours: float
    cost: float
    #: what the job was charged to: Slurm's account, Flux's bank (``None``: the default)
    account: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return {
            "job_id": self.job_id,
            "scheduler": self.scheduler,
            "account": self.account,
            "state": self.state,
            "cpu_hours": round(self.cpu_hours, 6),
            "gpu_hours": round(self.gpu_hours, 6),
            "cost": round(self.cost, 6),
        }


def job_cost(
    record: JobRecord, cpu_price: float, gpu_price: float, now: Optional[datetime] = None
) -> JobCost:
    """CPU-hours = CPUs × elapsed; GPU-hours = GPUs × elapsed; a job with GPUs pays both."""
    hours = record.elapsed_hours(now)
    cpu_hours = record.cpus * hours
    gpu_hours = (record.gpus or 0) * hours
    return JobCost(
        record.job_id,
        record.scheduler,
        record.state,
        cpu_hours,
        gpu_hours,
        cpu_hours * cpu_price + gpu_hours * gpu_price,
        record.account,
    )


def costs(records: Iterable[JobRecord], cpu_price: float, gpu_price: float) -> List[JobCost]:
    return [job_cost(record, cpu_price, gpu_price) for record in records]


def by_account(rows: Iterable[JobCost]) -> Dict[str, Dict[str, float]]:
    """CPU-hours, GPU-hours and cost per account (bank); the default is ``""``."""
    totals: Dict[str, Dict[str, float]] = {}
    for row in rows:
        total = totals.setdefault(
            row.account or "", {"cpu_hours": 0.0, "gpu_hours": 0.0, "cost": 0.0}
        )
        total["cpu_hours"] += row.cpu_hours
        total["gpu_hours"] += row.gpu_hours
        total["cost"] += row.cost
    return totals
