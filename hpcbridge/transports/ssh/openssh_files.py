"""The OpenSSH backend's file operations: each one remote shell script (built in
``openssh_argv``, every path quoted) through the master, bytes on its stdin or stdout;
writes go to a temporary name, are checked for size and renamed over."""

from __future__ import annotations

import os
import posixpath
import uuid
from typing import Dict, Mapping, Optional, Sequence

from ..base import CommandResult
from . import openssh_argv as argv_of
from .executor import exact_mtime_commands, parse_mtimes
from .openssh_spawn import Done


class OpenSSHFiles:
    """The executor's file operations (paths as the remote sees them); ``OpenSSHExecutor``
    is one, giving ``_ssh`` and ``run``."""

    host: str
    default_timeout: Optional[float]
    _home: Optional[str] = None

    def _ssh(
        self,
        command: str,
        words: Sequence[str],
        budget: Optional[float],
        idempotent: bool,
        *,
        data: Optional[bytes] = None,
        source: Optional[str] = None,
    ) -> Done:
        raise NotImplementedError  # the executor's

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        input: Optional[str] = None,
        idempotent: bool = True,
    ) -> CommandResult:
        raise NotImplementedError  # the executor's

    def _remote(
        self, script: str, what: str, *, data: Optional[bytes] = None, source: Optional[str] = None
    ) -> Done:
        """A file operation's shell ``script`` (idempotent: safe to send again)."""
        return self._ssh(script, [what], self.default_timeout, True, data=data, source=source)

    def put(self, local_path: str, remote_path: str, mode: Optional[int] = None) -> None:
        """Upload to a temporary name, check the size, rename over ``remote_path``."""
        status = os.stat(local_path)  # FileNotFoundError for a local miss
        final_mode = status.st_mode & 0o777 if mode is None else mode
        script = argv_of.write_script(remote_path, _token(), final_mode, status.st_size)
        done = self._remote(script, f"put {remote_path}", source=local_path)
        if done.returncode == argv_of.MISSING:
            raise FileNotFoundError(2, "No such folder", remote_path)
        if done.returncode != 0:
            raise OSError(f"put {remote_path} on {self.host} failed: {done.text()}")

    def write_text(self, path: str, text: str, mode: Optional[int] = None) -> None:
        data = text.encode("utf-8")
        script = argv_of.write_script(path, _token(), 0o644 if mode is None else mode, len(data))
        done = self._remote(script, f"write {path}", data=data)
        if done.returncode == argv_of.MISSING:
            raise FileNotFoundError(2, "No such folder", path)
        if done.returncode != 0:
            raise OSError(f"write {path} on {self.host} failed: {done.text()}")

    def _fetch(self, path: str) -> Done:
        done = self._remote(argv_of.read_script(path), f"read {path}")
        if done.returncode == argv_of.MISSING:
            raise FileNotFoundError(2, "No such file", path)
        if done.returncode == argv_of.DIRECTORY:
            raise IsADirectoryError(21, "is a directory", path)
        if done.returncode != 0:
            raise OSError(f"read {path} on {self.host} failed: {done.text()}")
        return done

    def get(self, remote_path: str, local_path: str) -> None:
        """Download, then rename over ``local_path`` (with the remote file's mode)."""
        done = self._fetch(remote_path)
        temporary = f"{local_path}.hpcbridge-{_token()}.tmp"
        try:
            with open(temporary, "wb") as sink:
                sink.write(done.stdout)
            mode = argv_of.parse_mode(done.stderr.decode("utf-8", "replace"))
            if mode is not None:
                os.chmod(temporary, mode & 0o777)
            os.replace(temporary, local_path)
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise

    def read_text(self, path: str) -> str:
        return self._fetch(path).stdout.decode("utf-8", "replace")

    def mkdir(self, path: str, mode: int = 0o700) -> None:
        """``mkdir -p``: create ``path`` and missing parents (each with ``mode``)."""
        done = self._remote(argv_of.mkdir_script(path, mode), f"mkdir {path}")
        if done.returncode != 0:
            message = done.text()
            if "exists" in message.lower() or "Not a directory" in message:
                raise FileExistsError(17, "exists and is not a directory", path)
            raise OSError(f"mkdir {path} on {self.host} failed: {message}")

    def exists(self, path: str) -> bool:
        return self._remote(argv_of.exists_script(path), f"stat {path}").returncode == 0

    def stat_many(self, paths: Sequence[str]) -> Dict[str, float]:
        """One ``stat`` per 500 paths: the times to the nanosecond (GNU coreutils)."""
        found: Dict[str, float] = {}
        for words in exact_mtime_commands(paths):
            result = self.run(words, env={"LC_ALL": "C"})
            found.update(parse_mtimes(result.stdout, words[4:], exact=False))
        return found

    def abspath(self, path: str) -> str:
        """``path`` made absolute on the remote side (relative and ``~/`` against home)."""
        path = str(path)
        if path.startswith("/"):
            return posixpath.normpath(path)
        if self._home is None:
            done = self._remote('printf %s "$HOME"', "home")
            self._home = done.stdout.decode("utf-8", "replace")
        if path == "~":
            return self._home
        if path.startswith("~/"):
            path = path[2:]
        return posixpath.normpath(posixpath.join(self._home, path))


def _token() -> str:
    return uuid.uuid4().hex[:12]
