"""A scheduler's cap on a user's queued jobs (Slurm's MaxSubmitJobs), kept a few minutes
in this process and, in the state folder, for all of the user's processes."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

log = logging.getLogger("hpcbridge")

#: seconds a cap on queued jobs is taken from the cache
TTL = 300.0


class LimitCache:
    """Answers of ``queue_limit`` by key, each kept ``ttl`` seconds in ``folder`` (one JSON
    file per key, written whole and renamed into place) for every process of the user; a
    file that cannot be read or written is a miss, never an error."""

    def __init__(
        self, folder: Optional[Path], ttl: float = TTL, clock: Callable[[], float] = time.time
    ) -> None:
        """``folder``: ``None`` keeps the caps in this process only."""
        self.folder = Path(folder) if folder is not None else None
        self.ttl = ttl
        self.clock = clock
        #: key -> when it was read here (monotonic), and the cap
        self._here: Dict[str, Tuple[float, Optional[int]]] = {}

    def remembered(
        self, key: str, read: Callable[[], Optional[int]], ask: bool = True
    ) -> Optional[int]:
        """The cap kept for ``key`` here or in the folder, else ``read()``'s (then kept);
        with ``ask=False`` ``None`` instead of reading it."""
        now = time.monotonic()
        memo = self._here.get(key)
        if memo is not None and now - memo[0] < self.ttl:
            return memo[1]
        found, cap = self.get(key)
        if not found:
            if not ask:
                return None
            cap = read()
            self.put(key, cap)
        self._here[key] = (now, cap)
        return cap

    def path(self, key: str) -> Path:
        assert self.folder is not None, "a cache kept in this process only has no files"
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]
        return self.folder / f"queue-limit-{digest}.json"

    def get(self, key: str) -> Tuple[bool, Optional[int]]:
        """``(True, cap)`` for an answer younger than ``ttl`` (``cap`` may be ``None``:
        no cap); ``(False, None)`` when there is none."""
        if self.folder is None:
            return False, None
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
        if self.folder is None:
            return
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
