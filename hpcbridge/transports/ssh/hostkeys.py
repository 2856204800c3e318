"""Host keys: an unknown one refused (or, asked to, accepted and added to known_hosts),
the known_hosts files read, a changed key said plainly."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import threading
from typing import Any

from ...errors import HostKeyError
from .config import Hop

log = logging.getLogger("hpcbridge.ssh")

#: one lock for appending to known_hosts files (accept-new), process-wide
_KNOWN_HOSTS_LOCK = threading.Lock()


def fingerprint(key: Any) -> str:
    """OpenSSH's ``SHA256:...`` fingerprint of a paramiko key."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


class HostKeyPolicy:
    """paramiko's missing-host-key hook: refuse unknown keys, or accept-new them."""

    def __init__(self, hop: Hop, accept_new: bool) -> None:
        self.hop = hop
        self.accept_new = accept_new

    def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
        name = self.hop.known_hosts_name
        target_file = self.hop.known_hosts_files[0]
        if not self.accept_new:
            raise HostKeyError(
                f"host key for {name} ({key.get_name()} {fingerprint(key)}) is not known "
                f"(looked in {', '.join(self.hop.known_hosts_files)}). Verify the fingerprint, "
                f"then add it: ssh-keyscan -p {self.hop.port} {self.hop.hostname} >> "
                f"{target_file} -- or set HPCBRIDGE_SSH_ACCEPT_NEW_HOST_KEYS=1 to accept "
                f"new host keys on first use"
            )
        line = f"{name} {key.get_name()} {key.get_base64()}\n"
        with _KNOWN_HOSTS_LOCK:
            directory = os.path.dirname(target_file)
            if directory and not os.path.isdir(directory):
                os.makedirs(directory, mode=0o700, exist_ok=True)
            needs_newline = False
            if os.path.exists(target_file) and os.path.getsize(target_file) > 0:
                with open(target_file, "rb") as handle:
                    handle.seek(-1, os.SEEK_END)
                    needs_newline = handle.read(1) != b"\n"
            with open(target_file, "a", encoding="ascii") as handle:
                handle.write(("\n" if needs_newline else "") + line)
        client.get_host_keys().add(hostname, key.get_name(), key)
        log.warning(
            "accepted new host key for %s (%s %s), added to %s",
            name,
            key.get_name(),
            fingerprint(key),
            target_file,
        )


def load_known_hosts(client: Any, hop: Hop) -> None:
    """The keys of ``hop``'s known_hosts files into ``client``; ``HostKeyError`` when one
    cannot be read."""
    for path in (*hop.global_known_hosts_files, *hop.known_hosts_files):
        if path and path != os.devnull and os.path.isfile(path):
            try:
                client.load_system_host_keys(path)
            except Exception as exc:
                raise HostKeyError(f"cannot read known_hosts file {path}: {exc}") from exc


def changed_host_key(hop: Hop, exc: Any) -> HostKeyError:
    """The error of paramiko's ``BadHostKeyException`` ``exc``: both keys, what to do."""
    return HostKeyError(
        f"HOST KEY CHANGED for {hop.known_hosts_name}: the server presented "
        f"{exc.key.get_name()} {fingerprint(exc.key)} but known_hosts "
        f"({', '.join(hop.known_hosts_files)}) has {exc.expected_key.get_name()} "
        f"{fingerprint(exc.expected_key)}. This may be a man-in-the-middle attack "
        f"or a reinstalled server; nothing was run. If the change is expected, "
        f"remove the old entry: ssh-keygen -R '{hop.known_hosts_name}' "
        f"-f {hop.known_hosts_files[0]}"
    )
