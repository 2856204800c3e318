"""Where commands run and files go: :class:`LocalExecutor` or :class:`SSHExecutor`."""

from .base import CommandResult, Executor
from .local import LocalExecutor

__all__ = ["CommandResult", "Executor", "LocalExecutor"]
