"""Batch job or plain job: the default that fits each way Flux is used.

A **batch job** (``flux batch``) is a nested instance of its own: its broker
boots, runs the wrapper and shuts down - the analogue of ``sbatch``, right
for standalone jobs sent to the system instance and for a step that
launches its own parallel work (``$HPCBRIDGE_LAUNCHER -n 2 ./app``).  A
**plain job** (``flux submit``) runs the wrapper directly as the job's
tasks: no broker to boot, so hundreds of small jobs packed into one
allocation's instance run at Flux's own rate.  Hence the default: batch
jobs on the system instance, plain jobs in an enclosing (``FLUX_URI``) or
named instance - an allocation being packed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...config import Settings
from .uri import UriSetting


@dataclass(frozen=True)
class NestedChoice:
    nested: bool
    reason: str

    @property
    def kind(self) -> str:
        return "batch" if self.nested else "plain"


def choose_nested(
    nested: Optional[bool], settings: Settings, uri_setting: UriSetting
) -> NestedChoice:
    """The keyword wins, then ``HPCBRIDGE_FLUX_NESTED``, then the instance's default."""
    if nested is not None:
        return NestedChoice(bool(nested), "nested= asked for it")
    if settings.flux_nested is not None:
        source = settings.sources.get("flux_nested", "HPCBRIDGE_FLUX_NESTED")
        return NestedChoice(bool(settings.flux_nested), f"set by {source}")
    if uri_setting.value is None:
        return NestedChoice(True, "the system instance: standalone batch jobs")
    which = "the enclosing" if uri_setting.source == "FLUX_URI environment" else "a named"
    return NestedChoice(False, f"{which} instance ({uri_setting.source}): allocation packing")
