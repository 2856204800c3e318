"""The pyslurm driver: pure mapping everywhere, the driver with a fake pyslurm,
the real thing only where pyslurm imports."""

from __future__ import annotations

import importlib.util
import types
from datetime import datetime
from typing import Any, Dict, List, Optional

import pytest

from hpcbridge.errors import JobSubmissionError, SchedulerAdapterError, SchedulerUnavailableError
from hpcbridge.jobscript import PreparedJob
from hpcbridge.model import JobState
from hpcbridge.resources import Resources
from hpcbridge.schedulers.driver import SubmitBatch, Submitted
from hpcbridge.schedulers.slurm import native, submission
from hpcbridge.schedulers.slurm.cli import SlurmCliDriver
from hpcbridge.transports.base import CommandResult
from hpcbridge.transports.local import LocalExecutor


def spec(depends_on=(), array=None, **resources: Any) -> submission.SubmitSpec:
    return submission.SubmitSpec(
        wrapper_path="/j/.hpcbridge/t.sh",
        workdir="/j",
        output="/j/slurm-%j.out",
        job_name="run.sh",
        resources=Resources.from_mapping(resources),
        depends_on=tuple(depends_on),
        array=array,
    )


def test_submit_description_every_field() -> None:
    kwargs = native.submit_description_kwargs(
        spec(
            depends_on=("5", "9_1"),
            array="0-9",
            partition="debug",
            qos="fast",
            account="hpcb",
            constraint="cpu",
            time="1:30:00",
            nodes=2,
            ntasks=4,
            cpus_per_task=2,
            mem="1536M",
            gpus=1,
        )
    )
    assert kwargs == {
        "script": "/j/.hpcbridge/t.sh",
        "working_directory": "/j",
        "standard_output": "/j/slurm-%j.out",
        "name": "run.sh",
        "partitions": "debug",
        "qos": "fast",
        "account": "hpcb",
        "constraints": "cpu",
        "time_limit": "1:30:00",
        "nodes": 2,
        "ntasks": 4,
        "cpus_per_task": 2,
        "memory_per_node": "1536M",
        "gpus": 1,
        "array": "0-9",
        "dependencies": "afterok:5:9_1",
        "kill_on_invalid_dependency": True,
    }


def test_submit_description_minimal_gpus_zero() -> None:
    kwargs = native.submit_description_kwargs(spec(gpus=0))
    assert "gpus" not in kwargs and "dependencies" not in kwargs and "partitions" not in kwargs


def fake_job(**attributes: Any) -> types.SimpleNamespace:
    defaults: Dict[str, Any] = {
        "id": 5,
        "state": "RUNNING",
        "state_reason": "None",
        "exit_code": 0,
        "exit_code_signal": 0,
        "start_time": 1_800_000_000,
        "end_time": None,
        "array_id": None,
        "array_task_id": None,
        "array_tasks_waiting": None,
        "standard_output": "/j/slurm-5.out",
    }
    defaults.update(attributes)
    return types.SimpleNamespace(**defaults)


def test_status_from_running_job() -> None:
    status = native.status_from_job(fake_job(end_time=1_800_003_600))
    assert status.job_id == "5" and status.state is JobState.RUNNING
    assert status.start_time == datetime.fromtimestamp(1_800_000_000).astimezone()
    assert status.start_time is not None and status.start_time.tzinfo is not None
    assert status.end_time is None  # a forecast while running
    assert status.exit_code is None and status.reason == ""


@pytest.mark.parametrize(
    ("state", "code", "signal", "expected_state", "expected_code"),
    [
        ("COMPLETED", 0, 0, JobState.COMPLETED, 0),
        ("FAILED", 3, 0, JobState.FAILED, 3),
        ("CANCELLED", 0, 15, JobState.CANCELLED, 143),
        ("TIMEOUT", 0, 15, JobState.TIMEOUT, 143),
        ("OUT_OF_MEMORY", 0, 9, JobState.FAILED, 137),
        ("WHATEVER_NEW", 0, 0, JobState.UNKNOWN, None),
    ],
)
def test_status_from_finished_job(
    state: str, code: int, signal: int, expected_state: JobState, expected_code: Optional[int]
) -> None:
    status = native.status_from_job(
        fake_job(
            state=state,
            exit_code=code,
            exit_code_signal=signal,
            end_time=1_800_000_060,
            state_reason="NonZeroExitCode",
        )
    )
    assert status.state is expected_state and status.exit_code == expected_code
    assert status.native_state == state and status.reason == "NonZeroExitCode"
    if expected_state.is_terminal:
        assert status.end_time == datetime.fromtimestamp(1_800_000_060).astimezone()


def test_pending_job_has_no_times() -> None:
    status = native.status_from_job(
        fake_job(state="PENDING", start_time=1_900_000_000, state_reason="Dependency")
    )
    assert status.state is JobState.PENDING and status.start_time is None
    assert status.reason == "Dependency"


def test_array_ids() -> None:
    task = fake_job(id=21, array_id=13, array_task_id=4)
    pending = fake_job(id=13, array_id=13, array_task_id=None, array_tasks_waiting="5-7")
    assert native.job_ids_of(task) == ["13_4"]
    assert native.job_ids_of(pending) == ["13_5", "13_6", "13_7"]
    found = native.statuses_from_jobs([task, pending], ["13_4", "13_6", "21", "13", "99"])
    assert found["13_4"].state is JobState.RUNNING and found["21"].job_id == "21"
    assert found["13_6"].job_id == "13_6"
    assert "13" not in found and "99" not in found


def test_iter_jobs_over_collections() -> None:
    one, two = fake_job(id=1), fake_job(id=2)
    assert list(native.iter_jobs({1: one, 2: two})) == [one, two]
    assert list(native.iter_jobs({"cluster": {1: one, 2: two}})) == [one, two]
    assert list(native.iter_jobs([one, two])) == [one, two]


@pytest.mark.parametrize(
    ("pyslurm", "slurm", "match"),
    [
        ("22.5.0", "22.05.8", True),
        ("24.5.1", "24.05.4", True),
        ("25.11.0", "22.05.8", False),
        ("22.5.0", None, False),
        (None, "22.05.8", False),
        ("", "", False),
    ],
)
def test_versions_match(pyslurm: Optional[str], slurm: Optional[str], match: bool) -> None:
    assert native.versions_match(pyslurm, slurm) is match


# -- driver choice ----------------------------------------------------------------


class VersionExecutor(LocalExecutor):
    def __init__(self, version: str = "slurm-wlm 22.05.8\n") -> None:
        super().__init__()
        self.version = version
        self.calls: List[List[str]] = []

    def run(self, argv, timeout=None, env=None, cwd=None, input=None, idempotent=True):
        self.calls.append(list(argv))
        return CommandResult(list(argv), 0, self.version, "")


class RPCError(Exception):
    pass


def fake_pyslurm(
    version: str = "22.5.0",
    jobs: Any = None,
    history: Any = None,
    submit_error: Optional[str] = None,
) -> types.SimpleNamespace:
    submitted: List[Dict[str, Any]] = []
    cancelled: List[int] = []

    class JobSubmitDescription:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs

        def submit(self) -> int:
            if submit_error:
                raise RPCError(submit_error)
            submitted.append(self.kwargs)
            return 4242

    class Job:
        def __init__(self, job_id: int) -> None:
            self.job_id = job_id

        def cancel(self) -> None:
            cancelled.append(self.job_id)

        @staticmethod
        def load(job_id: int) -> Any:
            return fake_job(id=job_id)

    class Jobs:
        @staticmethod
        def load() -> Any:
            if isinstance(jobs, Exception):
                raise jobs
            return jobs or {}

    class DbJobs:
        @staticmethod
        def load(db_filter: Any) -> Any:
            if isinstance(history, Exception):
                raise history
            return history or []

    class JobFilter:
        def __init__(self, ids: List[int]) -> None:
            self.ids = ids

    return types.SimpleNamespace(
        __version__=version,
        RPCError=RPCError,
        JobSubmitDescription=JobSubmitDescription,
        Job=Job,
        Jobs=Jobs,
        db=types.SimpleNamespace(Jobs=DbJobs, JobFilter=JobFilter),
        submitted=submitted,
        cancelled=cancelled,
    )


def test_choose_cli_when_asked() -> None:
    executor = VersionExecutor()
    driver, choice = native.choose_slurm_driver("cli", executor, SlurmCliDriver(executor))
    assert choice.name == "cli" and driver.name == "cli" and executor.calls == []


def test_choose_cli_over_ssh() -> None:
    class Remote:
        kind = "ssh://me@login:22"
        host = "login"
        is_local = False

    cli = SlurmCliDriver(Remote())  # type: ignore[arg-type]
    driver, choice = native.choose_slurm_driver("auto", Remote(), cli)  # type: ignore[arg-type]
    assert driver is cli and choice.name == "cli" and "ssh" in choice.reason


def test_choose_cli_without_pyslurm(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Any:
        raise ImportError("No module named 'pyslurm'")

    monkeypatch.setattr(native, "import_pyslurm", missing)
    executor = VersionExecutor()
    _, choice = native.choose_slurm_driver("auto", executor, SlurmCliDriver(executor))
    assert choice.name == "cli" and "not importable" in choice.reason


def test_choose_native_when_versions_match(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "import_pyslurm", lambda: fake_pyslurm("22.5.0"))
    executor = VersionExecutor()
    driver, choice = native.choose_slurm_driver("auto", executor, SlurmCliDriver(executor))
    assert driver.name == "native" and choice.name == "native"
    assert choice.reason == "pyslurm 22.5.0 matches Slurm 22.05.8"


def test_choose_cli_on_version_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "import_pyslurm", lambda: fake_pyslurm("25.11.0"))
    executor = VersionExecutor()
    _, choice = native.choose_slurm_driver("auto", executor, SlurmCliDriver(executor))
    assert choice.name == "cli" and "does not match" in choice.reason


def test_native_asked_for_but_mismatched_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "import_pyslurm", lambda: fake_pyslurm("25.11.0"))
    executor = VersionExecutor()
    with pytest.raises(SchedulerUnavailableError, match="does not match Slurm 22.05.8"):
        native.choose_slurm_driver("native", executor, SlurmCliDriver(executor))


# -- the driver with a fake pyslurm ---------------------------------------------------------


def driver_with(module: Any) -> native.SlurmNativeDriver:
    return native.SlurmNativeDriver(SlurmCliDriver(VersionExecutor()), module)


def batch(count: int) -> SubmitBatch:
    job = PreparedJob("t", "/j", "/j/.hpcbridge/t.sh", "/j/.hpcbridge/t.exit", ["/j/a.sh"], "w")
    return SubmitBatch(job, count, Resources(), (), "/j/slurm-%j.out")


def test_native_submit_and_refusal() -> None:
    module = fake_pyslurm()
    assert driver_with(module).submit(spec(partition="debug")) == "4242"
    assert module.submitted[0]["partitions"] == "debug"
    with pytest.raises(JobSubmissionError, match="Invalid partition name specified") as caught:
        driver_with(fake_pyslurm(submit_error="Invalid partition name specified")).submit(spec())
    assert caught.value.scheduler_message == "Invalid partition name specified"
    assert "JobSubmitDescription(" in driver_with(module).describe(batch(1))
    assert "array='0-2'" in driver_with(module).describe(batch(3))


def test_native_submit_many_array_and_refused_array() -> None:
    module = fake_pyslurm()
    found = driver_with(module).submit_many(batch(2))
    assert found == [Submitted(f"4242_{i}", f"/j/slurm-4242_{i}.out", i) for i in range(2)]
    assert module.submitted[0]["array"] == "0-1"
    assert module.submitted[0]["standard_output"] == "/j/slurm-%A_%a.out"


def test_native_refused_array_goes_in_task_by_task_through_sbatch() -> None:
    class Sbatch(VersionExecutor):
        def run(self, argv, timeout=None, env=None, cwd=None, input=None, idempotent=True):
            self.calls.append(list(argv))
            return CommandResult(list(argv), 0, f"{len(self.calls) + 50}\n", "")

    executor = Sbatch()
    refusing = fake_pyslurm(submit_error="Invalid job array specification")
    driver = native.SlurmNativeDriver(SlurmCliDriver(executor), refusing)
    assert [item.job_id for item in driver.submit_many(batch(2))] == ["51", "52"]
    assert [argv[-2] for argv in executor.calls] == [
        "--export=ALL,HPCBRIDGE_TASK_INDEX=0",
        "--export=ALL,HPCBRIDGE_TASK_INDEX=1",
    ]


def test_native_query_live_then_history() -> None:
    module = fake_pyslurm(
        jobs={"c": {5: fake_job(id=5)}},
        history=[fake_job(id=6, state="COMPLETED", end_time=1_800_000_001)],
    )
    found = driver_with(module).query(["5", "6", "7"])
    assert found["5"].state is JobState.RUNNING and found["6"].state is JobState.COMPLETED
    assert found["7"].state is JobState.UNKNOWN and found["7"].reason == "not in squeue or sacct"


def test_native_query_controller_down_and_no_accounting() -> None:
    down = driver_with(fake_pyslurm(jobs=RPCError("Unable to contact slurm controller")))
    assert down.query(["5"])["5"].state is JobState.UNKNOWN
    no_db = driver_with(fake_pyslurm(jobs={}, history=RPCError("no slurmdbd")))
    assert no_db.query(["5"])["5"].state is JobState.UNKNOWN


def test_native_cancel_plain_ids_natively_array_tasks_via_scancel() -> None:
    module = fake_pyslurm()
    driver = driver_with(module)
    driver.cancel(["5", "9_2"])
    assert module.cancelled == [5]
    assert driver.cli.executor.calls[-1] == ["scancel", "9_2"]  # type: ignore[attr-defined]


def test_native_cancel_failure() -> None:
    module = fake_pyslurm()

    class Failing:
        def __init__(self, job_id: int) -> None:
            pass

        def cancel(self) -> None:
            raise RPCError("Access/permission denied")

    module.Job = Failing
    with pytest.raises(SchedulerAdapterError, match="permission"):
        driver_with(module).cancel(["5"])


def test_native_output_path() -> None:
    assert driver_with(fake_pyslurm()).find_output("5") == "/j/slurm-5.out"


# -- the real pyslurm --------------------------------------------------------------------

HAVE_PYSLURM = importlib.util.find_spec("pyslurm") is not None


@pytest.mark.slurm
@pytest.mark.skipif(not HAVE_PYSLURM, reason=native.PYSLURM_SKIP_REASON)
def test_real_pyslurm_driver_query() -> None:  # pragma: no cover - needs pyslurm
    executor = LocalExecutor()
    driver, choice = native.choose_slurm_driver("auto", executor, SlurmCliDriver(executor))
    if choice.name != "native":
        pytest.skip(choice.reason)
    assert driver.query(["999999999"])["999999999"].state is JobState.UNKNOWN
