"""Slurm: pure command builders and parsers, the CLI and pyslurm drivers, the adapter."""
