"""Submit a training job and bring its artifact back: the plain functions.

These are what the Prefect tasks in :mod:`hpcbridge.integrations.prefect`
wrap; they need neither Prefect nor MLflow::

    from hpcbridge.integrations.pipeline import submit, wait_and_fetch

    job_id, remote_model = submit("run.sh", resources={"ntasks": 1, "time": "10"},
                                  arguments=["--dummy"])
    state, local_model = wait_and_fetch(job_id, remote_model, poll_interval=5)

The scheduler and transport come from the settings (``HPCBRIDGE_SCHEDULER``,
``HPCBRIDGE_TRANSPORT``, ... or the source system's ``EXAMLOPS_HPC_*``), so the
same code runs the job on the embedded mock scheduler (a real local process),
on Slurm or on Flux, locally or over SSH.  The adapter records every job in
the job store.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import shlex
import tempfile
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

from ..config import Settings
from ..engine.adapter import SchedulerAdapter
from ..errors import SchedulerAdapterError, TransportError
from ..factory import adapter_from_settings
from ..model import JobState, JobStatus

log = logging.getLogger("hpcbridge")

#: ``settings=`` accepts a :class:`Settings`, or a mapping of overrides applied
#: over the environment (``{"scheduler": "slurm", "transport": "ssh"}``), or None.
SettingsLike = Union[None, Settings, Mapping[str, Any]]

#: what a job whose command was given as text is staged as
COMMAND_SCRIPT_NAME = "command.sh"

#: how many lines of the job's log a :class:`JobFailedError` carries
LOG_TAIL_LINES = 40


class JobFailedError(SchedulerAdapterError):
    """The job ended, but not COMPLETED (FAILED, CANCELLED or TIMEOUT).

    ``state``, ``exit_code``, ``reason`` and ``log_tail`` (the last lines of the
    job's output) say what happened; ``status`` is the full :class:`JobStatus`.
    """

    def __init__(
        self,
        message: str,
        *,
        job_id: str = "",
        scheduler: str = "",
        state: Optional[JobState] = None,
        exit_code: Optional[int] = None,
        reason: str = "",
        log_path: str = "",
        log_tail: str = "",
        status: Optional[JobStatus] = None,
    ) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.scheduler = scheduler
        self.state = state
        self.exit_code = exit_code
        self.reason = reason
        self.log_path = log_path
        self.log_tail = log_tail
        self.status = status

    @classmethod
    def from_status(
        cls, status: JobStatus, scheduler: str = "", log_path: str = "", log_tail: str = ""
    ) -> JobFailedError:
        what = f"{scheduler} job {status.job_id}" if scheduler else f"job {status.job_id}"
        details = [f"exit code {status.exit_code if status.exit_code is not None else 'unknown'}"]
        if status.native_state and status.native_state != status.state.value:
            details.append(f"scheduler state {status.native_state}")
        if status.reason:
            details.append(status.reason)
        message = f"{what} ended {status.state.value} ({'; '.join(details)})"
        if log_tail.strip():
            where = f" ({log_path})" if log_path else ""
            message += f"\n--- last lines of its log{where} ---\n{log_tail.rstrip()}"
        elif log_path:
            message += f"\n(its log {log_path} is empty or unreadable)"
        return cls(
            message,
            job_id=status.job_id,
            scheduler=scheduler,
            state=status.state,
            exit_code=status.exit_code,
            reason=status.reason,
            log_path=log_path,
            log_tail=log_tail,
            status=status,
        )

    def __reduce__(self) -> Any:
        # Picklable with its details (Prefect keeps a task's exception in its state).
        return (self.__class__, (str(self.args[0]) if self.args else "",), self.__dict__)


class ArtifactNotFoundError(SchedulerAdapterError):
    """The job COMPLETED but the artifact it should have written is not there."""


# -- settings and adapters ---------------------------------------------------------


def resolve_settings(settings: SettingsLike = None) -> Settings:
    """A :class:`Settings` from a Settings, a mapping of overrides, or the environment."""
    if isinstance(settings, Settings):
        return settings
    return Settings.from_env(**dict(settings or {}))


@contextlib.contextmanager
def _adapter(
    adapter: Optional[SchedulerAdapter], settings: SettingsLike
) -> Iterator[SchedulerAdapter]:
    """The given adapter, or a new one from the settings (closed afterwards)."""
    if adapter is not None:
        if settings is not None:
            raise ValueError("pass either adapter= or settings=, not both")
        yield adapter
        return
    created = adapter_from_settings(resolve_settings(settings))
    try:
        yield created
    finally:
        created.close()


# -- submission ----------------------------------------------------------------------


def command_script_text(command: Union[str, Sequence[str]]) -> str:
    """A job script that runs ``command`` with ``/bin/sh -c``.

    ``command`` is a shell command line (a string, run as written) or an argv
    list (each word quoted, so nothing in it is interpreted by the shell).
    The job's arguments reach the command as ``$1``, ``$2``, ...
    """
    text = command if isinstance(command, str) else shlex.join(str(word) for word in command)
    if not text.strip():
        raise ValueError("the command is empty")
    if "\0" in text:
        raise ValueError("the command contains a NUL byte")
    return (
        "#!/bin/sh\n"
        "# Generated by hpcbridge.integrations: runs one command line.\n"
        f'exec /bin/sh -c {shlex.quote(text)} hpcbridge-command "$@"\n'
    )


@contextlib.contextmanager
def _job_script(
    script: Union[None, str, os.PathLike], command: Union[None, str, Sequence[str]]
) -> Iterator[str]:
    if (script is None) == (command is None):
        raise ValueError("pass exactly one of script= (a path) or command= (a command line)")
    if script is not None:
        yield os.fspath(script)
        return
    assert command is not None
    text = command_script_text(command)
    with tempfile.TemporaryDirectory(prefix="hpcbridge-command-") as folder:
        path = os.path.join(folder, COMMAND_SCRIPT_NAME)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(path, 0o700)
        yield path  # submit_job copies it into the job's folder: the temporary can go


def _artifact_name(artifact: Union[str, os.PathLike]) -> str:
    name = os.fspath(artifact)
    if not name or name.endswith("/"):
        raise ValueError(f"artifact must name a file, not {name!r}")
    return name


def submit(
    script: Union[None, str, os.PathLike] = None,
    command: Union[None, str, Sequence[str]] = None,
    resources: Optional[Mapping[str, Any]] = None,
    remote_dir: Optional[str] = None,
    artifact: Union[str, os.PathLike] = "model.pkl",
    arguments: Sequence[Any] = (),
    environment: Optional[Mapping[str, str]] = None,
    depends_on: Union[None, str, int, Sequence[Any]] = None,
    *,
    adapter: Optional[SchedulerAdapter] = None,
    settings: SettingsLike = None,
) -> Tuple[str, str]:
    """Submit a job script (or a command line); return ``(job_id, remote artifact path)``.

    The artifact path is ``<remote_dir>/<artifact>``: where the job, which runs
    in its folder ``remote_dir`` (made up when not given), is expected to write
    it.  When the ``REMOTE_REPO`` setting is set it reaches the job as
    ``$HPCBRIDGE_REMOTE_REPO``.  Raises what ``submit_job`` raises
    (``ResourceError``, ``JobSubmissionError``, ...), before or at submission.
    """
    if (script is None) == (command is None):
        raise ValueError("pass exactly one of script= (a path) or command= (a command line)")
    if isinstance(arguments, (str, bytes)):
        raise ValueError("arguments must be a list of strings, not one string")
    if command is not None:
        command_script_text(command)  # a bad command fails before anything is set up
    name = _artifact_name(artifact)
    with _adapter(adapter, settings) as active:
        # (the adapter adds $HPCBRIDGE_REMOTE_REPO when that setting is set)
        job_environment: Dict[str, str] = {k: str(v) for k, v in (environment or {}).items()}
        with _job_script(script, command) as path:
            job_id = active.submit_job(
                path,
                resources=resources,
                remote_dir=remote_dir,
                depends_on=depends_on,
                arguments=[str(argument) for argument in arguments],
                environment=job_environment,
            )
        record = active.store.get(job_id, active.scheduler_name, active.host_label)
        if record is None or not record.remote_dir:  # pragma: no cover - the adapter records
            raise SchedulerAdapterError(f"{active.scheduler_name} job {job_id} was not recorded")
        return job_id, posixpath.join(record.remote_dir, name)


# -- waiting and fetching ------------------------------------------------------------


def log_tail(
    adapter: SchedulerAdapter, job_id: str, lines: int = LOG_TAIL_LINES
) -> Tuple[str, str]:
    """``(log path, its last lines)``; empty strings where they cannot be read."""
    try:
        path = adapter.log_path(job_id)
    except SchedulerAdapterError:
        return "", ""
    try:
        text = adapter.get_job_logs(job_id)
    except (SchedulerAdapterError, OSError) as exc:
        log.warning("cannot read the log of job %s: %s", job_id, exc)
        return path, ""
    tail = "\n".join(text.splitlines()[-lines:])
    return path, tail[-8000:]


def fetch(
    adapter: SchedulerAdapter, remote_path: str, local_dir: Union[None, str, os.PathLike] = None
) -> str:
    """Copy ``remote_path`` into ``local_dir`` (a new temporary folder when None).

    A plain copy with the local transport, SFTP with SSH.  Returns the local path.
    """
    name = posixpath.basename(remote_path)
    if not name:
        raise ValueError(f"not a file path: {remote_path!r}")
    if local_dir is None:
        folder = tempfile.mkdtemp(prefix="hpcbridge-artifact-")
    else:
        folder = os.fspath(local_dir)
        os.makedirs(folder, exist_ok=True)
    local_path = os.path.join(os.path.abspath(folder), name)
    missing = ArtifactNotFoundError(
        f"the job ended COMPLETED but wrote no {remote_path} "
        f"(on {adapter.executor.host or adapter.executor.kind})"
    )
    try:
        if not adapter.executor.exists(remote_path):
            raise missing
        adapter.executor.get(remote_path, local_path)
    except FileNotFoundError:
        raise missing from None
    except IsADirectoryError:
        raise ArtifactNotFoundError(f"{remote_path} is a folder, not a file") from None
    except OSError as exc:
        raise TransportError(f"cannot fetch {remote_path}: {exc}") from exc
    return local_path


def wait_and_fetch(
    job_id: Any,
    artifact_path: str,
    local_dir: Union[None, str, os.PathLike] = None,
    poll_interval: float = 10.0,
    timeout: Optional[float] = None,
    *,
    adapter: Optional[SchedulerAdapter] = None,
    settings: SettingsLike = None,
    on_change: Optional[Callable[[JobStatus], None]] = None,
) -> Tuple[JobState, str]:
    """Wait for the job, then fetch its artifact; return ``(state, local artifact path)``.

    Raises :class:`JobFailedError` (with the state, exit code and the tail of the
    job's log) unless the job ended COMPLETED, :class:`ArtifactNotFoundError` when
    it COMPLETED without writing the artifact, and what ``wait`` raises
    (``JobTimeoutError`` past ``timeout`` seconds, ``JobNotFoundError``).
    """
    with _adapter(adapter, settings) as active:
        status = active.wait(
            job_id, poll_interval=poll_interval, timeout=timeout, on_change=on_change
        )
        if status.state is not JobState.COMPLETED:
            path, tail = log_tail(active, status.job_id)
            raise JobFailedError.from_status(status, active.scheduler_name, path, tail)
        return status.state, fetch(active, artifact_path, local_dir)


__all__ = [
    "ArtifactNotFoundError",
    "JobFailedError",
    "SettingsLike",
    "command_script_text",
    "fetch",
    "log_tail",
    "resolve_settings",
    "submit",
    "wait_and_fetch",
]
