"""A handle to a Flux broker through the bindings, for the native driver: opened on
first use, reset after a lost connection, with the RPCs the driver and the session
need (readiness, the queue's configuration, the instance's expiration, the
environment a job gets).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from typing import Any, Dict, Optional

from .instance import QueueInfo, queue_info_from_config

log = logging.getLogger("hpcbridge")


def error_text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class BindingsConnection:
    """Handles to one broker through the bindings, one per thread; the instance's own facts."""

    def __init__(
        self,
        flux_module: Any,
        uri: Optional[str],
        rpc_timeout: float = 30.0,
        flux_bin_dir: Optional[str] = None,
    ) -> None:
        self.flux = flux_module
        self.uri = uri
        self.rpc_timeout = rpc_timeout
        self.flux_bin_dir = flux_bin_dir
        self._local = threading.local()

    def handle(self) -> Any:
        handle = getattr(self._local, "handle", None)
        if handle is None:
            handle = self.flux.Flux(self.uri) if self.uri else self.flux.Flux()
            self._local.handle = handle
        return handle

    def reset(self) -> None:
        """Forget this thread's handle (after a lost connection)."""
        handle = getattr(self._local, "handle", None)
        self._local.handle = None
        if handle is not None:
            try:
                handle.close()
            except Exception:  # noqa: BLE001, S110 - closing a dead handle may fail
                pass

    def rpc(self, topic: str, payload: Any = None, timeout: Optional[float] = None) -> Any:
        future = self.handle().rpc(topic, payload)
        future.wait_for(self.rpc_timeout if timeout is None else timeout)
        return future.get()

    def probe(self, timeout: float) -> str:
        """Open a handle and ask the broker's version, bounded; return the version.

        A client of another release may hang on the first request (newer
        clients to a 0.26 broker) or fail with "Protocol error": both surface
        here, before the session commits to the native driver.
        """
        return str(self.rpc("attr.get", {"name": "version"}, timeout=timeout)["value"])

    def wait_ready(self, timeout: float) -> None:
        """Block until the broker finished starting (``state-machine.wait``), bounded.

        A nested instance publishes its URI before rc1 is done; the first
        submit would otherwise fail with "No service matching job-ingest.submit".
        """
        try:
            self.rpc("state-machine.wait", None, timeout=timeout)
        except OSError as exc:
            # Older brokers have no state-machine.wait: the submit retry covers them.
            if exc.errno != errno.ENOSYS:
                log.debug("flux: readiness check failed: %s", exc)

    def queue_info(self) -> QueueInfo:
        return queue_info_from_config(self.rpc("config.get") or {}, source="config.get RPC")

    def expiration(self) -> Optional[float]:
        """The instance's own expiration (inside a time-limited job), else ``None``."""
        try:
            resource_r = self.rpc("resource.status")["R"]
        except (OSError, KeyError, TypeError):
            try:
                kvs = __import__("flux.kvs", fromlist=["get"])
                resource_r = kvs.get(self.handle(), "resource.R")
            except Exception:  # noqa: BLE001 - unknown: no check
                return None
        try:
            expiration = float(resource_r["execution"].get("expiration") or 0.0)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return expiration if expiration > 0 else None

    def job_environment(self) -> Dict[str, str]:
        """The environment jobs get: ours, like ``flux batch`` gives its own.

        A batch job's command is ``flux broker ...``, found on the job's PATH:
        the ``flux`` front command puts its own directory there for its
        subcommands, bindings loaded from elsewhere do not - so add it.
        """
        environment = dict(os.environ)
        if self.flux_bin_dir:
            parts = environment.get("PATH", "").split(os.pathsep)
            if self.flux_bin_dir not in parts:
                environment["PATH"] = os.pathsep.join([self.flux_bin_dir, *[p for p in parts if p]])
        return environment
