"""Host-key checking for the SSH transport: refuse unknown keys, or accept-new them."""

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
