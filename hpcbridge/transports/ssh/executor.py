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
  exponential backoff and a minimum interval between connection opens (a few
  attempts per call: a wait rides out a longer outage by trying its rounds again
  until its own deadline).  A command is retried after a drop only when
  ``idempotent=True``; a dropped submission raises
  :class:`SubmissionUncertainError` instead of running twice.
* **Quoting.**  The remote command line is built only with :func:`shlex.quote`
  (see :func:`build_command`); nothing from the caller reaches the remote shell
  unquoted.  A POSIX shell (bash, sh, zsh) is assumed on the remote side.

The parts, one module each: :mod:`.ssh_config` (where to connect),
:mod:`.ssh_connect` (logging in to each hop), :mod:`.ssh_reconnect` (the shared
connection and its reconnects), :mod:`.ssh_run` (one command on a channel),
:mod:`.ssh_files` (SFTP), :mod:`.ssh_command` (the remote command line).

paramiko is imported lazily: ``import hpcbridge.transports.ssh`` does not load it.
"""

from __future__ import annotations

import logging
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Generic,
    List,
    Mapping,
    Optional,
    Sequence,
    TypeVar,
    Union,
    overload,
)

from ...errors import ConfigurationError, TransportError
from ..base import CommandResult
from .command import build_command
from .config import Target, reach_settings, resolve
from .connect import Connection, SSHOptions, open_connection
from .files import RemoteFiles
from .reconnect import SharedConnection
from .run import RemoteCommands
from .times import exact_mtime_commands, parse_exact_mtimes

if TYPE_CHECKING:  # pragma: no cover
    from ...config import Settings

__all__ = ["SSHExecutor", "build_command"]

log = logging.getLogger("hpcbridge.ssh")

T = TypeVar("T")


class _Option(Generic[T]):
    """An executor attribute kept in the executor's :class:`SSHOptions`, which its
    connection, commands and files read: setting it on the executor reaches them all."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, executor: None, owner: type) -> _Option[T]: ...

    @overload
    def __get__(self, executor: SSHExecutor, owner: type) -> T: ...

    def __get__(self, executor: Optional[SSHExecutor], owner: type) -> Union[T, _Option[T]]:
        if executor is None:
            return self  # looked up on the class
        value: T = getattr(executor.options, self.name)
        return value

    def __set__(self, executor: SSHExecutor, value: T) -> None:
        setattr(executor.options, self.name, value)


class SSHExecutor:
    """Executor over one SSH connection (paramiko), with SFTP for files.

    ``host`` may be an alias from the ssh config (``~/.ssh/config`` unless
    ``ssh_config_path`` says otherwise; ``os.devnull`` ignores it).  Explicit
    ``user``/``port``/``key_filename``/``known_hosts`` win over the config.
    Nothing touches the network until the first call.
    """

    kind = "ssh"
    #: commands run on the remote host; paths are the remote host's paths
    is_local = False

    accept_new_host_keys = _Option[bool]()
    login_shell = _Option[bool]()
    connect_timeout = _Option[float]()
    default_timeout = _Option[Optional[float]]()
    keepalive = _Option[int]()
    max_reconnect_attempts = _Option[int]()
    min_reconnect_interval = _Option[float]()

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
        self.reach: Mapping[str, Any] = reach_settings(
            host, user, port, key_filename, known_hosts, login_shell
        )
        self.options = SSHOptions(
            accept_new_host_keys=bool(accept_new_host_keys),
            login_shell=bool(login_shell),
            connect_timeout=float(connect_timeout),
            default_timeout=default_timeout,
            keepalive=int(keepalive),
            max_reconnect_attempts=max(1, int(max_reconnect_attempts)),
            min_reconnect_interval=max(0.0, float(min_reconnect_interval)),
        )
        self.env: Dict[str, str] = dict(env or {})
        if self.env:
            build_command(["true"], env=self.env)  # validate the names now
        self._connections = SharedConnection(self.host, self.options, self._open)
        self._commands = RemoteCommands(self._connections)
        self._files = RemoteFiles(self._connections)
        #: whether the host's ``stat`` gives times to the nanosecond (see stat_many)
        self._exact_times = True

    def _open(self, first: bool) -> Connection:
        return open_connection(self.target, self.options, first)

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
    def connection_count(self) -> int:
        """How many times a connection was opened (1 while nothing dropped)."""
        return self._connections.count

    @property
    def transport(self) -> Any:
        """The current paramiko ``Transport`` (``None`` before the first call / after close)."""
        conn = self._connections.current
        return conn.transport if conn is not None else None

    @property
    def is_connected(self) -> bool:
        conn = self._connections.current
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

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def connect(self) -> None:
        """Open the connection now (it is otherwise opened by the first call)."""
        self._connections.get()

    def close(self) -> None:
        """Close the connection; a later call opens a new one."""
        self._connections.close()

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
        # server's close of a fast command (see ssh_channel.send_eof).
        command = build_command(
            words, merged_env or None, cwd, self.login_shell, stdin_devnull=input is None
        )
        budget = self.default_timeout if timeout is None else timeout
        log.debug("run %s on %s", words[0], self.host)
        return self._commands.run(words, command, budget, input, idempotent)

    # ------------------------------------------------------------------ files (SFTP)

    def abspath(self, path: str) -> str:
        """``path`` made absolute on the remote side (relative and ``~/`` against home)."""
        return self._files.abspath(path)

    def put(self, local_path: str, remote_path: str, mode: Optional[int] = None) -> None:
        self._files.put(local_path, remote_path, mode)

    def get(self, remote_path: str, local_path: str) -> None:
        self._files.get(remote_path, local_path)

    def mkdir(self, path: str, mode: int = 0o700) -> None:
        """``mkdir -p``: create ``path`` and missing parents (each with ``mode``)."""
        self._files.mkdir(path, mode)

    def read_text(self, path: str) -> str:
        return self._files.read_text(path)

    def write_text(self, path: str, text: str, mode: Optional[int] = None) -> None:
        self._files.write_text(path, text, mode)

    def exists(self, path: str) -> bool:
        return self._files.exists(path)

    def stat_many(self, paths: Sequence[str]) -> Dict[str, float]:
        found = self._files.stat_many(paths)
        if found and self._exact_times:
            found.update(self._exact_mtimes(list(found)))
        return found

    def _exact_mtimes(self, paths: List[str]) -> Dict[str, float]:
        """The SFTP listing's whole seconds made exact (``times``): only for what it
        found, so one command in a round where ends appeared.  A host whose ``stat`` cannot
        say (no GNU coreutils) is not asked again: whole seconds then."""
        exact: Dict[str, float] = {}
        for argv in exact_mtime_commands(paths):
            try:
                result = self.run(argv, env={"LC_ALL": "C"})
            except TransportError:
                return exact  # the whole seconds stand this round
            answered = parse_exact_mtimes(result.stdout, paths)
            if not answered and "No such file" not in result.stderr:
                log.info("%s: no exact file times (%s): whole seconds", self.host, result.message())
                self._exact_times = False
                return exact
            exact.update(answered)
        return exact
