"""Run commands with ``subprocess`` and move files on a shared filesystem."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from types import MappingProxyType
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from ..errors import JobTimeoutError, TransportError
from .base import CommandResult


class LocalExecutor:
    """Executor for code that runs where the scheduler's commands are (login node, allocation)."""

    kind = "local"
    #: commands run on this machine; paths are this machine's paths
    is_local = True
    #: nothing to keep: this machine is reached as it is
    reach: Mapping[str, Any] = MappingProxyType({})

    def __init__(
        self, default_timeout: Optional[float] = 60.0, env: Optional[Mapping[str, str]] = None
    ) -> None:
        self.default_timeout = default_timeout
        #: environment added to every command (``HPCBRIDGE_COMMAND_ENV``)
        self.env: Dict[str, str] = dict(env or {})
        self.host = os.uname().nodename

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        input: Optional[str] = None,
        idempotent: bool = True,
    ) -> CommandResult:
        argv = [str(arg) for arg in argv]
        budget = self.default_timeout if timeout is None else timeout
        full_env = None
        if env or self.env:
            full_env = {**os.environ, **self.env, **(env or {})}
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=full_env,
                cwd=cwd,
                text=True,
                start_new_session=True,  # so a timeout can end the whole group
            )
        except FileNotFoundError:
            return CommandResult(argv, 127, "", f"{argv[0]}: command not found", 0.0)
        except OSError as exc:
            raise TransportError(f"cannot run {argv[0]}: {exc}") from exc
        try:
            stdout, stderr = process.communicate(input=input, timeout=budget)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise JobTimeoutError(
                f"{argv[0]} did not finish within {budget:g} s (command: {' '.join(argv)[:200]})"
            ) from None
        return CommandResult(argv, process.returncode, stdout, stderr, time.monotonic() - started)

    def put(self, local_path: str, remote_path: str, mode: Optional[int] = None) -> None:
        if _same_file(local_path, remote_path):
            if mode is not None:
                os.chmod(remote_path, mode)
            return
        final_mode = mode if mode is not None else os.stat(local_path).st_mode & 0o777
        _replace(remote_path, final_mode, lambda temporary: shutil.copyfile(local_path, temporary))

    def get(self, remote_path: str, local_path: str) -> None:
        if not os.path.exists(remote_path):
            raise FileNotFoundError(remote_path)
        if _same_file(remote_path, local_path):
            return
        self.put(remote_path, local_path)

    def mkdir(self, path: str, mode: int = 0o700) -> None:
        os.makedirs(path, mode=mode, exist_ok=True)

    def read_text(self, path: str) -> str:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def write_text(self, path: str, text: str, mode: Optional[int] = None) -> None:
        def write(temporary: str) -> None:
            with open(temporary, "w", encoding="utf-8") as stream:
                stream.write(text)

        _replace(path, 0o644 if mode is None else mode, write)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def stat_many(self, paths: Sequence[str]) -> Dict[str, float]:
        found: Dict[str, float] = {}
        for path in paths:
            try:
                found[path] = os.stat(path).st_mtime
            except OSError:
                continue
        return found

    def abspath(self, path: str) -> str:
        return os.path.abspath(os.path.expanduser(path))

    def close(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return "LocalExecutor()"


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.communicate()


def _same_file(first: str, second: str) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def _replace(path: str, mode: int, write: Callable[[str], object]) -> None:
    """``write(temporary)`` fills a new file beside ``path``, given ``mode`` and renamed
    over ``path``; the temporary file goes on any failure."""
    handle, temporary = tempfile.mkstemp(
        prefix=".hpcbridge-", dir=os.path.dirname(os.path.abspath(path))
    )
    os.close(handle)
    try:
        write(temporary)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        _remove_quietly(temporary)
        raise


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
