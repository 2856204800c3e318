"""File operations over SFTP (one client per connection, under its lock): writes that
replace atomically, ``mkdir -p``; retried while the connection is what fails."""

from __future__ import annotations

import errno
import logging
import os
import posixpath
import socket
import stat
import tempfile
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, TypeVar

from ...errors import TransportError
from .connect import Connection, SharedConnection, close_quietly, describe, is_connection_error

log = logging.getLogger("hpcbridge.ssh")

T = TypeVar("T")

_UPLOAD_CHUNK = 32768
#: the shortest time without an SFTP answer after which the link counts as stalled
_MIN_STALL_TIMEOUT = 60.0


class RemoteFiles:
    """The executor's file operations over SFTP (paths as the remote sees them), on the
    connection of ``_connections``; ``SSHExecutor`` is one."""

    _connections: SharedConnection
    _home: Optional[str] = None

    def call(self, what: str, operation: Callable[[Any], T]) -> T:
        """``operation(sftp)``, retried while the connection is what fails."""
        failures = 0
        while True:
            conn = self._connections.get()
            error: Optional[BaseException] = None
            with conn.sftp_lock:
                try:
                    return operation(self._client(conn))
                except Exception as exc:
                    if not is_connection_error(exc, conn.transport):
                        raise
                    error = exc
                    stale, conn.sftp = conn.sftp, None
                    close_quietly(stale)
            failures += 1
            if isinstance(error, socket.timeout) or not conn.alive():
                self._connections.invalidate(conn)
            where = self._connections.label
            if failures >= self._connections.options.max_reconnect_attempts:
                raise TransportError(f"{what} on {where} failed: {describe(error)}") from error
            log.info("%s on %s failed (%s); retrying", what, where, describe(error))

    def _client(self, conn: Connection) -> Any:
        """The connection's SFTP client, opened now if it has none or its channel closed."""
        sftp = conn.sftp
        channel = sftp.get_channel() if sftp is not None else None
        if sftp is None or channel is None or channel.closed:
            sftp = conn.sftp = conn.transport.open_sftp_client()
            # No answer for this long = a stalled link (socket.timeout).
            opened = sftp.get_channel()
            if opened is not None:
                timeout = self._connections.options.default_timeout or 0.0
                opened.settimeout(max(_MIN_STALL_TIMEOUT, timeout))
        return sftp

    def _home_dir(self, sftp: Any) -> str:
        if self._home is None:
            self._home = sftp.normalize(".")
        return self._home

    def _path(self, sftp: Any, path: str) -> str:
        """``path`` with a leading ``~`` or ``~/`` replaced by the remote home."""
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

        return self.call("abspath", operation)

    def put(self, local_path: str, remote_path: str, mode: Optional[int] = None) -> None:
        """Upload to a temporary name, check the size, rename over ``remote_path``."""
        local_mode = os.stat(local_path).st_mode & 0o777  # FileNotFoundError for a local miss
        final_mode = local_mode if mode is None else mode

        def write(sink: Any) -> int:
            size = 0
            with open(local_path, "rb") as source:
                while True:
                    chunk = source.read(_UPLOAD_CHUNK)
                    if not chunk:
                        break
                    sink.write(chunk)
                    size += len(chunk)
            return size

        self.call(f"put {remote_path}", self._replacing(remote_path, final_mode, write))

    def get(self, remote_path: str, local_path: str) -> None:
        """Download to a temporary local name, then rename over ``local_path``."""
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

        self.call(f"get {remote_path}", operation)

    def mkdir(self, path: str, mode: int = 0o700) -> None:
        """``mkdir -p``: create ``path`` and missing parents (each with ``mode``)."""

        def operation(sftp: Any) -> None:
            target = posixpath.normpath(self._path(sftp, path))
            for directory in reversed(_missing_directories(sftp, target)):
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

        self.call(f"mkdir {path}", operation)

    def read_text(self, path: str) -> str:
        def operation(sftp: Any) -> str:
            with sftp.open(self._path(sftp, path), "rb") as handle:
                handle.prefetch()
                data = handle.read()
            return bytes(data).decode("utf-8", "replace")

        return self.call(f"read {path}", operation)

    def write_text(self, path: str, text: str, mode: Optional[int] = None) -> None:
        data = text.encode("utf-8")

        def write(sink: Any) -> None:
            sink.write(data)

        self.call(f"write {path}", self._replacing(path, 0o644 if mode is None else mode, write))

    def exists(self, path: str) -> bool:
        def operation(sftp: Any) -> bool:
            try:
                sftp.stat(self._path(sftp, path))
            except (FileNotFoundError, PermissionError):
                return False
            return True

        return self.call(f"stat {path}", operation)

    def _listed_mtimes(self, paths: Sequence[str]) -> Dict[str, float]:
        """One ``listdir_attr`` per folder: the mtime (whole seconds) of each path found."""
        folders: Dict[str, List[str]] = {}
        for path in paths:
            folders.setdefault(posixpath.dirname(path), []).append(path)

        def operation(sftp: Any) -> Dict[str, float]:
            found: Dict[str, float] = {}
            for folder, wanted in folders.items():
                try:
                    listing = sftp.listdir_attr(self._path(sftp, folder))
                except (FileNotFoundError, PermissionError):
                    continue
                times = {entry.filename: entry.st_mtime for entry in listing}
                for path in wanted:
                    mtime = times.get(posixpath.basename(path))
                    if mtime is not None:
                        found[path] = float(mtime)
            return found

        return self.call(f"list {len(folders)} folder(s)", operation)

    def _replacing(
        self, path: str, mode: int, write: Callable[[Any], Optional[int]]
    ) -> Callable[[Any], None]:
        """An operation that lets ``write(sink)`` fill a new temporary file created with
        ``mode``, then renames it over ``path``; the temporary file goes on any failure.

        When ``write`` returns a byte count, the closed file must have that size.
        """

        def operation(sftp: Any) -> None:
            target = self._path(sftp, path)
            temporary = _temporary_name(target)
            try:
                with sftp.open(temporary, "wbx") as sink:
                    sink.chmod(mode)  # before any byte is written
                    sink.set_pipelined(True)
                    size = write(sink)
                if size is not None:
                    written = sftp.stat(temporary).st_size
                    if written != size:
                        raise OSError(f"size mismatch after upload: {written} != {size}")
                _rename(sftp, temporary, target)
            except BaseException:
                _remove_quietly(sftp, temporary)
                raise

        return operation


def _missing_directories(sftp: Any, target: str) -> List[str]:
    """``target`` and its parents that do not exist yet, deepest first."""
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
    return missing


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
