"""Counting overlapping (start, end) spans: how many jobs were queued at once."""

from __future__ import annotations

from typing import Any, List, Tuple


def most_at_once(spans: List[Tuple[Any, Any]]) -> int:
    """The most spans open at any moment (an end before a start at the same moment)."""
    moments = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    current = peak = 0
    for _, step in moments:
        current += step
        peak = max(peak, current)
    return peak
