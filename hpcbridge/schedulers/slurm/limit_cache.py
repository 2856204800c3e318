"""The cluster's cap on queued jobs, remembered a few minutes by all of a user's processes.

Reading the cap (``limits``: ``id -un`` and two ``sacctmgr`` commands) costs
about 0.45 s on the test cluster, and each ``sacctmgr`` is a question to
slurmdbd; a workflow tool that calls ``submit_many`` once per step would pay
it every time.  So the answer - a number, or none - is kept in the state
folder (``HPCBRIDGE_STATE_DIR``), one small JSON file per cluster, login and
account (``<state>/cache/queue-limit-<hash>.json``), and taken from there for
``TTL`` seconds by every process of the user.

Each file is written whole to a temporary file beside it and renamed into
place: a reader sees one writer's whole answer or none, and writers that race
only replace one whole answer by another.  A file that cannot be read or
written is a miss (the cap is read again), never an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional, Tuple

log = logging.getLogger("hpcbridge.slurm")

#: seconds an answer is taken from the cache
TTL = 300.0


class LimitCache:
    """Answers of ``queue_limit`` by key, each kept ``ttl`` seconds (wall clock: shared
    by processes)."""

    def __init__(
        self, folder: Path, ttl: float = TTL, clock: Callable[[], float] = time.time
    ) -> None:
        self.folder = Path(folder)
        self.ttl = ttl
        self.clock = clock

    def path(self, key: str) -> Path:
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]
        return self.folder / f"queue-limit-{digest}.json"

    def get(self, key: str) -> Tuple[bool, Optional[int]]:
        """``(True, cap)`` for an answer younger than ``ttl`` (``cap`` may be ``None``:
        no cap); ``(False, None)`` when there is none."""
        try:
            data = json.loads(self.path(key).read_text(encoding="utf-8"))
            read, cap = float(data["read"]), data["cap"]
        except (OSError, ValueError, KeyError, TypeError):
            return False, None
        age = self.clock() - read
        fresh = data.get("key") == key and 0 <= age < self.ttl
        if not fresh or not (cap is None or (isinstance(cap, int) and cap > 0)):
            return False, None
        return True, cap

    def put(self, key: str, cap: Optional[int]) -> None:
        """Keep ``cap`` (``None``: no cap) as read now; a failure is logged, not raised."""
        text = json.dumps({"key": key, "cap": cap, "read": self.clock()})
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=".queue-limit-")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    out.write(text)
                os.replace(temporary, self.path(key))
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError as exc:
            log.debug("cannot keep the cap on queued jobs in %s: %s", self.folder, exc)
