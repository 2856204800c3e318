"""Optional integrations, none imported by ``import hpcbridge``: ``pipeline`` (plain
``submit`` and ``wait_and_fetch``, and their async forms), ``prefect`` (tasks, sync and
async, extra ``prefect``) and ``mlflow`` (``tag_run``, extra ``mlflow``)."""

from __future__ import annotations

__all__: list = []
