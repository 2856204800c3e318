"""The executor protocol: run an argv, move files.  Knows nothing about jobs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, runtime_checkable


@dataclass(frozen=True)
class CommandResult:
    """The outcome of one command."""

    argv: List[str]
    returncode: int
    stdout: str
    stderr: str
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def message(self) -> str:
        """The command's own words about a failure: stderr, else stdout."""
        return (self.stderr.strip() or self.stdout.strip())[:2000]


@runtime_checkable
class Executor(Protocol):
    """Runs commands and moves files where the scheduler is.

    ``run`` takes an argv list, never a shell string.  ``idempotent=False``
    marks a command (a submission) that must not be retried when the
    connection drops mid-way.
    """

    #: the transport: "local" or "ssh"
    kind: str
    #: the host's label in job records and logs (SSH: the resolved ``user@host:port``)
    host: str
    #: the settings that reach this host again from a new shell, kept with each job
    #: record (SSH: the host as given - an ssh-config alias stays one - and the user,
    #: port, key and known-hosts files given explicitly: paths, never a secret);
    #: empty for the local transport
    reach: Mapping[str, Any]
    #: True when commands run on this machine and paths are this machine's paths
    #: (a file written with ``open()`` here is the file the commands see)
    is_local: bool

    @property
    def env(self) -> Mapping[str, str]:
        """Variables every command gets on top of its own (``HPCBRIDGE_COMMAND_ENV``)."""
        ...

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        input: Optional[str] = None,
        idempotent: bool = True,
    ) -> CommandResult: ...

    def put(self, local_path: str, remote_path: str, mode: Optional[int] = None) -> None: ...

    def get(self, remote_path: str, local_path: str) -> None: ...

    def mkdir(self, path: str, mode: int = 0o700) -> None: ...

    def read_text(self, path: str) -> str: ...

    def write_text(self, path: str, text: str, mode: Optional[int] = None) -> None: ...

    def exists(self, path: str) -> bool: ...

    def stat_many(self, paths: Sequence[str]) -> Dict[str, float]:
        """The modification time (epoch seconds, to the nanosecond where the host says
        so) of each path that exists; over SSH one listing per folder, so that many jobs'
        exit-code files cost one round trip, and one ``stat`` for the paths it found
        (SFTP's times are whole seconds)."""
        ...

    def abspath(self, path: str) -> str:
        """``path`` made absolute on the executor's side (``~`` and relative paths)."""
        ...

    def close(self) -> None: ...
