"""Cost from what the schedulers charged, priced: pure (the figures are read by the adapters'
``charges``: ``sacct``, ``flux jobs``).  Each job is counted once - a pack's allocations, its
tasks shown under them - and mock jobs apart, charged nothing."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..model import Charge
from ..store.jobs import JobRecord

#: the settings that price an hour, as the environment spells them
PRICE_VARIABLES = ("HPCBRIDGE_CPU_COST_PER_HOUR", "HPCBRIDGE_GPU_COST_PER_HOUR")

#: where a job's figures come from
CHARGED = "charged"  # what the scheduler charged (sacct; Flux's R x run time)
REQUESTED = "requested"  # not read from the scheduler: what was asked for x elapsed
MOCK = "mock"  # the mock scheduler charges nothing


def charge_of(record: JobRecord) -> Optional[Charge]:
    """The charge recorded on a job (``None`` while none was read)."""
    if record.charged_cpu_seconds is None:
        return None
    return Charge(
        record.charged_cpu_seconds, record.charged_gpu_seconds, record.charged_billing_seconds
    )


def with_charge(record: JobRecord, charge: Charge) -> JobRecord:
    return replace(
        record,
        charged_cpu_seconds=charge.cpu_seconds,
        charged_gpu_seconds=charge.gpu_seconds,
        charged_billing_seconds=charge.billing_seconds,
    )


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
    #: ``charged``, ``requested`` or ``mock`` (see the constants above)
    basis: str = REQUESTED
    #: Slurm's billing units x hours (``None``: not known)
    billing_hours: Optional[float] = None
    #: a pack's allocation: the tasks it ran, a breakdown of its own figures (not added)
    tasks: Tuple[JobCost, ...] = ()

    def to_json(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {
            "job_id": self.job_id,
            "scheduler": self.scheduler,
            "account": self.account,
            "state": self.state,
            "basis": self.basis,
            "cpu_hours": round(self.cpu_hours, 6),
            "gpu_hours": round(self.gpu_hours, 6),
            "billing_hours": None if self.billing_hours is None else round(self.billing_hours, 6),
            "cost": round(self.cost, 6),
        }
        if self.tasks:
            data["tasks"] = [task.to_json() for task in self.tasks]
        return data


def job_cost(
    record: JobRecord, cpu_price: float, gpu_price: float, now: Optional[datetime] = None
) -> JobCost:
    """What the scheduler charged, when read (``charged``); else CPUs and GPUs asked for x
    elapsed (``requested``).  A mock job costs nothing (``mock``); a job with GPUs pays both."""
    charge = charge_of(record)
    billing = None
    if charge is not None:
        cpu_hours = charge.cpu_seconds / 3600.0
        if charge.gpu_seconds is not None:
            gpu_hours = charge.gpu_seconds / 3600.0
        else:
            gpu_hours = (record.gpus or 0) * record.elapsed_hours(now)
        if charge.billing_seconds is not None:
            billing = charge.billing_seconds / 3600.0
        basis = CHARGED
    else:
        hours = record.elapsed_hours(now)
        cpu_hours, gpu_hours = record.cpus * hours, (record.gpus or 0) * hours
        basis = MOCK if record.scheduler == "mock" else REQUESTED
    price = 0.0 if basis == MOCK else cpu_hours * cpu_price + gpu_hours * gpu_price
    return JobCost(
        record.job_id,
        record.scheduler,
        record.state,
        cpu_hours,
        gpu_hours,
        price,
        record.account,
        basis,
        billing,
    )


def costs(records: Iterable[JobRecord], cpu_price: float, gpu_price: float) -> List[JobCost]:
    return [job_cost(record, cpu_price, gpu_price) for record in records]


#: a job as the store keys it: (scheduler, host, job id)
JobKey = Tuple[str, str, str]


def key_of(record: JobRecord) -> JobKey:
    return (record.scheduler, record.host, record.job_id)


@dataclass
class CostReport:
    """The jobs as counted: ``rows`` (real jobs, a pack's allocation with its tasks under
    it) and ``mock`` (apart, charged nothing), each with where it came from."""

    rows: List[JobCost] = field(default_factory=list)
    mock: List[JobCost] = field(default_factory=list)
    #: the index of each counted row in the records given (for their stale marks)
    sources: List[int] = field(default_factory=list)
    mock_sources: List[int] = field(default_factory=list)


def report(
    records: Sequence[JobRecord],
    cpu_price: float,
    gpu_price: float,
    inside: Mapping[JobKey, JobKey],
    now: Optional[datetime] = None,
) -> CostReport:
    """Count each job once: a job ``inside`` another one (a pack's task -> its allocation)
    is shown under it and not added again; one whose allocation is not among ``records``
    is not counted at all (its allocation is what was charged)."""
    by_key = {key_of(record): index for index, record in enumerate(records)}
    under: Dict[int, List[JobCost]] = {}  # an allocation's index -> its tasks
    held = set()  # the indexes of jobs inside another
    for index, record in enumerate(records):
        holder = inside.get(key_of(record))
        if holder is None:
            continue
        held.add(index)
        if holder in by_key:
            task = job_cost(record, cpu_price, gpu_price, now)
            under.setdefault(by_key[holder], []).append(task)
    counted = CostReport()
    for index, record in enumerate(records):
        if index in held:
            continue
        row = job_cost(record, cpu_price, gpu_price, now)
        if index in under:
            row = replace(row, tasks=tuple(under[index]))
        if row.basis == MOCK:
            counted.mock.append(row)
            counted.mock_sources.append(index)
        else:
            counted.rows.append(row)
            counted.sources.append(index)
    return counted


def total(rows: Iterable[JobCost]) -> Dict[str, float]:
    listed = list(rows)
    return {
        "cpu_hours": sum(row.cpu_hours for row in listed),
        "gpu_hours": sum(row.gpu_hours for row in listed),
        "cost": sum(row.cost for row in listed),
    }


def by_account(rows: Iterable[JobCost]) -> Dict[str, Dict[str, float]]:
    """CPU-hours, GPU-hours and cost per account (bank); the default is ``""``."""
    totals: Dict[str, Dict[str, float]] = {}
    for row in rows:
        entry = totals.setdefault(
            row.account or "", {"cpu_hours": 0.0, "gpu_hours": 0.0, "cost": 0.0}
        )
        entry["cpu_hours"] += row.cpu_hours
        entry["gpu_hours"] += row.gpu_hours
        entry["cost"] += row.cost
    return totals


def no_price_note(cpu_price: float, gpu_price: float) -> Optional[str]:
    """The line that says no price is set (``None`` when one is)."""
    if cpu_price or gpu_price:
        return None
    return (
        "no price is set, so every cost is 0: set "
        f"{PRICE_VARIABLES[0]} and {PRICE_VARIABLES[1]} to what the site charges "
        "(e.g. 0.05 per CPU-hour)"
    )


# -- which jobs ----------------------------------------------------------------------


def parse_day_or_time(text: str, end: bool = False) -> datetime:
    """An ISO date or date and time (``2026-12-05``, ``2026-12-05T10:00``, with or without
    an offset; without one: this machine's zone).  A bare date given as an ``end`` means
    the end of that day.  ``ValueError`` saying the form otherwise."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{text!r} is not an ISO date: write 2026-12-05 or 2026-12-05T10:00"
        ) from None
    if end and len(value) == 10:  # a date alone: the whole day
        when += timedelta(days=1)
    return when if when.tzinfo else when.astimezone()


def within(
    record: JobRecord, since: Optional[datetime] = None, until: Optional[datetime] = None
) -> bool:
    """Whether the job was submitted at ``since`` or later and before ``until`` (a job with
    no submit time recorded counts by its start)."""
    when = record.submit_time or record.start_time
    if when is None:
        return since is None and until is None
    if when.tzinfo is None:
        when = when.astimezone()
    return (since is None or when >= since) and (until is None or when < until)
