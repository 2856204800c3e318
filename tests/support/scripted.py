"""An executor whose answers are scripted, for unit tests of what runs commands: the faults
a real scheduler cannot be made to give, and the exact command lines."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Sequence

from hpcbridge.transports.base import CommandResult


class Scripted:
    """An executor whose answers come from ``answer(argv)``; every call noted."""

    kind = "local"
    host = "scripted"
    reach: Mapping[str, Any] = {}
    is_local = True
    env: Mapping[str, str] = {}

    def __init__(self, answer: Callable[[List[str]], CommandResult]) -> None:
        self.answer = answer
        self.calls: List[List[str]] = []
        self.idempotent: List[bool] = []
        self.options: List[Dict[str, Any]] = []

    def run(self, argv: Sequence[str], **options: Any) -> CommandResult:
        self.calls.append(list(argv))
        self.idempotent.append(options.get("idempotent", True))
        self.options.append(options)
        return self.answer(list(argv))
