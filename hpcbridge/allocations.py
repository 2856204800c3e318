"""Allocation packing, run: the pack's Slurm allocations held, a Flux instance reached in
each (``slurm:<id>``), a sweep's tasks sent into them as plain Flux jobs, the allocations
released when the sweep is done - or fails, or is interrupted.

The request and the dealing are ``packing``'s; the allocations are Slurm jobs submitted
through the Slurm adapter (its transport: locally or over SSH), and each instance is a
``FluxAdapter`` on the same transport, so its tasks go in at Flux's rate and its outer
limit check keeps every task inside its allocation's time.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .engine.adapter import SchedulerAdapter
from .errors import JobTimeoutError, SchedulerAdapterError
from .model import JobState, JobStatus
from .packing import Pack, allocation_script, split
from .schedulers.flux.adapter import FluxAdapter

log = logging.getLogger("hpcbridge")


class AllocationError(SchedulerAdapterError):
    """An allocation of a pack ended before its instance could take tasks."""


class Allocations:
    """The pack's allocations on one Slurm adapter: started, reached, released."""

    def __init__(self, slurm: SchedulerAdapter, pack: Pack, flux_command: str = "flux") -> None:
        self.slurm = slurm
        self.pack = pack
        self.flux_command = flux_command
        #: the allocations' Slurm job ids, in the order they were asked for
        self.job_ids: List[str] = []

    def script(self) -> str:
        """The allocations' batch script, written under the state folder; its path."""
        state = self.slurm.settings.state_path
        state.mkdir(parents=True, exist_ok=True)
        folder = tempfile.mkdtemp(prefix="pack-", dir=state)
        path = os.path.join(folder, "allocation.sh")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(allocation_script(self.flux_command, self.pack.nodes))
        os.chmod(path, 0o700)
        return path

    def start(self) -> List[str]:
        """Submit the ``count`` allocations; their job ids."""
        path = self.script()
        for _ in range(self.pack.count):
            self.job_ids.append(self.slurm.submit_job(path, self.pack.allocation_resources()))
        log.info("pack: %d allocation(s) asked for: %s", len(self.job_ids), " ".join(self.job_ids))
        return list(self.job_ids)

    def wait_running(self, timeout: Optional[float] = None, poll_interval: float = 1.0) -> None:
        """Until every allocation runs; ``AllocationError`` for one that ended first,
        ``JobTimeoutError`` past ``timeout``."""
        deadline = time.monotonic() + timeout if timeout is not None else None
        waiting = set(self.job_ids)
        while waiting:
            statuses = self.slurm.get_job_statuses(sorted(waiting))
            for job_id, status in statuses.items():
                if status.state is JobState.RUNNING:
                    waiting.discard(job_id)
                elif status.state.is_terminal:
                    raise AllocationError(_ended_early(job_id, status))
            if waiting and deadline is not None and time.monotonic() > deadline:
                raise JobTimeoutError(
                    f"pack: allocation(s) {' '.join(sorted(waiting))} not running after "
                    f"{timeout:.0f} s; see `squeue -j` for why (a busy partition waits)"
                )
            if waiting:
                time.sleep(poll_interval)

    def instance(self, job_id: str, **kwargs: Any) -> FluxAdapter:
        """The Flux instance of allocation ``job_id``, reached, for plain jobs;
        ``AllocationError`` when the allocation ended instead."""
        settings = dataclasses.replace(self.slurm.settings, flux_nested=False)
        adapter = FluxAdapter(
            self.slurm.executor,
            uri=f"slurm:{job_id}",
            flux_command=self.flux_command,
            settings=settings,
            **kwargs,
        )
        try:
            adapter.open()
        except SchedulerAdapterError:
            status = self.slurm.get_job_status(job_id)
            if status.state.is_terminal:
                raise AllocationError(_ended_early(job_id, status)) from None
            raise
        return adapter

    def release(self) -> None:
        """Cancel every allocation (their instances and anything left in them)."""
        if self.job_ids:
            self.slurm.cancel_jobs(self.job_ids)
            log.info("pack: allocation(s) released: %s", " ".join(self.job_ids))


def _ended_early(job_id: str, status: JobStatus) -> str:
    reason = f" ({status.reason})" if status.reason else ""
    return (
        f"pack: allocation {job_id} ended {status.state.value}{reason} before its Flux "
        "instance took a task; see its output (`hpcbridge logs "
        f"{job_id}`) - is flux on PATH on the compute nodes (HPCBRIDGE_FLUX_COMMAND)?"
    )


def run_packed(
    slurm: SchedulerAdapter,
    jobs: Sequence[Any],
    resources: Optional[Mapping[str, Any]],
    pack: Pack,
    *,
    flux_command: str = "flux",
    poll_interval: Optional[float] = None,
    timeout: Optional[float] = None,
    **flux_options: Any,
) -> Dict[str, JobStatus]:
    """``jobs`` (as ``submit_many`` takes them) run as plain Flux jobs in ``pack``'s
    allocations, dealt evenly among them; every task's final status by its Flux id.
    The allocations are released whatever happens."""
    allocations = Allocations(slurm, pack, flux_command)
    instances: List[FluxAdapter] = []
    try:
        allocations.start()
        allocations.wait_running(timeout)
        instances = [allocations.instance(job_id, **flux_options) for job_id in allocations.job_ids]
        sent = [
            (instance, instance.submit_many(part, resources))
            for instance, part in zip(instances, split(list(jobs), len(instances)))
            if part
        ]
        finals: Dict[str, JobStatus] = {}
        for instance, ids in sent:
            finals.update(instance.wait_all(ids, poll_interval=poll_interval, timeout=timeout))
        return finals
    finally:
        allocations.release()
        for instance in instances:
            instance.close()
