"""One SSH connection: why one fails (``Permanent`` or worth a retry), logging in to each
hop (host keys: ``hostkeys``), and ``SharedConnection``: the one connection an executor
shares between calls and threads, reopened when it dies."""

from __future__ import annotations

import errno
import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, List, Optional

from ...errors import HostKeyError, TransportError
from ...retrying import retry
from .config import Hop, Target
from .hostkeys import HostKeyPolicy, changed_host_key, load_known_hosts

if TYPE_CHECKING:  # pragma: no cover
    import paramiko

log = logging.getLogger("hpcbridge.ssh")

#: errno values that mean "the connection is gone" rather than "the file op failed"
CONNECTION_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("EPIPE", "ECONNRESET", "ECONNABORTED", "ECONNREFUSED", "ENOTCONN", "ESHUTDOWN")
    + ("ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENETDOWN", "EBADF")
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


def no_delay(sock: Any) -> None:
    """TCP_NODELAY: a command is several small packets (exec, EOF); Nagle plus delayed
    ACKs would add ~40 ms to each one."""
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # pragma: no cover
            pass


@dataclass(eq=False)
class SSHOptions:
    """The tunables of one executor (it is one), read by its connection, commands, files."""

    accept_new_host_keys: bool = False
    login_shell: bool = False
    connect_timeout: float = 15.0
    default_timeout: Optional[float] = 60.0
    keepalive: int = 30
    max_reconnect_attempts: int = 5
    min_reconnect_interval: float = 1.0


class Connection:
    """One open connection: the SSH clients of the hops (target last), its SFTP client."""

    def __init__(self, clients: List[Any]) -> None:
        self.clients = clients
        self.transport: paramiko.Transport = clients[-1].get_transport()
        #: the shared SFTP client, opened on first use; paramiko's is not thread-safe
        self.sftp: Optional[paramiko.SFTPClient] = None
        self.sftp_lock = threading.Lock()

    def alive(self) -> bool:
        return bool(self.transport is not None and self.transport.is_active())

    def close(self) -> None:
        sftp, self.sftp = self.sftp, None
        close_quietly(sftp, *reversed(self.clients))


def open_connection(target: Target, options: SSHOptions, first: bool) -> Connection:
    """Log in to every hop of ``target`` and return the connection to the last one.

    ``first``: no connection was ever opened, so a name that does not resolve
    is a configuration mistake rather than a network blip.
    """
    paramiko = import_paramiko()
    chain = target.chain
    clients: List[Any] = []
    sock: Any = None
    try:
        if target.proxy_command:
            try:
                sock = paramiko.ProxyCommand(target.proxy_command)
            except Exception as exc:
                raise TransportError(f"ProxyCommand for {target.hop.label} failed: {exc}") from exc
        for index, hop in enumerate(chain):
            client = _connect_hop(paramiko, hop, sock, options, first, is_target=hop is chain[-1])
            clients.append(client)
            if index + 1 < len(chain):
                sock = _tunnel(client, hop, chain[index + 1], options.connect_timeout)
        transport = clients[-1].get_transport()
        no_delay(clients[0].get_transport().sock)
        if options.keepalive > 0:
            transport.set_keepalive(options.keepalive)
        return Connection(clients)
    except BaseException:
        close_quietly(*reversed(clients), sock)
        raise


def _tunnel(client: Any, hop: Hop, following: Hop, timeout: float) -> Any:
    """A ``direct-tcpip`` channel from ``hop`` to the next hop: the next login's socket."""
    try:
        return client.get_transport().open_channel(
            "direct-tcpip",
            (following.hostname, following.port),
            ("127.0.0.1", 0),
            timeout=timeout,
        )
    except Exception as exc:
        raise TransportError(
            f"jump host {hop.label} could not reach "
            f"{following.hostname}:{following.port}: {describe(exc)}"
        ) from exc


def _connect_hop(
    paramiko: Any, hop: Hop, sock: Any, options: SSHOptions, first: bool, is_target: bool
) -> Any:
    """A logged-in ``paramiko.SSHClient`` for ``hop`` (over ``sock`` when not direct)."""
    where = hop.label if is_target else f"jump host {hop.label}"
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(HostKeyPolicy(hop, options.accept_new_host_keys))
    agent = not hop.identities_only
    timeout = options.connect_timeout
    try:
        load_known_hosts(client, hop)
        client.connect(
            hop.hostname,
            port=hop.port,
            username=hop.user,
            key_filename=list(hop.identity_files) or None,
            timeout=timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
            channel_timeout=timeout,
            allow_agent=agent,
            look_for_keys=agent,
            sock=sock,
        )
    except Exception as exc:
        client.close()
        raise _login_error(paramiko, exc, hop, where, agent, first) from exc
    return client


def _login_error(
    paramiko: Any, exc: Exception, hop: Hop, where: str, agent: bool, first: bool
) -> Exception:
    """The error to raise for a failed login to ``hop``: permanent or worth a retry."""
    if isinstance(exc, HostKeyError):
        return Permanent(exc)
    if isinstance(exc, paramiko.BadHostKeyException):
        return Permanent(changed_host_key(hop, exc))
    if isinstance(exc, paramiko.AuthenticationException):
        # Never echo key material or passphrases: name the sources only.
        tried = ", ".join(hop.identity_files) or "no key file"
        hint = ""
        if isinstance(exc, paramiko.PasswordRequiredException):
            hint = " (a key file is encrypted: load it into ssh-agent with ssh-add)"
        return Permanent(
            TransportError(
                f"authentication to {where} failed{hint}: tried {tried}"
                f"{', the ssh agent and ~/.ssh/id_*' if agent else ''}; check that the "
                f"public key is in ~{hop.user}/.ssh/authorized_keys there"
            )
        )
    if isinstance(exc, paramiko.SSHException) and "No authentication methods" in str(exc):
        # paramiko's words when it found no key file, no agent and no ~/.ssh/id_* to offer
        looked = "no agent was asked and " if not agent else "no ssh agent, no ~/.ssh/id_* and "
        return Permanent(
            TransportError(
                f"no key to log in to {where} with ({looked}no key file given): set "
                "HPCBRIDGE_SSH_KEY=/path/to/private_key (or IdentityFile in ~/.ssh/config), "
                "or start ssh-agent and ssh-add your key, or create ~/.ssh/id_ed25519"
            )
        )
    if isinstance(exc, socket.gaierror):
        error = TransportError(f"cannot resolve {where}: {exc.strerror or exc}")
        return Permanent(error) if first else error
    return TransportError(f"cannot connect to {where}: {describe(exc)}")


#: opens one connection; its argument says whether none was ever opened before
Opener = Callable[[bool], Connection]

_FIRST_RETRY_DELAY = 0.5
_MAX_RETRY_DELAY = 8.0


class SharedConnection:
    """Hands out the live connection to ``label``, opening or reopening it as needed.

    Opening is serialised by a lock, with bounded exponential backoff and a minimum
    interval between opens; ``max_reconnect_attempts`` bounds one call (a wait tries its
    rounds again until its own deadline).  A forked child starts afresh."""

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
        tried = 0

        def attempt() -> Connection:
            nonlocal tried
            tried += 1
            self._keep_minimum_interval()
            try:
                return self.opener(self.count == 0)
            except Permanent as exc:
                raise exc.error from None
            except TransportError as exc:
                if tried >= attempts and reconnect:
                    raise TransportError(
                        f"cannot reconnect to {self.label} after {tried} attempts: {exc}"
                        " (is the host up? try again once it answers)"
                    ) from exc.__cause__
                if tried >= attempts:
                    raise
                # One line per outage ("lost", then "reconnected"), not one per attempt.
                raise _Again(f"attempt {tried}/{attempts}: {exc}") from exc

        conn = retry(
            attempt,
            budget=None,
            retry_on=(_Again,),
            pause=_FIRST_RETRY_DELAY,
            backoff=2.0,
            max_pause=_MAX_RETRY_DELAY,
            what=f"reconnect to {self.label}",
        )
        self.count += 1
        if reconnect:
            log.info("reconnected to %s (connection #%d)", self.label, self.count)
        else:
            log.debug("connected to %s", self.label)
        return conn

    def _keep_minimum_interval(self) -> None:
        """No open sooner than ``min_reconnect_interval`` after the last one: a link that
        dies at once is not reopened in a tight loop."""
        left = self._pace_left()
        if left > 0:  # asked again once that much later
            retry(self._pace_left, budget=left, again=lambda still: still > 0, pause=left)
        self._last_open = time.monotonic()

    def _pace_left(self) -> float:
        if not self._last_open:
            return 0.0
        return self._last_open + self.options.min_reconnect_interval - time.monotonic()


class _Again(Exception):
    """An open failed that another attempt may mend."""
