"""What went wrong over SSH: a dropped connection or a failed operation, said in one line.

paramiko is never imported here: a paramiko exception can only exist once
something else has loaded it, so :func:`loaded_paramiko` looks in ``sys.modules``.
"""

from __future__ import annotations

import errno
import socket
import sys
from typing import Any, Optional

from ...errors import TransportError

#: errno values that mean "the connection is gone" rather than "the file op failed"
CONNECTION_ERRNOS = frozenset(
    getattr(errno, name)
    for name in (
        "EPIPE",
        "ECONNRESET",
        "ECONNABORTED",
        "ECONNREFUSED",
        "ENOTCONN",
        "ESHUTDOWN",
        "ETIMEDOUT",
        "EHOSTUNREACH",
        "ENETUNREACH",
        "ENETDOWN",
        "EBADF",
    )
    if hasattr(errno, name)
)


class ConnectionDropped(Exception):
    """The connection died while a command was in flight (it may have run)."""


class Permanent(Exception):
    """A connect error that retrying cannot fix (auth, host key, DNS at start)."""

    def __init__(self, error: TransportError) -> None:
        super().__init__(str(error))
        error.permanent = True  # a wait does not ride it out either
        self.error = error


def import_paramiko() -> Any:
    """paramiko, or a :class:`TransportError` that says how to install it."""
    try:
        import paramiko
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise TransportError(
            "the ssh transport needs paramiko: pip install 'hpcbridge[ssh]'"
        ) from exc
    return paramiko


def loaded_paramiko() -> Any:
    """paramiko if something has imported it already, else ``None``."""
    return sys.modules.get("paramiko")


def is_connection_error(exc: BaseException, transport: Any = None) -> bool:
    """Does ``exc`` mean the connection (not the command or the file op) failed?"""
    if transport is not None and not transport.is_active():
        return True
    if isinstance(exc, (EOFError, socket.timeout)):
        return True
    paramiko = loaded_paramiko()
    if paramiko is not None and isinstance(exc, paramiko.SSHException):
        return True
    return isinstance(exc, OSError) and exc.errno in CONNECTION_ERRNOS


def describe(exc: Optional[BaseException]) -> str:
    """``exc`` as a short phrase for an error message (its first line at most)."""
    if exc is None:
        return "unknown error"
    paramiko = loaded_paramiko()
    if paramiko is not None and isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return "connection refused"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.timeout):
        return "timed out"
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def close_quietly(*resources: Any) -> None:
    """Close each of ``resources`` (``None`` skipped), ignoring errors: the link may be dying."""
    for resource in resources:
        if resource is None or not hasattr(resource, "close"):
            continue
        try:
            resource.close()
        except Exception:  # noqa: S110 - best effort on a dying connection
            pass
