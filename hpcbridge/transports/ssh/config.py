"""Where to connect: an ``SSHExecutor``'s arguments (which win) merged with ``~/.ssh/config``
(read by ``paramiko.SSHConfig``): ``HostName``, ``User``, ``Port``, ``IdentityFile``,
``IdentitiesOnly``, ``User``/``GlobalKnownHostsFile``, ``ProxyJump`` and ``ProxyCommand``."""

from __future__ import annotations

import getpass
import os
import re
import shlex
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ...errors import ConfigurationError

SSH_PORT = 22
DEFAULT_CONFIG = os.path.join("~", ".ssh", "config")
DEFAULT_KNOWN_HOSTS = os.path.join("~", ".ssh", "known_hosts")
DEFAULT_GLOBAL_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
#: ProxyJump may not chain more hops than this (OpenSSH has no limit; a loop has).
MAX_JUMPS = 8


@dataclass(frozen=True)
class Hop:
    """One SSH server to log in to: the target, or a jump host on the way."""

    alias: str
    hostname: str
    port: int
    user: str
    identity_files: Tuple[str, ...] = ()
    identities_only: bool = False
    known_hosts_files: Tuple[str, ...] = ()
    global_known_hosts_files: Tuple[str, ...] = ()

    @property
    def known_hosts_name(self) -> str:
        """The name OpenSSH writes in known_hosts: ``host``, or ``[host]:port`` off port 22."""
        return known_hosts_name(self.hostname, self.port)

    @property
    def label(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


@dataclass(frozen=True)
class Target:
    """The final host plus the jump hosts in front of it (first hop first)."""

    hop: Hop
    jumps: Tuple[Hop, ...] = ()
    proxy_command: Optional[str] = None
    config_path: Optional[str] = None

    @property
    def chain(self) -> Tuple[Hop, ...]:
        return (*self.jumps, self.hop)


def known_hosts_name(hostname: str, port: int) -> str:
    return hostname if int(port) == SSH_PORT else f"[{hostname}]:{int(port)}"


def default_config_path() -> Optional[str]:
    path = os.path.expanduser(DEFAULT_CONFIG)
    return path if os.path.isfile(path) else None


def load_config(path: Optional[str]) -> Any:
    """A ``paramiko.SSHConfig`` for ``path``, or ``None`` when there is no file to read."""
    if not path or path == os.devnull:
        return None
    path = os.path.expanduser(path)
    if not os.path.isfile(path):
        raise ConfigurationError(f"ssh config file {path} does not exist")
    try:
        import paramiko
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            "the ssh transport needs paramiko: pip install 'hpcbridge[ssh]'"
        ) from exc
    try:
        return paramiko.SSHConfig.from_path(path)
    except Exception as exc:  # ConfigParseError, OSError, ...
        raise ConfigurationError(f"cannot parse ssh config {path}: {exc}") from exc


def _lookup(config: Any, alias: str, config_path: Optional[str]) -> Dict[str, Any]:
    if config is None:
        return {}
    try:
        return dict(config.lookup(alias))
    except Exception as exc:  # e.g. "Match exec" without the invoke package
        raise ConfigurationError(
            f"cannot resolve host {alias!r} in ssh config {config_path}: {exc}"
        ) from exc


_JUMP = re.compile(
    r"^(?:ssh://)?(?:(?P<user>[^@\s]+)@)?(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\s\[\]@]+))"
    r"(?::(?P<port>\d+))?/?$"
)


def parse_jump(spec: str) -> Tuple[Optional[str], str, Optional[int]]:
    """``[ssh://][user@]host[:port]`` (``[v6addr]:port`` too) -> ``(user, host, port)``."""
    match = _JUMP.match(spec.strip())
    if not match:
        raise ConfigurationError(f"ProxyJump entry {spec!r} is not [user@]host[:port]")
    port = int(match.group("port")) if match.group("port") else None
    if port is not None and not 0 < port < 65536:
        raise ConfigurationError(f"ProxyJump entry {spec!r}: port out of range")
    return match.group("user"), match.group("v6") or match.group("host"), port


def split_jumps(value: Optional[str]) -> List[str]:
    """A ``ProxyJump`` value as its hops; ``none`` means no jump."""
    if not value or value.strip().lower() == "none":
        return []
    return [part.strip() for part in value.split(",") if part.strip()]


def _paths(value: Union[None, str, Sequence[str]]) -> Tuple[str, ...]:
    if not value:
        return ()
    try:
        items = shlex.split(value) if isinstance(value, str) else list(value)
    except ValueError as exc:  # an unclosed quote
        raise ConfigurationError(
            f"ssh config: paths {value!r}: {exc}; correct the quotes"
        ) from None
    return tuple(os.path.expanduser(item) for item in items if item and item != "none")


def _port(value: Any, source: str) -> int:
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{source}: port {value!r} is not a number") from None
    if not 0 < port < 65536:
        raise ConfigurationError(f"{source}: port {port} is out of range")
    return port


def _yes(value: Any) -> bool:
    return str(value).strip().lower() in ("yes", "true", "1", "on")


def _hop(
    alias: str,
    options: Dict[str, Any],
    *,
    user: Optional[str],
    port: Optional[int],
    key_files: Sequence[str],
    known_hosts: Optional[str],
    fallback_keys: Sequence[str] = (),
) -> Hop:
    hostname = str(options.get("hostname") or alias)
    resolved_user = user or options.get("user") or getpass.getuser()
    resolved_port = (
        _port(port, "port")
        if port is not None
        else _port(options.get("port", SSH_PORT), f"ssh config for {alias}")
    )
    configured = [
        path for path in _paths(options.get("identityfile")) if os.path.exists(path)
    ]  # OpenSSH skips IdentityFile entries that do not exist (e.g. the defaults)
    identities: List[str] = []
    for path in [*key_files, *configured, *fallback_keys]:
        if path not in identities:
            identities.append(path)
    if known_hosts:
        user_known: Tuple[str, ...] = (os.path.expanduser(known_hosts),)
    else:
        user_known = _paths(options.get("userknownhostsfile")) or (
            os.path.expanduser(DEFAULT_KNOWN_HOSTS),
        )
    global_known = _paths(options.get("globalknownhostsfile")) or (DEFAULT_GLOBAL_KNOWN_HOSTS,)
    return Hop(
        alias=alias,
        hostname=hostname,
        port=resolved_port,
        user=str(resolved_user),
        identity_files=tuple(identities),
        identities_only=_yes(options.get("identitiesonly", "no")),
        known_hosts_files=user_known,
        global_known_hosts_files=global_known,
    )


def resolve(
    host: str,
    user: Optional[str] = None,
    port: Optional[int] = None,
    key_filename: Union[None, str, Sequence[str]] = None,
    known_hosts: Optional[str] = None,
    config_path: Optional[str] = None,
) -> Target:
    """Merge the arguments with the ssh config (``None``: ``~/.ssh/config`` if it exists).

    ``host`` may be ``user@host``; an explicit ``user`` still wins.  Pass
    ``os.devnull`` as ``config_path`` to ignore every config file.
    """
    host = (host or "").strip()
    if not host:
        raise ConfigurationError("the ssh transport needs a host name")
    if "@" in host:
        embedded_user, host = host.rsplit("@", 1)
        user = user or embedded_user or None
    if any(ch.isspace() for ch in host) or host.startswith("-"):
        raise ConfigurationError(f"ssh host {host!r} is not a host name")
    if config_path is None:
        config_path = default_config_path()
    config = load_config(config_path)
    key_files = _key_files(key_filename)
    options = _lookup(config, host, config_path)
    target_hop = _hop(
        host, options, user=user, port=port, key_files=key_files, known_hosts=known_hosts
    )
    jumps = _jump_hops(host, options, config, config_path, key_files, known_hosts)
    proxy_command = None
    if not jumps:
        value = options.get("proxycommand")
        if value and str(value).strip().lower() != "none":
            proxy_command = str(value)
    return Target(
        hop=target_hop,
        jumps=jumps,
        proxy_command=proxy_command,
        config_path=config_path,
    )


def _key_files(key_filename: Union[None, str, Sequence[str]]) -> Tuple[str, ...]:
    """The explicit key files, ``~`` expanded; each must exist."""
    if isinstance(key_filename, str):
        key_files: Tuple[str, ...] = (os.path.expanduser(key_filename),)
    else:
        key_files = tuple(os.path.expanduser(k) for k in (key_filename or ()))
    for key in key_files:
        if not os.path.isfile(key):
            raise ConfigurationError(f"ssh key file {key} does not exist")
    return key_files


def _jump_hops(
    host: str,
    options: Dict[str, Any],
    config: Any,
    config_path: Optional[str],
    key_files: Tuple[str, ...],
    known_hosts: Optional[str],
) -> Tuple[Hop, ...]:
    """The hops of ``host``'s ``ProxyJump``, first hop first."""
    specs = split_jumps(options.get("proxyjump"))
    if len(specs) > MAX_JUMPS:
        raise ConfigurationError(f"ProxyJump for {host} has more than {MAX_JUMPS} hops")
    jumps: List[Hop] = []
    for spec in specs:
        jump_user, jump_host, jump_port = parse_jump(spec)
        jump_options = _lookup(config, jump_host, config_path)
        # A hop's own ProxyJump is not followed (the chain is the target's list).
        jumps.append(
            _hop(
                jump_host,
                jump_options,
                user=jump_user,
                port=jump_port,
                key_files=(),
                known_hosts=known_hosts,
                # HPC sites use one key for the bastion and the login node: the
                # explicit key is offered to the jump hosts too, after their own.
                fallback_keys=key_files,
            )
        )
    return tuple(jumps)


def reach_settings(
    host: str,
    user: Optional[str],
    port: Optional[int],
    key_filename: Union[None, str, Sequence[str]],
    known_hosts: Optional[str],
    login_shell: bool,
) -> Dict[str, Any]:
    """The settings (``Settings`` names) that open this connection again from a new
    shell: the host as given - an alias is resolved again through the ssh config -
    and what was given explicitly beside it, paths made absolute.  Paths only, never
    a key's contents or a password."""
    reach: Dict[str, Any] = {"ssh_host": host}
    if user:
        reach["ssh_user"] = user
    if port:
        reach["ssh_port"] = int(port)
    keys = [os.path.abspath(key) for key in _key_files(key_filename)]
    if keys:
        reach["ssh_key"] = keys[0] if len(keys) == 1 else keys
    if known_hosts:
        reach["ssh_known_hosts"] = os.path.abspath(os.path.expanduser(known_hosts))
    if login_shell:
        reach["ssh_login_shell"] = True
    return reach
