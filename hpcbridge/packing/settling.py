"""The tasks of a pack whose instance is gone (its allocation released or ended), settled
without asking anyone: their wrapper's word, else CANCELLED with why; the end of a task
whose node was lost from its instance; and the end of a task never sent."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Dict, Sequence

from ..engine.adapter import SchedulerAdapter
from ..engine.tracking import JobTracker
from ..model import FROM_FILE, INSTANCE_GONE, JobState, JobStatus


def settle_gone(outer: SchedulerAdapter, flux_ids: Sequence[str], why: str) -> Dict[str, JobStatus]:
    """The Flux jobs ``flux_ids`` of a pack of ``outer``, whose instance is gone (its
    allocation released or ended), settled in the job store without asking anyone:
    one whose wrapper wrote its exit code ended so, one already recorded as ended
    stays so, the others end CANCELLED for ``why`` (``lost``); each one's status."""
    host = outer.host_label
    files = outer.executor
    JobTracker(outer.store, "flux", host, files.read_text, files.stat_many).ended_by_files(
        list(flux_ids)
    )
    known = outer.store.statuses("flux", host, list(flux_ids))
    now = datetime.now(timezone.utc)
    settled: Dict[str, JobStatus] = {}
    for flux_id in flux_ids:
        status = known.get(flux_id)
        if status is not None and status.is_terminal:
            if status.native_state == FROM_FILE:  # no scheduler is left to confirm it
                status = status.with_(native_state=INSTANCE_GONE)
            settled[flux_id] = status
            continue
        settled[flux_id] = JobStatus(
            flux_id,
            JobState.CANCELLED,
            start_time=status.start_time if status is not None else None,
            end_time=now,
            native_state=INSTANCE_GONE,
            reason=why,
        )
    changed = [s for i, s in settled.items() if i in known and s != known[i]]
    outer.store.update_statuses("flux", host, changed)
    return settled


def is_lost(status: JobStatus) -> bool:
    """Whether ``status`` is that of a task lost with its instance (``settle_gone``)."""
    return status.state is JobState.CANCELLED and status.native_state == INSTANCE_GONE


#: how Flux's exec exception begins for a job whose node's broker left the instance:
#: "node failure on HOST (rank N)" (0.88), "lost contact with job shell on broker HOST
#: (rank N)" (0.49)
NODE_LOST = ("exec: node failure", "exec: lost contact with job shell")


def lost_with_node(status: JobStatus) -> bool:
    """Whether ``status`` is that of a task whose node's broker left its instance (killed,
    the node down): Flux ends such a job with an exec exception (``NODE_LOST``) - a task
    placed there before the loss was seen ends so without starting."""
    return status.state is JobState.FAILED and (status.reason or "").startswith(NODE_LOST)


def never_sent(index: int, why: str) -> JobStatus:
    """The end of a task of a stopped pack that was not sent (or not again, after its job
    was lost with its allocation): it has no job id."""
    return JobStatus("", JobState.CANCELLED, reason=f"not sent (task {index}): {why}")
