"""The job records and the sweeps, in one SQLite database per user.

``jobs`` (``JobStore``, ``JobRecord``: the table and the store), ``sweeps`` (a
sweep's tasks, submitted or not yet: ``SweepBook``; ``sweep_rows``: their tables
and rows, pure), ``location`` (where the database lives: a local disk, even when
the asked place is shared) and ``journal`` (job records as files in the shared
folder, for a store kept on a local disk).
"""

from .jobs import JobRecord, JobStore

__all__ = ["JobRecord", "JobStore"]
