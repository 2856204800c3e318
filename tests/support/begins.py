"""The ``begin`` forms the integration tests send to a real scheduler: each form, as
text that says a moment about a minute or two after ``now`` where the form can."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import List, Tuple

from hpcbridge.request.begins import parse_begin


def begin_forms(now: datetime) -> List[str]:
    """sbatch's ``now+N[unit]``, Flux's ``+FSD``, times of day, dates, and the words."""
    soon = now + timedelta(seconds=90)
    minute = now + timedelta(seconds=120)  # its minute: 60-120 s ahead
    return [
        "now+90",
        "now+2minutes",
        "now + 100 seconds",
        "now+1hour",
        "+90",
        "+2m",
        f"{minute:%H:%M}",
        f"{soon:%H:%M:%S}",
        f"{soon:%Y-%m-%dT%H:%M:%S}",
        f"{minute:%Y-%m-%d %H:%M}",
        "noon",
        "midnight",
        "tomorrow",
        f"tomorrow {minute:%H:%M}",
    ]


def begin_bounds(text: str, before: float, after: float) -> Tuple[int, int]:
    """The whole epoch seconds ``text`` may have said, read between ``before`` and
    ``after`` (a relative form moves with the moment it is read at)."""
    first = parse_begin(text, datetime.fromtimestamp(before))
    last = parse_begin(text, datetime.fromtimestamp(after))
    return math.ceil(first), math.ceil(last)
