"""Pipeline integrations: Prefect tasks and MLflow tags, as in the source system.

Nothing here is imported by ``import hpcbridge``, and importing this package
imports neither Prefect nor MLflow.  Each integration is its own module, with
its own extra:

- :mod:`hpcbridge.integrations.pipeline` - the plain functions ``submit`` and
  ``wait_and_fetch`` (no extra needed);
- :mod:`hpcbridge.integrations.prefect` - the Prefect tasks ``submit_task`` and
  ``wait_task`` (alias ``slurm_submit_task`` / ``slurm_wait_task``), extra ``prefect``;
- :mod:`hpcbridge.integrations.mlflow` - ``tag_run``, extra ``mlflow``.
"""

from __future__ import annotations

__all__: list = []
