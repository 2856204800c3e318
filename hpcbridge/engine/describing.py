"""What a submission would send, without staging or sending anything (``--dry-run``,
``describe_submission``): each chunk as its driver would send it, planned and checked as
``Submission.run`` plans it, or - where no driver can plan - the batches alone."""

from __future__ import annotations

from typing import List

from .containers import container_words
from .driver import SubmitBatch
from .jobscript import TASK_INDEX_VARIABLE, PreparedJob
from .submitting import Order, Stager, Submission, batches


def describe(submission: Submission, order: Order) -> str:
    """What the driver would send for each chunk of ``order``, planned as ``run`` plans."""
    driver = submission.driver
    lines = []
    for planned, _ in submission.plan(order):
        line, count = driver.describe(planned), planned.batch.count
        many = f"  # {count} jobs: {TASK_INDEX_VARIABLE}=0..{count - 1}" if count > 1 else ""
        lines.append(line + many + _own_names(planned.batch.job))
    summary = driver.capabilities.summary()
    image = order.resources.container
    if image:  # what the wrapper does, not the scheduler: said apart
        words = " ".join(container_words(submission.container_runtime, image))
        lines.append(f"# the wrapper runs each script as: {words} ./SCRIPT")
    return "\n".join(lines) + f"\n# {driver.name} driver: {summary}"


def dry_batches(order: Order, stager: Stager, chunk_size: int) -> List[SubmitBatch]:
    """The batches of ``order`` as a dry run shows them where no driver can plan them."""
    return [batch for batch, _ in batches(order, stager, chunk_size)]


#: how many distinct task names a dry run lists for one chunk
SHOWN_NAMES = 5


def _own_names(job: PreparedJob) -> str:
    """``; each named after its own: a.sh, b.sh`` for a chunk of differently named tasks."""
    distinct = list(dict.fromkeys(job.task_names))
    if len(distinct) < 2:
        return ""
    more = len(distinct) - SHOWN_NAMES
    shown = ", ".join(distinct[:SHOWN_NAMES]) + (f" and {more} more" if more > 0 else "")
    return f"; each named after its own: {shown}"
