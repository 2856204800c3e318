"""The mock scheduler: runs jobs on this machine as detached processes, under a
supervisor per submission (``mock_runner``) that outlives the submitter; concurrency
bounded by the cores."""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..engine.adapter import SchedulerAdapter
from ..engine.driver import (
    Capabilities,
    DriverChoice,
    OpenDriver,
    PartialSubmissionError,
    Planned,
    SubmitBatch,
    Submitted,
    Waiter,
)
from ..engine.jobscript import TASK_INDEX_VARIABLE
from ..engine.tracking import exit_code_from_file
from ..errors import ConfigurationError, JobSubmissionError, LimitRefusedError
from ..model import JobState, JobStatus
from ..store.location import machine_folder
from ..store.processes import pid_alive
from .mock_runner import now_iso, read_json, write_json

#: how many jobs one mock submission may hold: there is no array limit
_MAX_BATCH = 1_000_000
#: how many jobs one supervisor runs (their folders are its arguments)
JOBS_PER_SUPERVISOR = 200


class MockDriver:
    """Starts a supervisor per submission (of up to ``JOBS_PER_SUPERVISOR`` jobs) and
    reads the state files it writes for each job."""

    name = "mock"
    capabilities = Capabilities(events=False, arrays=False, dependencies=True)

    def __init__(self, root: Path, slots: int) -> None:
        self.root = root
        self.slots = slots

    def _next_id(self) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "counter", "a+", encoding="ascii") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # unique across processes
            handle.seek(0)
            current = int(handle.read().strip() or "0") + 1
            handle.seek(0)
            handle.truncate()
            handle.write(str(current))
        return str(current)

    def _job_dir(self, job_id: str) -> Path:
        return self.root / "jobs" / job_id

    def _runner_argv(self, job_dirs: List[str]) -> List[str]:
        return [sys.executable, "-m", "hpcbridge.schedulers.mock_runner", "--detach", *job_dirs]

    def plan(self, batch: SubmitBatch) -> Planned:
        return Planned(batch)

    def describe(self, planned: Planned) -> str:
        batch = planned.batch
        argv = self._runner_argv([str(self._job_dir("<id>"))])
        time_limit = batch.resources.time
        limit = f" time limit {time_limit:g}s" if time_limit else ""
        after = f" after {','.join(batch.depends_on)}" if batch.depends_on else ""
        name = f" as {shlex.quote(batch.job.name_of(0))}"  # each job its own (no arrays)
        return shlex.join(argv) + f"  # runs {batch.job.wrapper_path}{name}{limit}{after}"

    def submit_many(self, planned: Planned) -> List[Submitted]:
        batch = planned.batch
        submitted: List[Submitted] = []
        for first in range(0, batch.count, JOBS_PER_SUPERVISOR):
            indices = range(first, min(first + JOBS_PER_SUPERVISOR, batch.count))
            try:
                submitted += self._start(batch, indices)
            except JobSubmissionError as exc:
                if not submitted:
                    raise
                failures = [str(exc)] * (batch.count - len(submitted))
                limited = isinstance(exc, LimitRefusedError)
                raise PartialSubmissionError(submitted, failures, batch.count, limited) from exc
        return submitted

    def _start(self, batch: SubmitBatch, indices: Sequence[int]) -> List[Submitted]:
        """These jobs of the batch, under one supervisor; none of them if it cannot start."""
        made = [self._prepare(batch, index) for index in indices]
        job_dirs = [self._job_dir(submitted.job_id) for submitted in made]
        try:
            self._launch(job_dirs)
        except JobSubmissionError as exc:
            for submitted, job_dir in zip(made, job_dirs):  # surely never run: not found
                self._key_file(batch, submitted.index).unlink()
                write_json(job_dir / "state.json", {"state": "FAILED", "reason": str(exc)})
            raise
        return made

    def _prepare(self, batch: SubmitBatch, index: int) -> Submitted:
        job_id = self._next_id()
        job_dir = self._job_dir(job_id)
        job_dir.mkdir(parents=True)
        resources = batch.resources
        time_limit = resources.time if resources.time and resources.time != float("inf") else None
        output = batch.output.replace("{id}", job_id)
        write_json(
            job_dir / "spec.json",
            {
                "job_id": job_id,
                "root": str(self.root),
                "wrapper": batch.job.wrapper_path,
                "exit_file": batch.job.exit_file_for(index, batch.count),
                "environment": {TASK_INDEX_VARIABLE: str(index)} if batch.count > 1 else {},
                "workdir": batch.job.remote_dir,
                "output": output,
                "time_limit": time_limit,
                "depends_on": list(batch.depends_on),
                "slots": self.slots,
                "job_name": batch.job.name_of(index),
            },
        )
        write_json(job_dir / "state.json", {"state": "PENDING", "submit_time": now_iso()})
        # the key -> the id before the job starts: find_submitted finds it
        self._key_file(batch, index).parent.mkdir(exist_ok=True)
        self._key_file(batch, index).write_text(job_id, encoding="ascii")
        return Submitted(job_id, output, index)

    def _key_file(self, batch: SubmitBatch, index: int) -> Path:
        return self.root / "keys" / f"{batch.job.token}.{index}"

    def find_submitted(
        self, planned: Planned, since: Optional[float] = None
    ) -> Optional[List[Submitted]]:
        """The jobs the batch made, from their key files (none found is surely none)."""
        batch, found = planned.batch, []
        for index in range(batch.count):
            try:
                job_id = self._key_file(batch, index).read_text(encoding="ascii").strip()
            except FileNotFoundError:
                break
            found.append(Submitted(job_id, batch.output.replace("{id}", job_id), index))
        return found or None

    def queue_limit(self, account: Optional[str] = None, *, ask: bool = True) -> Optional[int]:
        """The mock scheduler caps nothing (its slots bound what runs, not what waits)."""
        return None

    def _launch(self, job_dirs: List[Path]) -> None:
        job_dir = job_dirs[0]  # the supervisor's log is in its first job's folder
        try:
            with open(job_dir / "supervisor.log", "ab") as supervisor_log:
                runner = subprocess.Popen(
                    self._runner_argv([str(path) for path in job_dirs]),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=supervisor_log,
                    start_new_session=True,  # survives the submitting process
                    close_fds=True,
                )
        except OSError as exc:
            raise JobSubmissionError(f"cannot start the mock supervisor: {exc}") from exc
        # The runner forks and its parent exits at once: the supervisor outlives us.
        if runner.wait() != 0:
            raise JobSubmissionError(
                f"the mock supervisor did not start (see {job_dir}/supervisor.log)"
            )

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        return {job_id: self._status_of(job_id) for job_id in job_ids}

    def _status_of(self, job_id: str) -> JobStatus:
        job_dir = self._job_dir(job_id)
        try:
            state = read_json(job_dir / "state.json")
        except FileNotFoundError:
            return JobStatus(job_id, JobState.UNKNOWN, reason="no such mock job")
        except ValueError:
            return JobStatus(job_id, JobState.UNKNOWN, reason="state file being written")
        name = state.get("state", "UNKNOWN")
        status = JobStatus(
            job_id=job_id,
            state=JobState(name) if name in JobState.__members__ else JobState.UNKNOWN,
            exit_code=state.get("exit_code"),
            start_time=_time(state.get("start_time")),
            end_time=_time(state.get("end_time")),
            native_state=name,
            reason=state.get("reason", ""),
        )
        if not status.is_terminal and not _alive(state.get("supervisor_pid")):
            return _lost(status, job_dir)
        return status

    def cancel(self, job_ids: Sequence[str]) -> None:
        for job_id in job_ids:
            job_dir = self._job_dir(job_id)
            if job_dir.is_dir():
                (job_dir / "cancel").touch()  # the supervisor checks this every tick

    def max_batch(self) -> int:
        return _MAX_BATCH

    def launcher(self, options: object) -> str:
        """None: a job's script runs as one process here."""
        return ""

    def find_output(self, job_id: str) -> Optional[str]:
        try:
            return str(read_json(self._job_dir(job_id) / "spec.json")["output"])
        except (OSError, ValueError, KeyError):
            return None

    def waiter(self, job_ids: Sequence[str]) -> Optional[Waiter]:
        return None

    def close(self) -> None:
        """Nothing held open."""


class MockAdapter(SchedulerAdapter[OpenDriver]):
    """Runs the job script locally in the background; states from the supervisor."""

    scheduler_name = "mock"
    output_template = "mock-{id}.out"
    # Flux's job kind (batch or plain job): the mock scheduler has one kind of job.
    ignored_options = frozenset({"nested"})
    # Its "controller" is a folder of this machine: asking it often costs nobody.
    default_poll_interval = 1.0
    shares_a_controller = False

    def __init__(self, *args: Any, slots: Optional[int] = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.executor.is_local:
            raise ConfigurationError(
                "the mock scheduler runs jobs on this machine; use the local transport "
                "(HPCBRIDGE_TRANSPORT=local)"
            )
        # its supervisors lock files there: a folder on a local disk
        self.root = machine_folder(self.settings.state_path / "mock")
        self.slots = slots or os.cpu_count() or 1

    def _open_session(self) -> OpenDriver:
        choice = DriverChoice("mock", "background processes on this machine")
        return OpenDriver(MockDriver(self.root, self.slots), choice)

    def describe(self) -> str:
        return f"mock via {self.executor.kind}"


def _lost(status: JobStatus, job_dir: Path) -> JobStatus:
    """The supervisor is gone without recording an end: the exit-code file's, else FAILED."""
    try:
        exit_file = read_json(job_dir / "spec.json")["exit_file"]
        with open(exit_file, encoding="ascii") as handle:
            code = exit_code_from_file(handle.read())
    except (OSError, ValueError, KeyError):
        code = None
    if code is not None:
        state = JobState.COMPLETED if code == 0 else JobState.FAILED
        return status.with_(state=state, exit_code=code, reason="from the exit-code file")
    return status.with_(state=JobState.FAILED, reason="mock supervisor ended unexpectedly")


def _alive(pid: Any) -> bool:
    if not pid:
        return True  # not yet recorded: the submitter is still writing it
    return pid_alive(int(pid))  # a zombie (our own child not yet reaped) counts as gone


def _time(text: Optional[str]) -> Optional[datetime]:
    return datetime.fromisoformat(text) if text else None
