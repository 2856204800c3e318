"""paramiko channel details the SSH transport works around (readiness, ordering, signals).

Kept apart because they reach into paramiko's internals: each function says
which quirk it handles and why.
"""

from __future__ import annotations

import errno
import logging
import select
import socket
from typing import Any, Callable

log = logging.getLogger("hpcbridge.ssh")


class Readiness:
    """Wait until a channel has something to read (poll(2) on paramiko's channel pipe)."""

    def __init__(self, channel: Any) -> None:
        self.fd = channel.fileno()
        self.poller = select.poll() if hasattr(select, "poll") else None
        if self.poller is not None:
            self.poller.register(self.fd, select.POLLIN)

    def wait(self, seconds: float) -> None:
        if self.poller is not None:
            self.poller.poll(max(0, int(seconds * 1000)) or 1)
        else:  # pragma: no cover - Windows
            select.select([self.fd], [], [], seconds)


def no_delay(sock: Any) -> None:
    """TCP_NODELAY: a command is several small packets (exec, EOF); Nagle plus delayed
    ACKs would add ~40 ms to each one."""
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # pragma: no cover
            pass


def _send_locked(channel: Any, make: Callable[[], Any]) -> bool:
    """Build and send one channel message while holding the channel's lock.

    paramiko builds channel messages under the lock but sends them after
    releasing it; if the server closes a fast command's channel in between,
    paramiko's own CLOSE can overtake the message, and OpenSSH drops the whole
    connection ("ieof packet referred to nonexistent channel", paramiko issues
    #1115/#1705).  Holding the lock orders it before paramiko's reply to the
    server's CLOSE.  (The cost: during a rare rekey the send may wait for the
    key exchange, at most paramiko's clear_to_send_timeout.)
    """
    with channel.lock:
        if channel.closed:
            return False
        message = make()
        if message is None:
            return False
        channel.transport._send_user_message(message)
        return True


def send_data(channel: Any, data: bytes) -> None:
    """``sendall()`` without paramiko's send-after-close race (see :func:`_send_locked`)."""
    from paramiko.common import cMSG_CHANNEL_DATA
    from paramiko.message import Message

    view = memoryview(data)
    offset = 0
    while offset < len(data):
        with channel.lock:
            # Waits for window space; the wait releases the lock (a Condition on it).
            size = 0 if channel.closed else channel._wait_for_send_window(len(data) - offset)
            if size == 0:
                raise OSError(errno.EPIPE, "the remote command closed its input")
            message = Message()
            message.add_byte(cMSG_CHANNEL_DATA)
            message.add_int(channel.remote_chanid)
            message.add_string(bytes(view[offset : offset + size]))
            channel.transport._send_user_message(message)
        offset += size


def send_eof(channel: Any) -> None:
    """``shutdown_write()`` without paramiko's send-after-close race."""
    _send_locked(channel, channel._send_eof)


def send_signal(channel: Any, name: str) -> None:
    """Send an RFC 4254 "signal" request; OpenSSH >= 7.9 kills the command's process group.

    paramiko has no public call for it.  Without it (older servers), closing
    the channel alone leaves a command that never writes running.
    """
    try:
        from paramiko.common import cMSG_CHANNEL_REQUEST
        from paramiko.message import Message

        def make() -> Any:
            message = Message()
            message.add_byte(cMSG_CHANNEL_REQUEST)
            message.add_int(channel.remote_chanid)
            message.add_string("signal")
            message.add_boolean(False)
            message.add_string(name)
            return message

        _send_locked(channel, make)
    except Exception as exc:  # best effort
        log.debug("could not signal the remote command: %s", exc)
