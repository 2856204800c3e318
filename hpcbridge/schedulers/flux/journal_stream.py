"""The job manager's journal RPC, read response by response with libflux's own calls.

``job-manager.events-journal`` (flux-core 0.68 and later) is one streaming RPC:
the request names the events wanted (``allow``) and whether the inactive jobs'
history is sent (``full``); each response is ``{"id": I, "events": [...]}``, the
backlog of the active jobs first (one response a job, its events so far), then
an empty response for ``FLUX_JOBID_ANY`` (-1), then one event a response as they
are posted.  The request is cancelled with ``<topic>-cancel`` naming its matchtag.

The bindings' ``JournalConsumer`` wraps each response in a Python future callback,
a handle object and an event object: about 0.4 ms a response, four responses a
job - most of a sweep's client CPU.  Here the stream is a future without a
callback, read with ``flux_future_wait_for``, ``flux_rpc_get`` and
``flux_future_reset`` through the bindings' cffi ``lib``: tens of microseconds
a response.  The handle must be the stream's own (the wait runs its own reactor
and requeues any other message).
"""

from __future__ import annotations

import errno
import json
import time
from typing import Any, Dict, Optional, Sequence

TOPIC = "job-manager.events-journal"
#: the job manager's id on the response that ends the backlog: FLUX_JOBID_ANY, packed
#: as a signed 64-bit integer
BACKLOG_END_ID = -1
#: the longest one C wait: a signal (Ctrl-C) is acted on between two, not inside one
SLICE = 0.25


def request_payload(events: Sequence[str]) -> Dict[str, Any]:
    """The active jobs, then live (no inactive history), and only ``events``."""
    return {"full": False, "allow": dict.fromkeys(events, 1)}


class JournalStream:
    """One open journal request on a handle of its own."""

    def __init__(self, flux_module: Any, handle: Any, events: Sequence[str]) -> None:
        inner = flux_module.core.inner
        self._ffi, self._lib = inner.ffi, inner.lib
        self._handle = handle
        constants = flux_module.constants
        self._noresponse = constants.FLUX_RPC_NORESPONSE
        # The Python RPC object owns the C future (destroyed with it).
        self._rpc = handle.rpc(TOPIC, request_payload(events), 0, constants.FLUX_RPC_STREAMING)
        self._future = self._rpc.pimpl.handle
        self._text = self._ffi.new("char *[1]")

    def next(self, timeout: float) -> Optional[Dict[str, Any]]:
        """The next response, or ``None`` when none came within ``timeout`` seconds.

        Raises ``EOFError`` when the stream ended (the job manager went away) and
        ``OSError`` when it failed.
        """
        ffi, lib = self._ffi, self._lib
        deadline = time.monotonic() + timeout
        # flux_future_wait_for with a timeout of 0 does not read the socket at all.
        while lib.flux_future_wait_for(self._future, min(max(timeout, 1e-4), SLICE)) < 0:
            if ffi.errno != errno.ETIMEDOUT:
                raise OSError(ffi.errno, "the journal stream failed")
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                return None
        if lib.flux_rpc_get(self._future, self._text) < 0:
            if ffi.errno == errno.ENODATA:
                raise EOFError("the journal stream ended")
            raise OSError(ffi.errno, "the journal stream failed")
        text = ffi.string(self._text[0]) if self._text[0] != ffi.NULL else b"{}"
        lib.flux_future_reset(self._future)
        return dict(json.loads(text))

    def close(self) -> None:
        """Cancel the request (the job manager then ends the stream)."""
        matchtag = self._lib.flux_rpc_get_matchtag(self._future)
        self._handle.rpc(TOPIC + "-cancel", {"matchtag": matchtag}, 0, self._noresponse)
