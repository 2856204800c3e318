"""Run commands and move files over SSH: one paramiko connection, SFTP for files.

The twin of :mod:`hpcbridge.transports.local` for a machine that reaches the
cluster only over SSH (no shared filesystem).  Same semantics, plus what a
network adds:

* **One connection.**  Every call and every thread shares one paramiko
  ``Transport`` (SSH multiplexes channels); connecting and reconnecting are
  serialised by a lock, channels are opened concurrently.  One SFTP client is
  shared under its own lock (paramiko's SFTP client is not thread-safe).
* **Host keys are verified.**  Unknown key -> :class:`HostKeyError` that says how
  to accept it, unless ``accept_new_host_keys`` (OpenSSH's ``accept-new``);
  a *changed* key is always refused.
* **Reconnects.**  A dead connection is reopened transparently with bounded
  exponential backoff and a minimum interval between connection opens.  A
  command is retried after a drop only when ``idempotent=True``; a dropped
  submission raises :class:`SubmissionUncertainError` instead of running twice.
* **Quoting.**  The remote command line is built only with :func:`shlex.quote`
  (see :func:`build_command`); nothing from the caller reaches the remote shell
  unquoted.  A POSIX shell (bash, sh, zsh) is assumed on the remote side.

paramiko is imported lazily: ``import hpcbridge.transports.ssh`` does not load it.
"""

from __future__ import annotations

import errno
import logging
import os
import posixpath
import socket
import stat
import tempfile
import threading
import time
import uuid
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

from ..errors import (
    ConfigurationError,
    HostKeyError,
    JobTimeoutError,
    SubmissionUncertainError,
    TransportError,
)
from .base import CommandResult
from .ssh_channel import Readiness, no_delay, send_data, send_eof, send_signal
from .ssh_command import build_command
from .ssh_config import Hop, Target, resolve
from .ssh_hostkeys import HostKeyPolicy, fingerprint

if TYPE_CHECKING:  # pragma: no cover
    import paramiko

    from ..config import Settings

log = logging.getLogger("hpcbridge.ssh")

T = TypeVar("T")

_CHUNK = 65536
#: errno values that mean "the connection is gone" rather than "the file op failed"
_CONNECTION_ERRNOS = frozenset(
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


# --------------------------------------------------------------------------- command line


# --------------------------------------------------------------------------- connection


class _ConnectionDropped(Exception):
    """Internal: the connection died while a command was in flight."""


class _Connection:
    """One open connection: the SSH clients of the hops (target last), its SFTP client."""

    def __init__(self, clients: List[Any]) -> None:
        self.clients = clients
        self.transport: paramiko.Transport = clients[-1].get_transport()
        self.sftp: Optional[paramiko.SFTPClient] = None

    def alive(self) -> bool:
        return bool(self.transport is not None and self.transport.is_active())

    def close(self) -> None:
        if self.sftp is not None:
            try:
                self.sftp.close()
            except Exception:  # noqa: S110 - best effort on a dying connection
                pass
            self.sftp = None
        for client in reversed(self.clients):
            try:
                client.close()
            except Exception:  # noqa: S110
                pass


def _import_paramiko() -> Any:
    try:
        import paramiko
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise TransportError(
            "the ssh transport needs paramiko: pip install 'hpcbridge[ssh]'"
        ) from exc
    return paramiko


def _is_connection_error(exc: BaseException, transport: Any = None) -> bool:
    """Does ``exc`` mean the connection (not the command or the file op) failed?"""
    if transport is not None and not transport.is_active():
        return True
    if isinstance(exc, (EOFError, socket.timeout)):
        return True
    paramiko = _loaded_paramiko()
    if paramiko is not None and isinstance(exc, paramiko.SSHException):
        return True
    return isinstance(exc, OSError) and exc.errno in _CONNECTION_ERRNOS


def _loaded_paramiko() -> Any:
    import sys

    return sys.modules.get("paramiko")


class SSHExecutor:
    """Executor over one SSH connection (paramiko), with SFTP for files.

    ``host`` may be an alias from the ssh config (``~/.ssh/config`` unless
    ``ssh_config_path`` says otherwise; ``os.devnull`` ignores it).  Explicit
    ``user``/``port``/``key_filename``/``known_hosts`` win over the config.
    Nothing touches the network until the first call.
    """

    kind = "ssh"

    def __init__(
        self,
        host: str,
        user: Optional[str] = None,
        port: Optional[int] = None,
        key_filename: Union[None, str, Sequence[str]] = None,
        *,
        known_hosts: Optional[str] = None,
        accept_new_host_keys: bool = False,
        login_shell: bool = False,
        connect_timeout: float = 15.0,
        default_timeout: Optional[float] = 60.0,
        keepalive: int = 30,
        ssh_config_path: Optional[str] = None,
        max_reconnect_attempts: int = 5,
        min_reconnect_interval: float = 1.0,
        env: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.target: Target = resolve(
            host,
            user=user,
            port=port,
            key_filename=key_filename,
            known_hosts=known_hosts,
            config_path=ssh_config_path,
        )
        #: stable label for job records: the resolved ``user@hostname:port``
        self.host = self.target.hop.label
        self.alias = host
        self.accept_new_host_keys = bool(accept_new_host_keys)
        self.login_shell = bool(login_shell)
        self.connect_timeout = float(connect_timeout)
        self.default_timeout = default_timeout
        self.keepalive = int(keepalive)
        self.max_reconnect_attempts = max(1, int(max_reconnect_attempts))
        self.min_reconnect_interval = max(0.0, float(min_reconnect_interval))
        self.env: Dict[str, str] = dict(env or {})
        if self.env:
            build_command(["true"], env=self.env)  # validate the names now
        #: how many times a connection was opened (1 while nothing dropped)
        self.connection_count = 0
        self._conn: Optional[_Connection] = None
        self._home: Optional[str] = None
        self._last_open = 0.0
        self._init_locks()

    def _init_locks(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.RLock()
        self._sftp_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> SSHExecutor:
        """An executor from :class:`hpcbridge.config.Settings` (``HPCBRIDGE_SSH_*``)."""
        if not settings.ssh_host:
            raise ConfigurationError(
                "the ssh transport needs a host: set HPCBRIDGE_SSH_HOST (or EXAMLOPS_HPC_SSH_HOST)"
            )
        arguments: Dict[str, Any] = {
            "user": settings.ssh_user,
            "port": settings.ssh_port,
            "key_filename": settings.ssh_key,
            "known_hosts": settings.ssh_known_hosts,
            "accept_new_host_keys": settings.ssh_accept_new_host_keys,
            "login_shell": settings.ssh_login_shell,
            "default_timeout": settings.command_timeout,
            "env": settings.command_env,
        }
        arguments.update(overrides)
        return cls(settings.ssh_host, **arguments)

    # ------------------------------------------------------------------ introspection

    @property
    def transport(self) -> Any:
        """The current paramiko ``Transport`` (``None`` before the first call / after close)."""
        conn = self._conn
        return conn.transport if conn is not None else None

    @property
    def is_connected(self) -> bool:
        conn = self._conn
        return conn is not None and conn.alive()

    @property
    def open_connections(self) -> int:
        """How many live connections to the target this executor holds: 0 or 1."""
        return 1 if self.is_connected else 0

    def __repr__(self) -> str:
        via = "".join(f" via {hop.label}" for hop in self.target.jumps)
        return f"SSHExecutor({self.host!r}{via})"

    def __enter__(self) -> SSHExecutor:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ connecting

    def connect(self) -> None:
        """Open the connection now (it is otherwise opened by the first call)."""
        self._connection()

    def _connection(self) -> _Connection:
        if os.getpid() != self._pid:
            # A forked child inherits the socket but not paramiko's thread.
            self._conn = None
            self._init_locks()
        conn = self._conn
        if conn is not None and conn.alive():
            return conn
        with self._lock:
            conn = self._conn
            if conn is not None and conn.alive():
                return conn
            reconnect = self.connection_count > 0
            if conn is not None:
                log.info("connection to %s lost; reconnecting", self.host)
                self._conn = None
                conn.close()
            self._conn = self._open_with_retries(reconnect)
            return self._conn

    def _invalidate(self, conn: _Connection) -> None:
        """Drop ``conn`` if it is still the current one (others may have replaced it)."""
        with self._lock:
            if self._conn is conn:
                self._conn = None
            else:
                return
        conn.close()

    def _open_with_retries(self, reconnect: bool) -> _Connection:
        # At start, fail fast: a refused port or a bad name is a configuration
        # problem.  On a reconnect the server may be restarting: back off.
        attempts = self.max_reconnect_attempts if reconnect else 1
        delay = 0.5
        for attempt in range(1, attempts + 1):
            wait = self._last_open + self.min_reconnect_interval - time.monotonic()
            if self._last_open and wait > 0:
                time.sleep(wait)
            self._last_open = time.monotonic()
            try:
                conn = self._open()
            except _Permanent as exc:
                raise exc.error from None
            except TransportError as exc:
                if attempt >= attempts:
                    if reconnect:
                        raise TransportError(
                            f"cannot reconnect to {self.host} after {attempt} attempts: {exc}"
                        ) from exc.__cause__
                    raise
                log.info(
                    "reconnect to %s failed (attempt %d/%d): %s; retrying in %.1f s",
                    self.host,
                    attempt,
                    attempts,
                    exc,
                    delay,
                )
                time.sleep(delay)
                delay = min(delay * 2, 8.0)
                continue
            self.connection_count += 1
            if reconnect:
                log.info("reconnected to %s (connection #%d)", self.host, self.connection_count)
            else:
                log.debug("connected to %s", self.host)
            return conn
        raise AssertionError("unreachable")  # pragma: no cover

    def _open(self) -> _Connection:
        paramiko = _import_paramiko()
        chain = self.target.chain
        clients: List[Any] = []
        sock: Any = None
        try:
            if self.target.proxy_command:
                try:
                    sock = paramiko.ProxyCommand(self.target.proxy_command)
                except Exception as exc:
                    raise TransportError(f"ProxyCommand for {self.host} failed: {exc}") from exc
            for index, hop in enumerate(chain):
                clients.append(self._connect_hop(paramiko, hop, sock, is_target=hop is chain[-1]))
                if index + 1 < len(chain):
                    following = chain[index + 1]
                    try:
                        sock = (
                            clients[-1]
                            .get_transport()
                            .open_channel(
                                "direct-tcpip",
                                (following.hostname, following.port),
                                ("127.0.0.1", 0),
                                timeout=self.connect_timeout,
                            )
                        )
                    except Exception as exc:
                        raise TransportError(
                            f"jump host {hop.label} could not reach "
                            f"{following.hostname}:{following.port}: {_describe(exc)}"
                        ) from exc
            transport = clients[-1].get_transport()
            no_delay(clients[0].get_transport().sock)
            if self.keepalive > 0:
                transport.set_keepalive(self.keepalive)
            return _Connection(clients)
        except BaseException:
            for client in reversed(clients):
                try:
                    client.close()
                except Exception:  # noqa: S110
                    pass
            if sock is not None and hasattr(sock, "close"):
                try:
                    sock.close()
                except Exception:  # noqa: S110
                    pass
            raise

    def _connect_hop(self, paramiko: Any, hop: Hop, sock: Any, is_target: bool) -> Any:
        where = hop.label if is_target else f"jump host {hop.label}"
        client = paramiko.SSHClient()
        for path in (*hop.global_known_hosts_files, *hop.known_hosts_files):
            if path and path != os.devnull and os.path.isfile(path):
                try:
                    client.load_system_host_keys(path)
                except Exception as exc:
                    client.close()
                    raise _Permanent(
                        HostKeyError(f"cannot read known_hosts file {path}: {exc}")
                    ) from exc
        client.set_missing_host_key_policy(HostKeyPolicy(hop, self.accept_new_host_keys))
        agent = not hop.identities_only
        try:
            client.connect(
                hop.hostname,
                port=hop.port,
                username=hop.user,
                key_filename=list(hop.identity_files) or None,
                timeout=self.connect_timeout,
                banner_timeout=self.connect_timeout,
                auth_timeout=self.connect_timeout,
                channel_timeout=self.connect_timeout,
                allow_agent=agent,
                look_for_keys=agent,
                sock=sock,
            )
        except HostKeyError as exc:
            client.close()
            raise _Permanent(exc) from None
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise _Permanent(
                HostKeyError(
                    f"HOST KEY CHANGED for {hop.known_hosts_name}: the server presented "
                    f"{exc.key.get_name()} {fingerprint(exc.key)} but known_hosts "
                    f"({', '.join(hop.known_hosts_files)}) has {exc.expected_key.get_name()} "
                    f"{fingerprint(exc.expected_key)}. This may be a man-in-the-middle attack "
                    f"or a reinstalled server; nothing was run. If the change is expected, "
                    f"remove the old entry: ssh-keygen -R '{hop.known_hosts_name}' "
                    f"-f {hop.known_hosts_files[0]}"
                )
            ) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            # Never echo key material or passphrases: name the sources only.
            tried = ", ".join(hop.identity_files) or "no key file"
            hint = ""
            if isinstance(exc, paramiko.PasswordRequiredException):
                hint = " (a key file is encrypted: load it into ssh-agent with ssh-add)"
            raise _Permanent(
                TransportError(
                    f"authentication to {where} failed{hint}: tried {tried}"
                    f"{', the ssh agent and ~/.ssh/id_*' if agent else ''}; check that the "
                    f"public key is in ~{hop.user}/.ssh/authorized_keys there"
                )
            ) from None
        except socket.gaierror as exc:
            client.close()
            error = TransportError(f"cannot resolve {where}: {exc.strerror or exc}")
            if self.connection_count == 0:
                raise _Permanent(error) from None
            raise error from exc
        except Exception as exc:
            client.close()
            raise TransportError(f"cannot connect to {where}: {_describe(exc)}") from exc
        return client

    # ------------------------------------------------------------------ commands

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        input: Optional[str] = None,
        idempotent: bool = True,
    ) -> CommandResult:
        words = [str(arg) for arg in argv]
        merged_env = {**self.env, **(env or {})}
        # Without input, stdin is /dev/null on the remote side rather than an SSH
        # EOF: one message less per command, and no EOF that could race the
        # server's close of a fast command (see _send_eof).
        command = build_command(
            words, merged_env or None, cwd, self.login_shell, stdin_devnull=input is None
        )
        budget = self.default_timeout if timeout is None else timeout
        log.debug("run %s on %s", words[0], self.host)
        failures = 0
        while True:
            conn = self._connection()
            try:
                channel = conn.transport.open_session(timeout=self.connect_timeout)
            except Exception as exc:
                # Nothing was sent: safe to retry even a submission.
                failures += 1
                refused = not _is_connection_error(exc, conn.transport)
                paramiko = _loaded_paramiko()
                if not refused and paramiko and isinstance(exc, paramiko.ChannelException):
                    # e.g. MaxSessions reached: the server refused the channel, the
                    # connection is fine.
                    refused = conn.alive()
                if failures >= self.max_reconnect_attempts:
                    raise TransportError(
                        f"cannot open a channel to {self.host}: {_describe(exc)}"
                    ) from exc
                if refused:
                    time.sleep(min(0.1 * 2**failures, 2.0))
                else:
                    self._invalidate(conn)
                continue
            try:
                return self._execute(channel, conn, words, command, budget, input)
            except _ConnectionDropped as exc:
                self._invalidate(conn)
                if not idempotent:
                    raise SubmissionUncertainError(
                        f"the connection to {self.host} dropped while {words[0]} was running: "
                        "it may or may not have taken effect (a job may or may not exist). "
                        "It was NOT run again; check the queue before retrying.",
                        argv=words,
                    ) from exc
                failures += 1
                if failures >= self.max_reconnect_attempts:
                    raise TransportError(
                        f"the connection to {self.host} kept dropping while running {words[0]}"
                    ) from exc
                log.info(
                    "connection to %s dropped during %s; retrying (idempotent)",
                    self.host,
                    words[0],
                )

    def _execute(
        self,
        channel: Any,
        conn: _Connection,
        argv: List[str],
        command: str,
        budget: Optional[float],
        input: Optional[str],
    ) -> CommandResult:
        started = time.monotonic()
        deadline = None if budget is None else started + budget
        try:
            try:
                channel.exec_command(command)
            except Exception as exc:
                if _is_connection_error(exc, conn.transport) and not conn.alive():
                    # The request may have reached the server: uncertain.
                    raise _ConnectionDropped(str(exc)) from exc
                raise TransportError(
                    f"{self.host} refused to run {argv[0]}: {_describe(exc)}"
                ) from exc
            status, stdout, stderr = self._collect(channel, argv, budget, deadline, input)
        finally:
            channel.close()  # also releases the pipe behind _Readiness
        if status == -1:
            # No exit-status: the connection died, or the command was killed by
            # a signal (paramiko ignores "exit-signal").
            if not channel.eof_received or not _stays_active(conn.transport):
                raise _ConnectionDropped(f"connection lost while running {argv[0]}")
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
        feeder = self._feed_input(channel, input)
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
                wait = 1.0 if deadline is None else deadline - time.monotonic()
                if wait <= 0:
                    self._abandon(channel, argv, budget)
                ready.wait(min(wait, 1.0))
            # The exit status may trail the end of the output by a packet.
            while not channel.status_event.is_set():
                wait = 1.0 if deadline is None else deadline - time.monotonic()
                if wait <= 0:
                    self._abandon(channel, argv, budget)
                channel.status_event.wait(min(wait, 1.0))
        finally:
            if feeder is not None:
                feeder.join(timeout=1.0)
        return int(channel.exit_status), b"".join(stdout), b"".join(stderr)

    def _feed_input(self, channel: Any, input: Optional[str]) -> Optional[threading.Thread]:
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

    def _abandon(self, channel: Any, argv: List[str], budget: Optional[float]) -> None:
        """Kill the remote command (SSH "signal" request), close the channel, raise."""
        send_signal(channel, "KILL")
        channel.close()
        raise JobTimeoutError(
            f"{argv[0]} did not finish within {budget:g} s on {self.host} "
            f"(command: {' '.join(argv)[:200]})"
        )

    # ------------------------------------------------------------------ files

    def _sftp_call(self, what: str, operation: Callable[[Any], T]) -> T:
        failures = 0
        while True:
            conn = self._connection()
            error: Optional[BaseException] = None
            with self._sftp_lock:
                try:
                    sftp = conn.sftp
                    channel = sftp.get_channel() if sftp is not None else None
                    if sftp is None or channel is None or channel.closed:
                        sftp = conn.sftp = conn.transport.open_sftp_client()
                        # No answer for this long = a stalled link (socket.timeout).
                        opened = sftp.get_channel()
                        if opened is not None:
                            opened.settimeout(max(60.0, self.default_timeout or 0.0))
                    return operation(sftp)
                except Exception as exc:
                    if not _is_connection_error(exc, conn.transport):
                        raise
                    error = exc
                    stale, conn.sftp = conn.sftp, None
                    if stale is not None:
                        try:
                            stale.close()
                        except Exception:  # noqa: S110
                            pass
            failures += 1
            if isinstance(error, socket.timeout) or not conn.alive():
                self._invalidate(conn)
            if failures >= self.max_reconnect_attempts:
                raise TransportError(f"{what} on {self.host} failed: {_describe(error)}") from error
            log.info("%s on %s failed (%s); retrying", what, self.host, _describe(error))

    def _home_dir(self, sftp: Any) -> str:
        if self._home is None:
            self._home = sftp.normalize(".")
        return self._home

    def _path(self, sftp: Any, path: str) -> str:
        path = str(path)
        if path == "~":
            return self._home_dir(sftp)
        if path.startswith("~/"):
            return posixpath.join(self._home_dir(sftp), path[2:])
        return path

    def abspath(self, path: str) -> str:
        """``path`` made absolute on the remote side (relative and ``~/`` against home)."""

        path = str(path)
        if path.startswith("/"):
            return posixpath.normpath(path)  # no round trip needed

        def operation(sftp: Any) -> str:
            expanded = self._path(sftp, path)
            if not expanded.startswith("/"):
                expanded = posixpath.join(self._home_dir(sftp), expanded)
            return posixpath.normpath(expanded)

        return self._sftp_call("abspath", operation)

    def put(self, local_path: str, remote_path: str, mode: Optional[int] = None) -> None:
        local_mode = os.stat(local_path).st_mode & 0o777  # FileNotFoundError for a local miss
        final_mode = local_mode if mode is None else mode

        def operation(sftp: Any) -> None:
            target = self._path(sftp, remote_path)
            temporary = _temporary_name(target)
            try:
                with open(local_path, "rb") as source, sftp.open(temporary, "wbx") as sink:
                    sink.chmod(final_mode)  # before any byte is written
                    sink.set_pipelined(True)
                    size = 0
                    while True:
                        chunk = source.read(32768)
                        if not chunk:
                            break
                        sink.write(chunk)
                        size += len(chunk)
                written = sftp.stat(temporary).st_size
                if written != size:
                    raise OSError(f"size mismatch after upload: {written} != {size}")
                _rename(sftp, temporary, target)
            except BaseException:
                _remove_quietly(sftp, temporary)
                raise

        self._sftp_call(f"put {remote_path}", operation)

    def get(self, remote_path: str, local_path: str) -> None:
        directory = os.path.dirname(os.path.abspath(local_path))

        def operation(sftp: Any) -> None:
            source = self._path(sftp, remote_path)
            attributes = sftp.stat(source)  # FileNotFoundError when missing
            if attributes.st_mode is not None and stat.S_ISDIR(attributes.st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory", remote_path)
            handle, temporary = tempfile.mkstemp(prefix=".hpcbridge-", dir=directory)
            os.close(handle)
            try:
                sftp.get(source, temporary)
                if attributes.st_mode is not None:
                    os.chmod(temporary, attributes.st_mode & 0o777)
                os.replace(temporary, local_path)
            except BaseException:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
                raise

        self._sftp_call(f"get {remote_path}", operation)

    def mkdir(self, path: str, mode: int = 0o700) -> None:
        """``mkdir -p``: create ``path`` and missing parents (each with ``mode``)."""

        def operation(sftp: Any) -> None:
            target = posixpath.normpath(self._path(sftp, path))
            missing: List[str] = []
            current = target
            while current not in ("", "/", "."):
                try:
                    attributes = sftp.stat(current)
                except FileNotFoundError:
                    missing.append(current)
                    current = posixpath.dirname(current)
                    continue
                if not stat.S_ISDIR(attributes.st_mode or 0):
                    raise FileExistsError(errno.EEXIST, "exists and is not a directory", current)
                break
            for directory in reversed(missing):
                try:
                    sftp.mkdir(directory, mode)
                except OSError:
                    # Created meanwhile by someone else?  Fine if it is a directory now.
                    try:
                        if stat.S_ISDIR(sftp.stat(directory).st_mode or 0):
                            continue
                    except OSError:
                        pass
                    raise

        self._sftp_call(f"mkdir {path}", operation)

    def read_text(self, path: str) -> str:
        def operation(sftp: Any) -> str:
            with sftp.open(self._path(sftp, path), "rb") as handle:
                handle.prefetch()
                data = handle.read()
            return bytes(data).decode("utf-8", "replace")

        return self._sftp_call(f"read {path}", operation)

    def write_text(self, path: str, text: str, mode: Optional[int] = None) -> None:
        data = text.encode("utf-8")

        def operation(sftp: Any) -> None:
            target = self._path(sftp, path)
            temporary = _temporary_name(target)
            try:
                with sftp.open(temporary, "wbx") as sink:
                    sink.chmod(0o644 if mode is None else mode)
                    sink.set_pipelined(True)
                    sink.write(data)
                _rename(sftp, temporary, target)
            except BaseException:
                _remove_quietly(sftp, temporary)
                raise

        self._sftp_call(f"write {path}", operation)

    def exists(self, path: str) -> bool:
        def operation(sftp: Any) -> bool:
            try:
                sftp.stat(self._path(sftp, path))
            except (FileNotFoundError, PermissionError):
                return False
            return True

        return self._sftp_call(f"stat {path}", operation)

    def close(self) -> None:
        """Close the connection; a later call opens a new one."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class _Permanent(Exception):
    """Internal: a connect error that retrying cannot fix (auth, host key, DNS at start)."""

    def __init__(self, error: TransportError) -> None:
        super().__init__(str(error))
        self.error = error


def _describe(exc: Optional[BaseException]) -> str:
    if exc is None:
        return "unknown error"
    paramiko = _loaded_paramiko()
    if paramiko is not None and isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return "connection refused"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.timeout):
        return "timed out"
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _stays_active(transport: Any, grace: float = 0.2) -> bool:
    """Is the transport still up after ``grace`` s?  (paramiko closes channels first.)"""
    end = time.monotonic() + grace
    while time.monotonic() < end:
        if not transport.is_active():
            return False
        time.sleep(0.02)
    return bool(transport.is_active())


def _temporary_name(target: str) -> str:
    directory, base = posixpath.split(target)
    return posixpath.join(directory, f".{base}.hpcbridge-{uuid.uuid4().hex[:12]}.tmp")


def _rename(sftp: Any, source: str, target: str) -> None:
    """Atomic replace (posix-rename@openssh.com); plain rename where unsupported."""
    try:
        sftp.posix_rename(source, target)
        return
    except OSError as exc:
        if "unsupported" not in str(exc).lower() and "not supported" not in str(exc).lower():
            raise
    try:
        sftp.rename(source, target)
    except OSError:
        sftp.remove(target)  # SFTP v3 rename refuses to overwrite
        sftp.rename(source, target)


def _remove_quietly(sftp: Any, path: str) -> None:
    try:
        sftp.remove(path)
    except Exception:  # noqa: S110 - also when the connection is gone
        pass
