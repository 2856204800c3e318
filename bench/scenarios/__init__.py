"""The bench scenarios, in the order the runner runs them.

Each module has ``NAME``, ``TITLE`` and ``run(quick, workdir) -> dict``.
"""

from __future__ import annotations

SCENARIOS = (
    "slurm_submit",
    "slurm_bulk",
    "slurm_bulk_scripts",
    "slurm_status",
    "status_now",
    "slurm_polite",
    "slurm_pyslurm",
    "flux_submit",
    "flux_packing",
    "flux_sweep",
    "slurm_pack",
    "slurm_pack_nodes",
    "wait_latency",
    "futures",
    "ssh",
    "startup",
    "store_listing",
)
