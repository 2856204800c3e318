"""The mock scheduler: runs jobs on this machine as real detached processes.

The embedded default - no scheduler needed.  Each job gets a supervisor
process (``mock_runner``) that outlives the submitting command, so ``hpcbridge
submit`` in one process and ``hpcbridge wait`` in another see the same job.
Concurrency is bounded by the machine's cores, like a one-node cluster.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from ..errors import ConfigurationError, JobSubmissionError
from ..jobscript import PreparedJob
from ..model import JobState, JobStatus
from ..resources import Resources
from ..store import JobRecord
from ..transports.local import LocalExecutor
from .base import SchedulerAdapter
from .mock_runner import now_iso, read_json, write_json


class MockAdapter(SchedulerAdapter):
    """Runs the job script locally in the background; states from the supervisor."""

    scheduler_name = "mock"
    output_template = "mock-{id}.out"

    def __init__(self, *args: Any, slots: Optional[int] = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.executor, LocalExecutor):
            raise ConfigurationError(
                "the mock scheduler runs jobs on this machine; use the local transport "
                "(HPCBRIDGE_TRANSPORT=local)"
            )
        self.root = self.settings.state_path / "mock"
        self.slots = slots or os.cpu_count() or 1

    # -- ids and folders ------------------------------------------------------

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

    # -- the four operations ------------------------------------------------

    def _runner_argv(self, job_dir: str) -> List[str]:
        return [sys.executable, "-m", "hpcbridge.schedulers.mock_runner", "--detach", job_dir]

    def _describe(self, job: PreparedJob, resources: Resources, depends_on: List[str]) -> str:
        argv = self._runner_argv(str(self._job_dir("<id>")))
        limit = f" time limit {resources.time:g}s" if resources.time else ""
        after = f" after {','.join(depends_on)}" if depends_on else ""
        return shlex.join(argv) + f"  # runs {job.wrapper_path}{limit}{after}"

    def _submit(self, job: PreparedJob, resources: Resources, depends_on: List[str]) -> str:
        job_id = self._next_id()
        job_dir = self._job_dir(job_id)
        job_dir.mkdir(parents=True)
        time_limit = resources.time if resources.time and resources.time != float("inf") else None
        write_json(
            job_dir / "spec.json",
            {
                "job_id": job_id,
                "root": str(self.root),
                "wrapper": job.wrapper_path,
                "workdir": job.remote_dir,
                "output": self._resolve_output(job, resources, job_id),
                "time_limit": time_limit,
                "depends_on": depends_on,
                "slots": self.slots,
                "job_name": job.job_name,
            },
        )
        write_json(job_dir / "state.json", {"state": "PENDING", "submit_time": now_iso()})
        try:
            with open(job_dir / "supervisor.log", "ab") as supervisor_log:
                runner = subprocess.Popen(
                    self._runner_argv(str(job_dir)),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=supervisor_log,
                    start_new_session=True,  # survives the submitting process
                    close_fds=True,
                )
        except OSError as exc:
            raise JobSubmissionError(f"cannot start the mock supervisor: {exc}") from exc
        # The runner forks and its parent exits at once: the supervisor is
        # re-parented to init, so it outlives us and never lingers as a zombie.
        if runner.wait() != 0:
            raise JobSubmissionError(f"the mock supervisor did not start (see {job_dir})")
        return job_id

    def _query(self, job_ids: List[str], records: Mapping[str, JobRecord]) -> Dict[str, JobStatus]:
        return {job_id: self._status_of(job_id, records.get(job_id)) for job_id in job_ids}

    def _status_of(self, job_id: str, record: Optional[JobRecord]) -> JobStatus:
        try:
            state = read_json(self._job_dir(job_id) / "state.json")
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
            # The supervisor is gone without recording an end (machine restart,
            # kill -9): fall back on the wrapper's exit-code file, else FAILED.
            return self._lost(status, record)
        return status

    def _lost(self, status: JobStatus, record: Optional[JobRecord]) -> JobStatus:
        found = self._status_from_exit_file(status, record)
        if found is not None:
            return found.with_(reason="from exit-code file")
        return status.with_(state=JobState.FAILED, reason="mock supervisor ended unexpectedly")

    def _cancel(self, job_ids: List[str]) -> None:
        for job_id in job_ids:
            job_dir = self._job_dir(job_id)
            if job_dir.is_dir():
                (job_dir / "cancel").touch()  # the supervisor checks this every tick

    def _find_log_path(self, job_id: str) -> Optional[str]:
        try:
            return str(read_json(self._job_dir(job_id) / "spec.json")["output"])
        except (OSError, ValueError, KeyError):
            return None


def _alive(pid: Any) -> bool:
    if not pid:
        return True  # not yet recorded: the submitter is still writing it
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (our own child not yet reaped) counts as gone.
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _time(text: Optional[str]) -> Optional[datetime]:
    return datetime.fromisoformat(text) if text else None
