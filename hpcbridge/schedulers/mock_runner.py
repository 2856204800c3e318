"""The mock scheduler's supervisor, one detached process per submission
(``python -m hpcbridge.schedulers.mock_runner [--detach] JOB_STATE_DIR...``): for each
of its jobs it waits for parents and a core slot (an ``flock``), runs the wrapper in its
own process group, enforces the time limit and cancels, and writes each transition to the
job's ``state.json``.  One loop steps every job of the submission each tick; the jobs take
the slots in their order."""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..model import CANCELLED_WHILE_PENDING

TICK = 0.05  # seconds between two steps of every job: cancel, deadline, exit, a free slot
PENDING_EVERY = 0.2  # seconds between two looks of a waiting job at its parents and cancel
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


def parents_left(root: Path, parents: List[str]) -> Tuple[Optional[str], List[str]]:
    """``(why the job can never run, or None; the parents not yet COMPLETED)``."""
    remaining = []
    for parent in parents:
        try:
            parent_state = read_json(root / "jobs" / parent / "state.json")["state"]
        except (OSError, ValueError, KeyError):
            return f"DependencyNeverSatisfied (no job {parent})", []
        if parent_state == "COMPLETED":
            continue
        if parent_state in TERMINAL:
            return f"DependencyNeverSatisfied ({parent} {parent_state})", []
        remaining.append(parent)
    return None, remaining


class Supervisor:
    """One job of the submission, stepped by the loop (``step``) until ``done``."""

    def __init__(self, job_dir: Path) -> None:
        self.job_dir = job_dir
        self.spec = read_json(job_dir / "spec.json")
        self.state_path = job_dir / "state.json"
        self.state = read_json(self.state_path)
        self.parents: List[str] = list(self.spec.get("depends_on", []))
        self.slot_handle: Optional[Any] = None
        self.child: Optional[subprocess.Popen] = None
        self.deadline: Optional[float] = None
        self.ending: Optional[str] = None
        self.kill_at = 0.0
        self.next_look = 0.0
        self.done = False
        self.update(supervisor_pid=os.getpid())

    def update(self, **changes: Any) -> None:
        self.state.update(changes)
        write_json(self.state_path, self.state)

    def say(self, reason: str) -> None:
        """Why the job waits, written when it changes."""
        if self.state.get("reason") != reason:
            self.update(reason=reason)

    def cancel_requested(self) -> bool:
        return (self.job_dir / "cancel").exists()

    def finish(self, state: str, **changes: Any) -> None:
        self.update(state=state, end_time=now_iso(), **changes)
        self.done = True
        if self.slot_handle is not None:
            self.slot_handle.close()  # the slot is free once the end is written
            self.slot_handle = None

    def step(self, may_take: bool) -> bool:
        """One tick of the job; True when it asked for a slot and found none (the jobs
        after it in the submission wait behind it)."""
        if self.child is not None:
            self.watch()
            return False
        now = time.monotonic()
        if now >= self.next_look:
            self.next_look = now + PENDING_EVERY
            if self.cancel_requested():
                self.finish("CANCELLED", reason=CANCELLED_WHILE_PENDING)
                return False
            blocked, self.parents = parents_left(Path(self.spec["root"]), self.parents)
            if blocked:
                self.finish("CANCELLED", reason=blocked)
                return False
        if self.parents:
            self.say("Dependency")
            return False
        if not may_take or not self.take_slot():
            self.say("Resources")
            return True
        self.start()
        return False

    def take_slot(self) -> bool:
        """One of the machine's core slots, if one is free."""
        slots_dir = Path(self.spec["root"]) / "slots"
        slots_dir.mkdir(parents=True, exist_ok=True)
        count = max(int(self.spec.get("slots") or os.cpu_count() or 1), 1)
        for index in range(count):
            handle = open(slots_dir / f"slot-{index}", "a")  # noqa: SIM115 - held open
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            self.slot_handle = handle
            return True
        return False

    def start(self) -> None:
        environment = dict(os.environ)
        environment.update(self.spec.get("environment", {}))
        environment["HPCBRIDGE_JOB_ID"] = self.spec["job_id"]
        with open(self.spec["output"], "ab") as output:
            self.child = subprocess.Popen(
                [self.spec["wrapper"]],
                cwd=self.spec["workdir"],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=environment,
                start_new_session=True,
            )
        self.update(state="RUNNING", start_time=now_iso(), child_pid=self.child.pid, reason="")
        limit = self.spec.get("time_limit")
        self.deadline = time.monotonic() + limit if limit else None

    def watch(self) -> None:
        """The running job: its exit, a cancel, its time limit, a kill past KILL_WAIT."""
        assert self.child is not None
        returncode = self.child.poll()
        if returncode is not None:
            self.ended(returncode)
            return
        now = time.monotonic()
        if self.ending is None and self.cancel_requested():
            self.stop("CANCELLED")
        elif self.ending is None and self.deadline is not None and now >= self.deadline:
            self.stop("TIMEOUT")
        elif self.ending is not None and now >= self.kill_at:
            _signal_group(self.child.pid, signal.SIGKILL)

    def stop(self, ending: str) -> None:
        assert self.child is not None
        self.ending = ending
        _signal_group(self.child.pid, signal.SIGTERM)
        self.kill_at = time.monotonic() + KILL_WAIT

    def ended(self, returncode: int) -> None:
        exit_code = returncode if returncode >= 0 else 128 - returncode
        if self.ending is not None:
            self.finish(self.ending, exit_code=exit_code, reason=_ENDINGS[self.ending])
        elif exit_code == 0:
            self.finish("COMPLETED", exit_code=0)
        else:
            self.finish("FAILED", exit_code=exit_code, reason="NonZeroExitCode")

    def fail(self, error: BaseException) -> None:
        """Record a fault of the supervisor's own: never leave the job looking alive."""
        traceback.print_exception(type(error), error, error.__traceback__)
        if self.child is not None and self.child.poll() is None:
            _signal_group(self.child.pid, signal.SIGKILL)
        try:
            self.finish("FAILED", reason=f"mock supervisor error: {error}")
        except OSError:  # its state cannot be written: the driver finds it lost
            self.done = True


def supervisors(job_dirs: List[str]) -> List[Supervisor]:
    """A ``Supervisor`` of each job; one that cannot be read is recorded FAILED."""
    made = []
    for job_dir in job_dirs:
        try:
            made.append(Supervisor(Path(job_dir)))
        except (OSError, ValueError, KeyError) as exc:
            traceback.print_exc()
            try:
                write_json(
                    Path(job_dir) / "state.json",
                    {
                        "state": "FAILED",
                        "end_time": now_iso(),
                        "reason": f"mock supervisor error: {exc}",
                    },
                )
            except OSError:
                pass
    return made


def supervise(jobs: List[Supervisor]) -> None:
    """Step every job each tick until all have ended; a job's end (SIGCHLD) brings the
    next tick at once, so that a job waiting for its slot starts without a tick's delay."""
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # the wake-up fd hears it
    left = jobs
    while left:
        may_take = True
        for job in left:
            try:
                if job.step(may_take):
                    may_take = False
            except Exception as exc:  # noqa: BLE001 - one job's fault ends that job only
                job.fail(exc)
        left = [job for job in left if not job.done]
        if left and select.select([woken], [], [], TICK)[0]:
            os.read(woken, 4096)


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
    supervise(supervisors(arguments))
    return 0


if __name__ == "__main__":
    sys.exit(main())
