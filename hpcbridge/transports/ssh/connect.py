"""Opening one SSH connection: log in to each hop of the chain, target last.

One attempt, no retrying (that is :mod:`.ssh_reconnect`'s job).  Errors come
out as :class:`TransportError`, wrapped in :class:`Permanent` when retrying
cannot help (a changed host key, a refused login, a name that does not resolve
on the first connect).
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List, Optional

from ...errors import HostKeyError, TransportError
from .channel import no_delay
from .config import Hop, Target
from .failures import Permanent, close_quietly, describe, import_paramiko
from .hostkeys import HostKeyPolicy, fingerprint

if TYPE_CHECKING:  # pragma: no cover
    import paramiko


@dataclass
class SSHOptions:
    """The tunables of one executor, shared by its connection, commands and files."""

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
    _load_known_hosts(client, hop)
    client.set_missing_host_key_policy(HostKeyPolicy(hop, options.accept_new_host_keys))
    agent = not hop.identities_only
    timeout = options.connect_timeout
    try:
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


def _load_known_hosts(client: Any, hop: Hop) -> None:
    for path in (*hop.global_known_hosts_files, *hop.known_hosts_files):
        if path and path != os.devnull and os.path.isfile(path):
            try:
                client.load_system_host_keys(path)
            except Exception as exc:
                client.close()
                raise Permanent(
                    HostKeyError(f"cannot read known_hosts file {path}: {exc}")
                ) from exc


def _login_error(
    paramiko: Any, exc: Exception, hop: Hop, where: str, agent: bool, first: bool
) -> Exception:
    """The error to raise for a failed login to ``hop``: permanent or worth a retry."""
    if isinstance(exc, HostKeyError):
        return Permanent(exc)
    if isinstance(exc, paramiko.BadHostKeyException):
        return Permanent(_changed_host_key(hop, exc))
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
    if isinstance(exc, socket.gaierror):
        error = TransportError(f"cannot resolve {where}: {exc.strerror or exc}")
        return Permanent(error) if first else error
    return TransportError(f"cannot connect to {where}: {describe(exc)}")


def _changed_host_key(hop: Hop, exc: Any) -> HostKeyError:
    return HostKeyError(
        f"HOST KEY CHANGED for {hop.known_hosts_name}: the server presented "
        f"{exc.key.get_name()} {fingerprint(exc.key)} but known_hosts "
        f"({', '.join(hop.known_hosts_files)}) has {exc.expected_key.get_name()} "
        f"{fingerprint(exc.expected_key)}. This may be a man-in-the-middle attack "
        f"or a reinstalled server; nothing was run. If the change is expected, "
        f"remove the old entry: ssh-keygen -R '{hop.known_hosts_name}' "
        f"-f {hop.known_hosts_files[0]}"
    )
