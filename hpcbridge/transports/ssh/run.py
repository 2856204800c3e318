"""One remote command on an SSH channel: stdin in, stdout/stderr/exit status out.  A
command is run again after a dropped connection only when idempotent (a dropped submission
raises ``SubmissionUncertainError``); a channel the server refuses is retried either way."""

from __future__ import annotations

import errno
import logging
import select
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

from ...errors import JobTimeoutError, SubmissionUncertainError, TransportError
from ...retrying import retry
from ..base import CommandResult
from .connect import (
    Connection,
    ConnectionDropped,
    SharedConnection,
    describe,
    is_connection_error,
    loaded_paramiko,
)

log = logging.getLogger("hpcbridge.ssh")


class _Refused(Exception):
    """The server refused a channel; the connection is fine."""


_CHUNK = 65536


class RemoteCommands:
    """Runs built command lines over the connections of one :class:`SharedConnection`."""

    def __init__(self, connections: SharedConnection) -> None:
        self.connections = connections
        self.label = connections.label

    def run(
        self,
        argv: List[str],
        command: str,
        budget: Optional[float],
        input: Optional[str],
        idempotent: bool,
    ) -> CommandResult:
        """Run ``command`` (the remote line for ``argv``) with a channel of its own."""
        failures = 0
        while True:  # no pause: a new connection keeps its own pace (SharedConnection)
            conn = self.connections.get()
            channel = self._channel(conn, failures)
            if channel is None:  # the connection failed first: dropped, a new one asked
                failures += 1
                continue
            try:
                return self.execute(channel, conn, argv, command, budget, input)
            except ConnectionDropped as exc:
                failures += 1
                self._command_dropped(conn, argv, idempotent, failures, exc)

    def _channel(self, conn: Connection, failures: int) -> Any:
        """A new channel on ``conn``; one the server refuses (e.g. MaxSessions reached) is
        asked again, backing off; nothing was sent, so this is safe even for a submission.
        ``None`` when the connection itself failed (it is dropped); ``TransportError`` past
        ``max_reconnect_attempts`` (``failures`` spent already)."""
        options = self.connections.options
        tried = failures

        def attempt() -> Any:
            nonlocal tried
            tried += 1
            try:
                return conn.transport.open_session(timeout=options.connect_timeout)
            except Exception as exc:
                if tried >= options.max_reconnect_attempts:
                    raise TransportError(
                        f"cannot open a channel to {self.label}: {describe(exc)}"
                    ) from exc
                if not self._refused(conn, exc):
                    self.connections.invalidate(conn)
                    return None
                raise _Refused(describe(exc)) from exc

        return retry(
            attempt, budget=None, retry_on=(_Refused,), pause=0.2, backoff=2.0, max_pause=2.0
        )

    @staticmethod
    def _refused(conn: Connection, exc: Exception) -> bool:
        """Whether the server refused a channel over a connection that is fine."""
        if not is_connection_error(exc, conn.transport):
            return True
        paramiko = loaded_paramiko()
        # e.g. MaxSessions reached: the server refused the channel, the connection is fine.
        return bool(paramiko and isinstance(exc, paramiko.ChannelException) and conn.alive())

    def _command_dropped(
        self,
        conn: Connection,
        argv: List[str],
        idempotent: bool,
        failures: int,
        exc: ConnectionDropped,
    ) -> None:
        """The connection died mid-command: raise, or return to run it again."""
        self.connections.invalidate(conn)
        if not idempotent:
            raise SubmissionUncertainError(
                f"the connection to {self.label} dropped while {argv[0]} was running: "
                "it may or may not have taken effect (a job may or may not exist). "
                "It was NOT run again; check the queue before retrying.",
                argv=argv,
            ) from exc
        if failures >= self.connections.options.max_reconnect_attempts:
            raise TransportError(
                f"the connection to {self.label} kept dropping while running {argv[0]}"
            ) from exc
        log.info("connection to %s dropped during %s; retrying (idempotent)", self.label, argv[0])

    def execute(
        self,
        channel: Any,
        conn: Connection,
        argv: List[str],
        command: str,
        budget: Optional[float],
        input: Optional[str],
    ) -> CommandResult:
        """Run ``command`` on the open ``channel``; :class:`ConnectionDropped` if the link died."""
        started = time.monotonic()
        deadline = None if budget is None else started + budget
        try:
            try:
                channel.exec_command(command)
            except Exception as exc:
                if is_connection_error(exc, conn.transport) and not conn.alive():
                    # The request may have reached the server: uncertain.
                    raise ConnectionDropped(str(exc)) from exc
                raise TransportError(
                    f"{self.label} refused to run {argv[0]}: {describe(exc)}"
                ) from exc
            status, stdout, stderr = self._collect(channel, argv, budget, deadline, input)
        finally:
            channel.close()  # also releases the pipe behind Readiness
        if status == -1:
            # No exit-status: the connection died, or the command was killed by
            # a signal (paramiko ignores "exit-signal").
            if not channel.eof_received or not _stays_active(conn.transport):
                raise ConnectionDropped(f"connection lost while running {argv[0]}")
            status = 255
            stderr += b"\n[hpcbridge] the remote command ended without an exit status"
        return CommandResult(
            argv,
            status,
            stdout.decode("utf-8", "replace"),
            stderr.decode("utf-8", "replace"),
            time.monotonic() - started,
        )

    def _collect(
        self,
        channel: Any,
        argv: List[str],
        budget: Optional[float],
        deadline: Optional[float],
        input: Optional[str],
    ) -> Tuple[int, bytes, bytes]:
        """Feed stdin, read stdout and stderr until EOF, then the exit status."""
        feeder = _feed_input(channel, input)
        stdout: List[bytes] = []
        stderr: List[bytes] = []
        try:
            ready = Readiness(channel)  # signalled when stdout or stderr has data, or EOF
            while True:
                # Drain both streams every turn: reading only one could let the
                # other fill the SSH window and stall the remote command.
                while channel.recv_ready():
                    stdout.append(channel.recv(_CHUNK))
                while channel.recv_stderr_ready():
                    stderr.append(channel.recv_stderr(_CHUNK))
                if channel.eof_received or channel.closed:
                    if not (channel.recv_ready() or channel.recv_stderr_ready()):
                        break
                    continue
                ready.wait(self._time_left(channel, argv, budget, deadline))
            # The exit status may trail the end of the output by a packet.
            while not channel.status_event.is_set():
                channel.status_event.wait(self._time_left(channel, argv, budget, deadline))
        finally:
            if feeder is not None:
                feeder.join(timeout=1.0)
        return int(channel.exit_status), b"".join(stdout), b"".join(stderr)

    def _time_left(
        self, channel: Any, argv: List[str], budget: Optional[float], deadline: Optional[float]
    ) -> float:
        """How long to wait for the next event (at most 1 s); past the deadline, abandon."""
        wait = 1.0 if deadline is None else deadline - time.monotonic()
        if wait <= 0:
            self._abandon(channel, argv, budget)
        return min(wait, 1.0)

    def _abandon(self, channel: Any, argv: List[str], budget: Optional[float]) -> None:
        """Kill the remote command (SSH "signal" request), close the channel, raise."""
        send_signal(channel, "KILL")
        channel.close()
        raise JobTimeoutError(
            f"{argv[0]} did not finish within {budget:g} s on {self.label} "
            f"(command: {' '.join(argv)[:200]})"
        )


def _feed_input(channel: Any, input: Optional[str]) -> Optional[threading.Thread]:
    """Write ``input`` and an EOF to the command; by a thread when it exceeds the window."""
    if input is None:
        return None  # the command line redirects stdin from /dev/null
    data = input.encode("utf-8")

    def feed() -> None:
        try:
            send_data(channel, data)
            send_eof(channel)
        except Exception as exc:  # the command exited without reading it all
            log.debug("stdin of remote command not fully written: %s", exc)

    if len(data) <= channel.out_window_size:
        feed()  # fits the SSH window: cannot block
        return None
    # Larger input is written by a thread while we read, or both sides
    # could wait on each other's full window.
    thread = threading.Thread(target=feed, name="hpcbridge-ssh-stdin", daemon=True)
    thread.start()
    return thread


def _stays_active(transport: Any, grace: float = 0.2) -> bool:
    """Is the transport still up after ``grace`` s?  (paramiko closes channels first.)"""
    return bool(retry(transport.is_active, budget=grace, again=bool, pause=0.02))


# paramiko channel quirks worked around (each function says which).


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


def _send_locked(channel: Any, make: Callable[[], Any]) -> bool:
    """Build and send one channel message while holding the channel's lock: paramiko
    sends after releasing it, so its CLOSE can overtake the message and OpenSSH drops the
    connection ("ieof packet referred to nonexistent channel", paramiko #1115/#1705)."""
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
    """Send an RFC 4254 "signal" request (no public paramiko call): OpenSSH >= 7.9 kills
    the command's process group; older servers leave a command that never writes running."""
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
