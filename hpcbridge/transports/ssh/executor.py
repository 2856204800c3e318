"""``SSHExecutor``: the ``Executor`` over one paramiko connection, SFTP for files, the
remote command line built with ``shlex.quote`` only (a POSIX shell on the remote side);
``SSHLogin``, what it and the OpenSSH backend's executor are given.  paramiko is imported
lazily: ``import hpcbridge.transports.ssh`` does not load it."""

from __future__ import annotations

import logging
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Type, TypeVar, Union

from ...errors import ConfigurationError, TransportError
from ..base import CommandResult
from .config import Target, reach_settings, resolve
from .connect import Connection, SharedConnection, SSHOptions, open_connection
from .files import RemoteFiles
from .run import RemoteCommands

if TYPE_CHECKING:  # pragma: no cover
    from ...settings.config import Settings

__all__ = ["SSHExecutor", "SSHLogin", "build_command"]

log = logging.getLogger("hpcbridge.ssh")

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def build_command(
    argv: Sequence[str],
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    login_shell: bool = False,
    stdin_devnull: bool = False,
) -> str:
    """The remote command line for ``argv``: every piece of caller data ``shlex.quote``-d.

    ``env`` becomes an ``env NAME=VALUE ...`` prefix (names must be shell
    identifiers), ``cwd`` a ``cd -- DIR &&`` prefix (a leading ``~`` or ``~/`` is
    the remote home, via ``"$HOME"``), and ``login_shell`` wraps everything in
    ``bash -l -c '...'`` so that the login profile (modules, PATH) is read.
    ``stdin_devnull`` appends ``</dev/null`` (stdin=DEVNULL, without an SSH EOF).
    """
    words = [str(arg) for arg in argv]
    if not words:
        raise ValueError("cannot run an empty argv")
    for word in words:
        if "\0" in word:
            raise ValueError("a command argument cannot contain a NUL byte")
    command = " ".join(shlex.quote(word) for word in words)
    if env:
        if words[0].startswith("-") or "=" in words[0]:
            # env(1) would read it as an option or another assignment.
            raise ValueError(f"cannot run {words[0]!r} with an environment: env would misread it")
        assignments = []
        for name, value in env.items():
            if not isinstance(name, str) or not _ENV_NAME.match(name):
                raise ValueError(f"environment variable name {name!r} is not an identifier")
            value = str(value)
            if "\0" in value:
                raise ValueError(f"environment variable {name} contains a NUL byte")
            assignments.append(shlex.quote(f"{name}={value}"))
        command = "env " + " ".join(assignments) + " " + command
    if cwd is not None:
        cwd = str(cwd)
        if cwd == "" or "\0" in cwd:
            raise ValueError(f"invalid working directory {cwd!r}")
        command = f"cd -- {_remote_dir_word(cwd)} && {command}"
    if login_shell:
        command = "bash -l -c " + shlex.quote(command)
    if stdin_devnull:
        command += " </dev/null"
    return command


def _remote_dir_word(path: str) -> str:
    """``path`` as one shell word; ``~``/``~/x`` expand to the remote ``$HOME`` only.

    A relative path stays relative to the login directory (the remote home).
    """
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        rest = path[2:]
        return '"$HOME"/' + shlex.quote(rest) if rest else '"$HOME"'
    if not path.startswith("/"):
        # "./": cd must not search CDPATH (it would also print the directory) nor
        # read "-" as "the previous directory".
        path = "./" + path
    return shlex.quote(path)


#: paths per ``stat`` command: far below any ARG_MAX
PATHS_PER_COMMAND = 500


def exact_mtime_commands(paths: Sequence[str]) -> List[List[str]]:
    """The argvs that print ``<mtime to the nanosecond> <path>`` for each of ``paths``."""
    ordered = sorted(set(paths))
    return [
        ["stat", "-c", "%.9Y %n", "--", *ordered[start : start + PATHS_PER_COMMAND]]
        for start in range(0, len(ordered), PATHS_PER_COMMAND)
    ]


def parse_mtimes(text: str, wanted: Sequence[str], exact: bool = True) -> Dict[str, float]:
    """The times in ``stat``'s output for the paths of ``wanted``; with ``exact``, a line
    that is not ``<seconds>.<fraction> <path>`` (a ``stat`` without ``%.9Y``: BSD, busybox,
    coreutils before 8.25 print something else) is left out, else whole seconds count."""
    asked = set(wanted)
    found: Dict[str, float] = {}
    for line in text.splitlines():
        stamp, _, path = line.partition(" ")
        if path not in asked or (exact and "." not in stamp):
            continue
        try:
            found[path] = float(stamp)
        except ValueError:
            continue
    return found


@dataclass(frozen=True)
class Given:
    """Where to log in, as given to an executor (the ssh config may add to it)."""

    host: str
    user: Optional[str]
    port: Optional[int]
    key_filename: Union[None, str, Sequence[str]]
    known_hosts: Optional[str]
    config_path: Optional[str]


L = TypeVar("L", bound="SSHLogin")


class SSHLogin:
    """The base of both SSH executors (``SSHExecutor``; ``openssh.OpenSSHExecutor``): the
    constructor arguments they share, declared here once, and ``from_settings``.

    ``host`` may be an alias from the ssh config (``~/.ssh/config`` unless
    ``ssh_config_path`` says otherwise; ``os.devnull`` ignores it); explicit
    ``user``/``port``/``key_filename``/``known_hosts`` win over the config.  The backend
    resolves them (``given``) and sets ``host`` to the ``user@hostname:port`` that labels
    records.  ``accept_new_host_keys``: a host missing from known_hosts is added, not
    refused; ``connect_timeout``, ``keepalive``: seconds; ``env``: variables set for every
    command (names checked here); ``login_shell``: commands run through ``bash -l``;
    ``default_timeout``: a command's seconds when the call gives none; ``backend``: the
    options of the backend's own ``_setup``, which resolves the host and sets ``host``.
    Nothing touches the network until the first call.
    """

    #: the resolved ``user@hostname:port``, set by the backend
    host: str

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
        env: Optional[Mapping[str, str]] = None,
        ssh_config_path: Optional[str] = None,
        **backend: Any,
    ) -> None:
        self.given = Given(host, user, port, key_filename, known_hosts, ssh_config_path)
        self.alias = host
        self.accept_new_host_keys = bool(accept_new_host_keys)
        self.login_shell = bool(login_shell)
        self.connect_timeout = float(connect_timeout)
        self.default_timeout = default_timeout
        self.keepalive = int(keepalive)
        self.env: Dict[str, str] = dict(env or {})
        if self.env:
            build_command(["true"], env=self.env)  # validate the names now
        self.reach: Mapping[str, Any] = reach_settings(
            host, user, port, key_filename, known_hosts, login_shell
        )
        self._setup(**backend)

    def _setup(self) -> None:
        """The backend's own options and its resolution of ``given`` (sets ``host``)."""
        raise NotImplementedError

    @classmethod
    def from_settings(cls: Type[L], settings: Settings, **overrides: Any) -> L:
        """An executor from :class:`hpcbridge.settings.config.Settings` (``HPCBRIDGE_SSH_*``)."""
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


class SSHExecutor(SSHLogin, SSHOptions, RemoteFiles):
    """Executor over one SSH connection (paramiko), with SFTP for files; its options
    (``SSHOptions``) are read by its connection, commands and files at each use.
    Nothing touches the network until the first call.
    """

    kind = "ssh"
    #: commands run on the remote host; paths are the remote host's paths
    is_local = False

    def _setup(self, max_reconnect_attempts: int = 5, min_reconnect_interval: float = 1.0) -> None:
        """At most ``max_reconnect_attempts`` logins in one call, at least
        ``min_reconnect_interval`` seconds apart."""
        self.max_reconnect_attempts = max(1, int(max_reconnect_attempts))
        self.min_reconnect_interval = max(0.0, float(min_reconnect_interval))
        given = self.given
        self.target: Target = resolve(
            given.host,
            user=given.user,
            port=given.port,
            key_filename=given.key_filename,
            known_hosts=given.known_hosts,
            config_path=given.config_path,
        )
        #: stable label for job records: the resolved ``user@hostname:port``
        self.host = self.target.hop.label
        self._connections = SharedConnection(self.host, self, self._open)
        self._commands = RemoteCommands(self._connections)
        #: whether the host's ``stat`` gives times to the nanosecond (see stat_many)
        self._exact_times = True

    def _open(self, first: bool) -> Connection:
        return open_connection(self.target, self, first)

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
        # server's close of a fast command (see run.send_eof).
        command = build_command(
            words, merged_env or None, cwd, self.login_shell, stdin_devnull=input is None
        )
        budget = self.default_timeout if timeout is None else timeout
        log.debug("run %s on %s", words[0], self.host)
        return self._commands.run(words, command, budget, input, idempotent)

    # ------------------------------------------------------------------ files (SFTP)

    def stat_many(self, paths: Sequence[str]) -> Dict[str, float]:
        found = self._listed_mtimes(paths)
        if found and self._exact_times:
            found.update(self._exact_mtimes(list(found)))
        return found

    def _exact_mtimes(self, paths: List[str]) -> Dict[str, float]:
        """The SFTP listing's whole seconds made exact by ``stat``: only for what it found,
        so one command in a round where ends appeared.  A host whose ``stat`` cannot
        say (no GNU coreutils) is not asked again: whole seconds then."""
        exact: Dict[str, float] = {}
        for argv in exact_mtime_commands(paths):
            try:
                result = self.run(argv, env={"LC_ALL": "C"})
            except TransportError:
                return exact  # the whole seconds stand this round
            answered = parse_mtimes(result.stdout, paths)
            if not answered and "No such file" not in result.stderr:
                log.info("%s: no exact file times (%s): whole seconds", self.host, result.message())
                self._exact_times = False
                return exact
            exact.update(answered)
        return exact
