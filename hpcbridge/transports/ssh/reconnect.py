"""The one connection an executor shares between calls and threads, reopened when it dies.

Connecting and reconnecting are serialised by a lock; a dead connection is
reopened with bounded exponential backoff and a minimum interval between
connection opens.  The attempts are bounded per call (``max_reconnect_attempts``,
about 8 s of tries by default), so a single command fails in reasonable time when
the host stays away; a wait does not stop there: it tries its rounds again, with a
back-off of its own, until its own deadline (``schedulers.waiting``).  A forked
child starts afresh (it inherits the socket but not paramiko's thread).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, Optional

from ...errors import TransportError
from .connect import Connection, SSHOptions
from .failures import Permanent

log = logging.getLogger("hpcbridge.ssh")

#: opens one connection; its argument says whether none was ever opened before
Opener = Callable[[bool], Connection]

_FIRST_RETRY_DELAY = 0.5
_MAX_RETRY_DELAY = 8.0


class SharedConnection:
    """Hands out the live connection to ``label``, opening or reopening it as needed."""

    def __init__(self, label: str, options: SSHOptions, opener: Opener) -> None:
        self.label = label
        self.options = options
        #: one connection attempt; replaceable (tests script it)
        self.opener = opener
        #: how many times a connection was opened (1 while nothing dropped)
        self.count = 0
        self.current: Optional[Connection] = None
        self._last_open = 0.0
        self._reset_after_fork()

    def _reset_after_fork(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.RLock()

    def get(self) -> Connection:
        """The live connection: the current one, else a new one (with retries on a reconnect)."""
        if os.getpid() != self._pid:
            self.current = None
            self._reset_after_fork()
        conn = self.current
        if conn is not None and conn.alive():
            return conn
        with self._lock:
            conn = self.current
            if conn is not None and conn.alive():
                return conn
            reconnect = self.count > 0
            if conn is not None:
                log.info("connection to %s lost; reconnecting", self.label)
                self.current = None
                conn.close()
            self.current = self._open_with_retries(reconnect)
            return self.current

    def invalidate(self, conn: Connection) -> None:
        """Drop ``conn`` if it is still the current one (others may have replaced it)."""
        with self._lock:
            if self.current is not conn:
                return
            self.current = None
        conn.close()

    def close(self) -> None:
        """Close the connection; a later :meth:`get` opens a new one."""
        with self._lock:
            conn, self.current = self.current, None
        if conn is not None:
            conn.close()

    def _open_with_retries(self, reconnect: bool) -> Connection:
        # At start, fail fast: a refused port or a bad name is a configuration
        # problem.  On a reconnect the server may be restarting: back off.
        attempts = self.options.max_reconnect_attempts if reconnect else 1
        delay = _FIRST_RETRY_DELAY
        for attempt in range(1, attempts + 1):
            self._keep_minimum_interval()
            try:
                conn = self.opener(self.count == 0)
            except Permanent as exc:
                raise exc.error from None
            except TransportError as exc:
                if attempt >= attempts:
                    if reconnect:
                        raise TransportError(
                            f"cannot reconnect to {self.label} after {attempt} attempts: {exc}"
                            " (is the host up? try again once it answers)"
                        ) from exc.__cause__
                    raise
                # One line per outage ("lost", then "reconnected"), not one per attempt.
                log.debug(
                    "reconnect to %s failed (attempt %d/%d): %s; retrying in %.1f s",
                    self.label,
                    attempt,
                    attempts,
                    exc,
                    delay,
                )
                time.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_DELAY)
                continue
            self.count += 1
            if reconnect:
                log.info("reconnected to %s (connection #%d)", self.label, self.count)
            else:
                log.debug("connected to %s", self.label)
            return conn
        raise AssertionError("unreachable")  # pragma: no cover

    def _keep_minimum_interval(self) -> None:
        wait = self._last_open + self.options.min_reconnect_interval - time.monotonic()
        if self._last_open and wait > 0:
            time.sleep(wait)
        self._last_open = time.monotonic()
