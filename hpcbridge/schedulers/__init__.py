"""Scheduler adapters: ``mock``, ``slurm`` and ``flux`` behind one interface."""
