"""Allocation packing: a sweep's tasks fed as plain Flux jobs into allocations held for
them (Slurm jobs running a Flux instance, or a Flux system's batch jobs).

``request`` (the ``--pack`` request and the placement rules) and ``script`` (an
allocation's batch script) are pure; ``allocations`` asks for, reaches and releases them;
``feeder`` feeds a named pack as the job store has it; ``settling`` ends the tasks of a
gone instance; ``run`` is the API, re-exported here with ``Pack``."""

from __future__ import annotations

from .request import Pack
from .run import cancel_packed, new_pack_name, resume_packed, run_packed

__all__ = ["Pack", "cancel_packed", "new_pack_name", "resume_packed", "run_packed"]
