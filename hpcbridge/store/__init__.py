"""The job records (``jobs``), the sweeps and packs (``sweeps``, ``packs``, their feeder's
lease: ``leases``), in one SQLite database per user on a local disk (``location``,
``journal``: records as files for a shared place)."""

from .jobs import JobRecord, JobStore

__all__ = ["JobRecord", "JobStore"]
