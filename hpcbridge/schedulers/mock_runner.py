"""The mock scheduler's supervisor, one detached process per job
(``python -m hpcbridge.schedulers.mock_runner [--detach] JOB_STATE_DIR``): it waits for
parents and a core slot (an ``flock``), runs the wrapper in its own process group,
enforces the time limit and cancels, and writes each transition to ``state.json``."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..model import CANCELLED_WHILE_PENDING

TICK = 0.05  # seconds between checks for cancel, deadline, exit
KILL_WAIT = 5.0  # seconds between TERM and KILL, like Slurm's KillWait
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}
#: the reason of each end the supervisor brings about
_ENDINGS = {"CANCELLED": "cancelled", "TIMEOUT": "time limit reached"}


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def read_json(path: Path) -> Dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        data: Dict[str, Any] = json.load(handle)
        return data


def write_json(path: Path, data: Dict[str, Any]) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(temporary, path)


class Supervisor:
    def __init__(self, job_dir: Path) -> None:
        self.job_dir = job_dir
        self.spec = read_json(job_dir / "spec.json")
        self.state_path = job_dir / "state.json"
        self.state = read_json(self.state_path)
        self.slot_handle: Optional[Any] = None
        self.update(supervisor_pid=os.getpid())

    def update(self, **changes: Any) -> None:
        self.state.update(changes)
        write_json(self.state_path, self.state)

    def cancel_requested(self) -> bool:
        return (self.job_dir / "cancel").exists()

    def finish(self, state: str, **changes: Any) -> int:
        self.update(state=state, end_time=now_iso(), **changes)
        return 0

    def wait_for_dependencies(self) -> Optional[str]:
        """``None`` when all parents completed, else the reason this job cannot run."""
        parents: List[str] = self.spec.get("depends_on", [])
        root = Path(self.spec["root"])
        while parents:
            if self.cancel_requested():
                return "cancelled"
            remaining = []
            for parent in parents:
                try:
                    parent_state = read_json(root / "jobs" / parent / "state.json")["state"]
                except (OSError, ValueError, KeyError):
                    return f"DependencyNeverSatisfied (no job {parent})"
                if parent_state == "COMPLETED":
                    continue
                if parent_state in TERMINAL:
                    return f"DependencyNeverSatisfied ({parent} {parent_state})"
                remaining.append(parent)
            parents = remaining
            if parents:
                self.update(reason="Dependency")
                time.sleep(TICK * 4)
        return None

    def take_slot(self) -> bool:
        """Block until one of the machine's core slots is free; False if cancelled."""
        slots_dir = Path(self.spec["root"]) / "slots"
        slots_dir.mkdir(parents=True, exist_ok=True)
        count = max(int(self.spec.get("slots") or os.cpu_count() or 1), 1)
        first_wait = True
        while True:
            for index in range(count):
                handle = open(slots_dir / f"slot-{index}", "a")  # noqa: SIM115 - held open
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    handle.close()
                    continue
                self.slot_handle = handle
                return True
            if self.cancel_requested():
                return False
            if first_wait:
                self.update(reason="Resources")
                first_wait = False
            time.sleep(TICK)

    def run(self) -> int:
        blocked = self.wait_for_dependencies()
        if blocked and blocked != "cancelled":
            return self.finish("CANCELLED", reason=blocked)
        if blocked or not self.take_slot() or self.cancel_requested():
            return self.finish("CANCELLED", reason=CANCELLED_WHILE_PENDING)

        environment = dict(os.environ)
        environment.update(self.spec.get("environment", {}))
        environment["HPCBRIDGE_JOB_ID"] = self.spec["job_id"]
        with open(self.spec["output"], "ab") as output:
            child = subprocess.Popen(
                [self.spec["wrapper"]],
                cwd=self.spec["workdir"],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=environment,
                start_new_session=True,
            )
        self.update(state="RUNNING", start_time=now_iso(), child_pid=child.pid, reason="")
        limit = self.spec.get("time_limit")
        deadline = time.monotonic() + limit if limit else None
        ending: Optional[str] = None
        while True:
            returncode = _poll(child, TICK)
            if returncode is not None:
                break
            if ending is None and self.cancel_requested():
                ending = "CANCELLED"
                _signal_group(child.pid, signal.SIGTERM)
                kill_at = time.monotonic() + KILL_WAIT
            elif ending is None and deadline is not None and time.monotonic() >= deadline:
                ending = "TIMEOUT"
                _signal_group(child.pid, signal.SIGTERM)
                kill_at = time.monotonic() + KILL_WAIT
            elif ending is not None and time.monotonic() >= kill_at:
                _signal_group(child.pid, signal.SIGKILL)
        exit_code = returncode if returncode >= 0 else 128 - returncode
        if ending is not None:
            return self.finish(ending, exit_code=exit_code, reason=_ENDINGS[ending])
        if exit_code == 0:
            return self.finish("COMPLETED", exit_code=0)
        return self.finish("FAILED", exit_code=exit_code, reason="NonZeroExitCode")


def _poll(child: subprocess.Popen, tick: float) -> Optional[int]:
    try:
        return child.wait(timeout=tick)
    except subprocess.TimeoutExpired:
        return None


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: Optional[List[str]] = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments and arguments[0] == "--detach":
        arguments = arguments[1:]
        if os.fork() != 0:
            os._exit(0)  # the submitter waits for this parent only
    supervisor = Supervisor(Path(arguments[0]))
    try:
        return supervisor.run()
    except Exception as exc:  # record, never leave the job looking alive
        supervisor.finish("FAILED", reason=f"mock supervisor error: {exc}")
        raise


if __name__ == "__main__":
    sys.exit(main())
