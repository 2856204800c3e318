"""Everything hpcbridge keeps, in one SQLite database per user on a local disk
(``location``; ``journal``: records as files for a shared place): the job records
(``jobs``, their table and the one encoding of a status: ``records``), the shared poll
(``polls``), the sweeps and packs (``sweeps``, ``packs``), and their leases (``leases``)."""

from .jobs import JobRecord, JobStore

__all__ = ["JobRecord", "JobStore"]
