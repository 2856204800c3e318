"""The pyslurm driver: pure mapping everywhere, the driver with a fake pyslurm,
the real thing in the integration tests."""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from hpcbridge.engine.driver import NotAskedNow, SubmitBatch, Submitted
from hpcbridge.engine.jobscript import PreparedJob
from hpcbridge.errors import JobSubmissionError, SchedulerAdapterError, SchedulerUnavailableError
from hpcbridge.model import JobState
from hpcbridge.resources import Resources
from hpcbridge.schedulers.slurm import commands, pyslurm_loading
from hpcbridge.schedulers.slurm import native_driver as native
from hpcbridge.schedulers.slurm import pyslurm_records as records
from hpcbridge.schedulers.slurm.cli_driver import SlurmCliDriver
from hpcbridge.transports.base import CommandResult
from hpcbridge.transports.local import LocalExecutor


def submit(driver: Any, batch: SubmitBatch) -> List[Submitted]:
    """The driver's plan of ``batch``, submitted (what a ``Submission`` does)."""
    return driver.submit_many(driver.plan(batch))


def describe(driver: Any, batch: SubmitBatch) -> str:
    return driver.describe(driver.plan(batch))


def spec(
    depends_on=(), array=None, wrapper: str = "/j/.hpcbridge/t.sh", **resources: Any
) -> commands.SubmitSpec:
    return commands.SubmitSpec(
        wrapper_path=wrapper,
        workdir="/j",
        output="/j/slurm-%j.out",
        job_name="run.sh",
        resources=Resources.from_mapping(resources),
        depends_on=tuple(depends_on),
        array=array,
    )


def test_submit_description_every_field() -> None:
    kwargs = records.submit_description_kwargs(
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


def test_submit_description_of_nodes_alone_asks_a_task_per_node() -> None:
    """pyslurm would make the tasks 1: the job's srun would run on one node of the two."""
    assert records.submit_description_kwargs(spec(nodes=2))["ntasks"] == 2
    assert records.submit_description_kwargs(spec(nodes=2, ntasks=6))["ntasks"] == 6
    assert "ntasks" not in records.submit_description_kwargs(spec())


def test_submit_description_minimal_gpus_zero() -> None:
    kwargs = records.submit_description_kwargs(spec(gpus=0))
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
    status = records.status_from_job(fake_job(end_time=1_800_003_600))
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
        # pyslurm folds an exit status of 128 or more: 143 comes back as 15, signal 0
        ("FAILED", 15, 0, JobState.FAILED, 15),
        ("WHATEVER_NEW", 0, 0, JobState.UNKNOWN, None),
    ],
)
def test_status_from_finished_job(
    state: str, code: int, signal: int, expected_state: JobState, expected_code: Optional[int]
) -> None:
    status = records.status_from_job(
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
    status = records.status_from_job(
        fake_job(state="PENDING", start_time=1_900_000_000, state_reason="Dependency")
    )
    assert status.state is JobState.PENDING and status.start_time is None
    assert status.reason == "Dependency"


def test_array_ids() -> None:
    task = fake_job(id=21, array_id=13, array_task_id=4)
    pending = fake_job(id=13, array_id=13, array_task_id=None, array_tasks_waiting="5-7")
    assert records.job_ids_of(task) == ["13_4"]
    assert records.job_ids_of(pending) == ["13_5", "13_6", "13_7"]
    found = records.statuses_from_jobs([task, pending], ["13_4", "13_6", "21", "13", "99"])
    assert found["13_4"].state is JobState.RUNNING and found["21"].job_id == "21"
    assert found["13_6"].job_id == "13_6"
    assert "13" not in found and "99" not in found


@pytest.mark.parametrize("waiting", [None, ""])
def test_array_task_zero(waiting: Optional[str]) -> None:
    # pyslurm gives task 0 as array_task_id=None (its parser reads 0 as "no value")
    zero = fake_job(id=47, array_id=46, array_task_id=None, array_tasks_waiting=waiting)
    assert records.job_ids_of(zero) == ["46_0"]
    found = records.statuses_from_jobs([zero], ["46_0", "47", "46"])
    assert found["46_0"].state is JobState.RUNNING and found["47"].job_id == "47"
    assert "46" not in found
    # the database record of task 0 of a finished array, the array's own id
    done = fake_job(id=46, array_id=46, array_task_id=None, state="COMPLETED", end_time=1)
    assert records.statuses_from_jobs([done], ["46_0"])["46_0"].state is JobState.COMPLETED


def test_a_record_naming_its_task_wins_over_task_zero_by_elimination() -> None:
    named = fake_job(id=50, array_id=50, array_task_id=0, state="COMPLETED", end_time=1)
    # e.g. a history record of the array's cancelled rest that does not say which tasks
    unnamed = fake_job(id=50, array_id=50, array_task_id=None, state="CANCELLED", end_time=1)
    for order in ([named, unnamed], [unnamed, named]):
        found = records.statuses_from_jobs(order, ["50_0"])
        assert found["50_0"].state is JobState.COMPLETED


def test_folded_exit_code_is_told_and_unfolded() -> None:
    folded = records.status_from_job(fake_job(state="FAILED", exit_code=2, end_time=1))
    assert records.may_be_folded(folded) and folded.exit_code == 2
    assert records.unfolded(folded, 130).exit_code == 130  # type: ignore[union-attr]
    assert records.unfolded(folded, 2).exit_code == 2  # type: ignore[union-attr]
    assert records.unfolded(folded, 7) is None  # not this job's record
    assert records.unfolded(folded, None) is None
    # exit 128 comes back as 0 with FAILED; a COMPLETED 0 and a signal are certain
    assert records.may_be_folded(records.status_from_job(fake_job(state="FAILED", end_time=1)))
    for certain in (
        fake_job(state="COMPLETED", end_time=1),
        fake_job(state="CANCELLED", exit_code=0, exit_code_signal=15, end_time=1),
    ):
        assert not records.may_be_folded(records.status_from_job(certain))


def test_iter_jobs_over_collections() -> None:
    one, two = fake_job(id=1), fake_job(id=2)
    assert list(records.iter_jobs({1: one, 2: two})) == [one, two]
    assert list(records.iter_jobs({"cluster": {1: one, 2: two}})) == [one, two]
    assert list(records.iter_jobs([one, two])) == [one, two]


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
    assert records.versions_match(pyslurm, slurm) is match


# -- driver choice ----------------------------------------------------------------


class VersionExecutor(LocalExecutor):
    def __init__(self, version: str = "slurm-wlm 22.05.8\n", code: int = 0) -> None:
        super().__init__()
        self.version = version
        self.code = code
        self.calls: List[List[str]] = []

    def run(self, argv, timeout=None, env=None, cwd=None, input=None, idempotent=True):
        self.calls.append(list(argv))
        return CommandResult(list(argv), self.code, self.version, "")


class RPCError(Exception):
    pass


def fake_pyslurm(
    version: str = "22.5.0",
    jobs: Any = None,
    history: Any = None,
    submit_error: Optional[BaseException] = None,
    libslurm_says: str = "",
) -> types.SimpleNamespace:
    """``libslurm_says``: what the submission writes to fd 2 first, as libslurm does."""
    submitted: List[Dict[str, Any]] = []
    cancelled: List[int] = []

    class JobSubmitDescription:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs

        def submit(self) -> int:
            if libslurm_says:
                os.write(2, libslurm_says.encode())
            if submit_error:
                raise submit_error
            submitted.append(self.kwargs)
            return 4242

    class Job:
        def __init__(self, job_id: int) -> None:
            self.job_id = job_id

        def cancel(self) -> None:
            cancelled.append(self.job_id)

        @staticmethod
        def load(job_id: int) -> Any:
            if job_id == 404:
                raise RPCError("Invalid job id specified")
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


@pytest.fixture
def loadable(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyslurm is installed in the version of the fake ``import_pyslurm`` gives;
    the SLURM_CONF check passes (a fake pyslurm reads no configuration)."""
    monkeypatch.setattr(
        native, "installed_pyslurm_version", lambda: native.import_pyslurm().__version__
    )
    monkeypatch.setattr(native, "ensure_loadable", lambda wanted: None)


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
    monkeypatch.setattr(native, "installed_pyslurm_version", lambda: None)
    executor = VersionExecutor()
    _, choice = native.choose_slurm_driver("auto", executor, SlurmCliDriver(executor))
    assert choice.name == "cli" and "not importable" in choice.reason
    assert executor.calls == []  # without pyslurm, Slurm's version is not asked


def test_choose_cli_when_the_import_fails(monkeypatch: pytest.MonkeyPatch, loadable: None) -> None:
    def broken() -> Any:
        raise ImportError("libslurmfull.so: cannot open shared object file")

    monkeypatch.setattr(native, "installed_pyslurm_version", lambda: "22.5.0")
    monkeypatch.setattr(native, "import_pyslurm", broken)
    executor = VersionExecutor()
    _, choice = native.choose_slurm_driver("auto", executor, SlurmCliDriver(executor))
    assert choice.name == "cli" and "libslurmfull.so" in choice.reason


def test_mismatch_is_found_before_any_import(monkeypatch: pytest.MonkeyPatch) -> None:
    imported: List[str] = []
    monkeypatch.setattr(native, "installed_pyslurm_version", lambda: "25.11.2")
    monkeypatch.setattr(native, "import_pyslurm", lambda: imported.append("!"))
    executor = VersionExecutor("slurm-wlm 22.05.8\n")
    _, choice = native.choose_slurm_driver("auto", executor, SlurmCliDriver(executor))
    assert choice.reason == "pyslurm 25.11.2 does not match Slurm 22.05.8" and imported == []


def test_choose_native_when_versions_match(monkeypatch: pytest.MonkeyPatch, loadable: None) -> None:
    monkeypatch.setattr(native, "import_pyslurm", lambda: fake_pyslurm("22.5.0"))
    executor = VersionExecutor()
    driver, choice = native.choose_slurm_driver("auto", executor, SlurmCliDriver(executor))
    assert driver.name == "native" and choice.name == "native"
    assert choice.reason == "pyslurm 22.5.0 matches Slurm 22.05.8"


def test_choose_cli_on_version_mismatch(monkeypatch: pytest.MonkeyPatch, loadable: None) -> None:
    monkeypatch.setattr(native, "import_pyslurm", lambda: fake_pyslurm("25.11.0"))
    executor = VersionExecutor()
    _, choice = native.choose_slurm_driver("auto", executor, SlurmCliDriver(executor))
    assert choice.name == "cli" and "does not match" in choice.reason


def test_native_asked_for_but_mismatched_raises(
    monkeypatch: pytest.MonkeyPatch, loadable: None
) -> None:
    monkeypatch.setattr(native, "import_pyslurm", lambda: fake_pyslurm("25.11.0"))
    executor = VersionExecutor()
    with pytest.raises(SchedulerUnavailableError, match="does not match Slurm 22.05.8"):
        native.choose_slurm_driver("native", executor, SlurmCliDriver(executor))


# -- the SLURM_CONF pyslurm will read, checked before the import ---------------------


def test_conf_problem_rules() -> None:
    fresh = (False, None)
    assert records.conf_problem("/a.conf", "/a.conf", fresh) is None
    assert records.conf_problem(None, None, fresh) is None
    mismatch = records.conf_problem("/right.conf", "/wrong.conf", fresh)
    assert mismatch and "/wrong.conf" in mismatch and "/right.conf" in mismatch
    unset = records.conf_problem("/right.conf", None, fresh)
    assert unset and "unset" in unset and "\n" not in unset
    assert records.conf_problem("/a.conf", "/b.conf", (True, "/a.conf")) is None
    other = records.conf_problem("/b.conf", "/b.conf", (True, "/a.conf"))
    assert other and "loaded for SLURM_CONF=/a.conf" in other
    assert records.wanted_slurm_conf({"SLURM_CONF": "/s"}, {"SLURM_CONF": "/p"}) == "/s"
    assert records.wanted_slurm_conf({}, {"SLURM_CONF": "/p"}) == "/p"
    assert records.wanted_slurm_conf({}, {}) is None


@pytest.fixture
def pyslurm_findable(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyslurm looks installed and not yet imported; no probe result cached."""
    monkeypatch.delitem(sys.modules, "pyslurm", raising=False)
    spec_of = importlib.util.find_spec
    monkeypatch.setattr(
        pyslurm_loading.importlib.util,
        "find_spec",
        lambda name, *rest: object() if name == "pyslurm" else spec_of(name, *rest),
    )
    monkeypatch.setattr(pyslurm_loading, "_probed", {})


def test_wrong_process_conf_refuses_native_before_the_import(
    monkeypatch: pytest.MonkeyPatch, pyslurm_findable: None, tmp_path
) -> None:
    imported: List[str] = []
    monkeypatch.setattr(native, "installed_pyslurm_version", lambda: "25.11.2")
    monkeypatch.setattr(native, "import_pyslurm", lambda: imported.append("!"))
    right, wrong = tmp_path / "right.conf", tmp_path / "wrong.conf"
    right.write_text("ClusterName=right\n")
    monkeypatch.setenv("SLURM_CONF", str(wrong))
    executor = VersionExecutor("slurm 25.11.7\n")
    cli = SlurmCliDriver(executor, env={"SLURM_CONF": str(right)})
    with pytest.raises(SchedulerUnavailableError, match="process's SLURM_CONF") as caught:
        native.choose_slurm_driver("native", executor, cli, {"SLURM_CONF": str(right)})
    assert "\n" not in str(caught.value) and imported == []
    _, choice = native.choose_slurm_driver("auto", executor, cli, {"SLURM_CONF": str(right)})
    assert choice.name == "cli" and str(right) in choice.reason and imported == []


def test_unreadable_conf_refuses_native_before_the_import(
    monkeypatch: pytest.MonkeyPatch, pyslurm_findable: None, tmp_path
) -> None:
    missing = str(tmp_path / "nope.conf")
    monkeypatch.setenv("SLURM_CONF", missing)
    with pytest.raises(SchedulerUnavailableError, match="not a readable file"):
        pyslurm_loading.ensure_loadable(missing)


def fake_python(tmp_path, body: str) -> str:
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_no_conf_anywhere_probes_the_import_in_a_child(
    monkeypatch: pytest.MonkeyPatch, pyslurm_findable: None, tmp_path
) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    fatal = "python: fatal: Unable to process configuration file"
    monkeypatch.setattr(sys, "executable", fake_python(tmp_path, f"echo '{fatal}' >&2; exit 1"))
    with pytest.raises(SchedulerUnavailableError, match="import pyslurm fails here: python: fatal"):
        pyslurm_loading.ensure_loadable(None)
    monkeypatch.setattr(pyslurm_loading, "_probed", {})
    monkeypatch.setattr(pyslurm_loading, "PROBE_TIMEOUT", 0.5)
    monkeypatch.setattr(sys, "executable", fake_python(tmp_path, "exec sleep 5"))
    with pytest.raises(SchedulerUnavailableError, match="did not finish"):
        pyslurm_loading.ensure_loadable(None)
    monkeypatch.setattr(pyslurm_loading, "_probed", {})
    monkeypatch.setattr(sys, "executable", fake_python(tmp_path, "exit 0"))
    pyslurm_loading.ensure_loadable(None)


def test_a_conf_that_does_not_parse_is_found_by_the_probe(
    monkeypatch: pytest.MonkeyPatch, pyslurm_findable: None, tmp_path
) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("BogusKey=1\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    fatal = "python: fatal: Unable to process configuration file"
    monkeypatch.setattr(sys, "executable", fake_python(tmp_path, f"echo '{fatal}' >&2; exit 1"))
    with pytest.raises(SchedulerUnavailableError, match="Unable to process configuration"):
        pyslurm_loading.ensure_loadable(str(conf))
    monkeypatch.setattr(pyslurm_loading, "_probed", {})
    monkeypatch.setattr(sys, "executable", fake_python(tmp_path, "exit 0"))
    pyslurm_loading.ensure_loadable(str(conf))


def test_not_installed_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "pyslurm", raising=False)
    monkeypatch.setattr(pyslurm_loading.importlib.util, "find_spec", lambda name, *rest: None)
    with pytest.raises(SchedulerUnavailableError, match="not importable"):
        pyslurm_loading.ensure_loadable("/any.conf")


# -- the driver with a fake pyslurm ---------------------------------------------------------


def driver_with(module: Any, executor: Optional[LocalExecutor] = None) -> native.SlurmNativeDriver:
    cli = SlurmCliDriver(executor or VersionExecutor(), query_retries=0.0)
    return native.SlurmNativeDriver.like(cli, module)


def staged(tmp_path) -> PreparedJob:
    folder = tmp_path / ".hpcbridge"
    folder.mkdir(exist_ok=True)
    wrapper = folder / "t.sh"
    wrapper.write_text("#!/bin/sh\nexit 0\n")
    exit_file = str(folder / "t.exit")
    return PreparedJob("t", str(tmp_path), str(wrapper), exit_file, ["a.sh"], "w")


def batch(job: PreparedJob, count: int, resources: Optional[Resources] = None) -> SubmitBatch:
    return SubmitBatch(job, count, resources or Resources(), (), f"{job.remote_dir}/slurm-%j.out")


def test_native_submit_and_refusal(tmp_path) -> None:
    module = fake_pyslurm()
    wrapper = staged(tmp_path).wrapper_path
    assert driver_with(module).submit(spec(wrapper=wrapper, partition="debug")) == "4242"
    assert module.submitted[0]["partitions"] == "debug"
    assert module.submitted[0]["script"] == "#!/bin/sh\nexit 0\n"  # the text, never the path
    refusing = fake_pyslurm(submit_error=RPCError("Invalid partition name specified"))
    with pytest.raises(JobSubmissionError, match="Invalid partition name specified") as caught:
        driver_with(refusing).submit(spec(wrapper=wrapper))
    assert caught.value.scheduler_message == "Invalid partition name specified"
    assert "JobSubmitDescription(" in describe(driver_with(module), batch(staged(tmp_path), 1))
    assert "array='0-2'" in describe(driver_with(module), batch(staged(tmp_path), 3))


def test_libslurms_own_words_go_into_the_error_not_onto_stderr(
    tmp_path, capfd: pytest.CaptureFixture[str]
) -> None:
    said = "python: error: invalid partition specified: nosuchpart\n"
    refusing = fake_pyslurm(
        submit_error=RPCError("Invalid partition name specified"), libslurm_says=said
    )
    with pytest.raises(JobSubmissionError) as caught:
        driver_with(refusing).submit(spec(wrapper=staged(tmp_path).wrapper_path))
    assert str(caught.value) == (
        "Slurm refused the job: Invalid partition name specified "
        "(invalid partition specified: nosuchpart)"
    )
    accepting = fake_pyslurm(libslurm_says="python: warning: something to note\n")
    assert driver_with(accepting).submit(spec(wrapper=staged(tmp_path).wrapper_path)) == "4242"
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    "error",
    [
        ValueError("Batch script contains no #! line"),
        TypeError("an integer is required"),
        RuntimeError("something else in pyslurm"),
    ],
)
def test_every_pyslurm_error_is_a_submission_error(tmp_path, error: Exception) -> None:
    driver = driver_with(fake_pyslurm(submit_error=error))
    with pytest.raises(JobSubmissionError) as caught:
        driver.submit(spec(wrapper=staged(tmp_path).wrapper_path))
    assert str(error) in str(caught.value) and caught.value.scheduler_message == str(error)


def test_missing_wrapper_is_a_submission_error(tmp_path) -> None:
    with pytest.raises(JobSubmissionError, match="cannot read the wrapper"):
        driver_with(fake_pyslurm()).submit(spec(wrapper=str(tmp_path / "gone.sh")))


def test_native_submit_many_array_and_environment(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPCBRIDGE_TASK_INDEX", "1")  # inherited from an enclosing job
    module = fake_pyslurm()
    executor = VersionExecutor()
    executor.env = {"SLURM_CONF": "/settings.conf"}
    job = staged(tmp_path)
    found = submit(driver_with(module, executor), batch(job, 2))
    assert found == [Submitted(f"4242_{i}", f"{tmp_path}/slurm-4242_{i}.out", i) for i in range(2)]
    kwargs = module.submitted[0]
    assert kwargs["array"] == "0-1"
    assert kwargs["standard_output"] == f"{tmp_path}/slurm-%A_%a.out"
    # As sbatch's --export=ALL: everything goes on; the Slurm wrapper reads its index
    # from SLURM_ARRAY_TASK_ID (or its argument), never from an inherited variable.
    assert kwargs["environment"]["HPCBRIDGE_TASK_INDEX"] == "1"
    assert kwargs["environment"]["SLURM_CONF"] == "/settings.conf"
    assert kwargs["environment"]["PATH"] == os.environ["PATH"]
    submit(driver_with(module), batch(job, 1))
    assert module.submitted[1]["environment"]["HPCBRIDGE_TASK_INDEX"] == "1"


def test_native_refused_array_goes_in_task_by_task_through_sbatch(tmp_path) -> None:
    class Sbatch(VersionExecutor):
        def run(self, argv, timeout=None, env=None, cwd=None, input=None, idempotent=True):
            self.calls.append(list(argv))
            return CommandResult(list(argv), 0, f"{len(self.calls) + 50}\n", "")

    executor = Sbatch()
    refusing = fake_pyslurm(submit_error=RPCError("Invalid job array specification"))
    driver = native.SlurmNativeDriver.like(SlurmCliDriver(executor), refusing)
    assert [item.job_id for item in submit(driver, batch(staged(tmp_path), 2))] == ["51", "52"]
    assert [argv[-1] for argv in executor.calls] == ["0", "1"]


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
    with pytest.raises(NotAskedNow, match="Unable to contact slurm controller"):
        down.query(["5"])
    no_db = driver_with(fake_pyslurm(jobs={}, history=RPCError("no slurmdbd")))
    assert no_db.query(["5"])["5"].state is JobState.UNKNOWN


def test_folded_exit_code_from_the_exit_file_of_a_submitted_job(tmp_path) -> None:
    job = staged(tmp_path)
    folded = fake_job(id=4242, state="FAILED", exit_code=15, end_time=1)
    module = fake_pyslurm(jobs={4242: folded})
    driver = driver_with(module)
    submit(driver, batch(job, 1))
    Path(job.exit_file).write_text("143\n")
    assert driver.query(["4242"])["4242"].exit_code == 143


def test_folded_exit_code_from_the_cli_for_a_job_submitted_elsewhere() -> None:
    sacct = "77|77|FAILED|137:0|Unknown|Unknown|None\n"  # sacct -X -P --noheader

    class Commands(VersionExecutor):
        def run(self, argv, timeout=None, env=None, cwd=None, input=None, idempotent=True):
            self.calls.append(list(argv))
            if argv[0] == "sacct":
                return CommandResult(list(argv), 0, sacct, "")
            return CommandResult(list(argv), 0, "", "")

    executor = Commands()
    module = fake_pyslurm(jobs={77: fake_job(id=77, state="FAILED", exit_code=9, end_time=1)})
    found = driver_with(module, executor).query(["77"])["77"]
    # squeue's light round (Slurm 25.11) knows nothing of 77: sacct does
    assert [call[0] for call in executor.calls if call[0] != "scontrol"] == ["squeue", "sacct"]
    assert found.exit_code == 137 and found.state is JobState.FAILED


def test_native_cancel_goes_through_scancel() -> None:
    # pyslurm's Job(id).cancel() answers None for running, finished and unknown ids
    module = fake_pyslurm()
    driver = driver_with(module)
    driver.cancel(["5", "9_2"])
    assert module.cancelled == []
    assert driver.executor.calls[-1] == ["scancel", "5", "9_2"]  # type: ignore[attr-defined]


def test_native_cancel_failure() -> None:
    refused = VersionExecutor(
        "scancel: error: Kill job error on job id 5: Access/permission denied", 1
    )
    with pytest.raises(SchedulerAdapterError, match="permission"):
        driver_with(fake_pyslurm(), refused).cancel(["5"])


@pytest.mark.parametrize("mem", ["1.5G", "2GB", "-1", "1 G"])
def test_both_drivers_refuse_a_mem_sbatch_refuses(tmp_path, mem: str) -> None:
    module = fake_pyslurm()
    executor = VersionExecutor()
    unchecked = Resources(mem=mem)  # built without Resources.from_mapping's rules
    for driver in (driver_with(module, executor), SlurmCliDriver(executor)):
        with pytest.raises(JobSubmissionError, match="invalid mem"):
            submit(driver, batch(staged(tmp_path), 1, unchecked))
    assert module.submitted == [] and executor.calls == []


def test_both_drivers_send_the_normalised_mem(tmp_path) -> None:
    module = fake_pyslurm()
    resources = Resources.from_mapping({"mem": "1.5G"})
    submit(driver_with(module), batch(staged(tmp_path), 1, resources))
    assert module.submitted[0]["memory_per_node"] == "1536M"
    argv = commands.sbatch_argv(spec(mem="1.5G"))
    assert "--mem=1536M" in argv


def test_native_output_path() -> None:
    driver = driver_with(fake_pyslurm())
    assert driver.find_output("5") == "/j/slurm-5.out"
    assert driver.find_output("404") is None


# The real pyslurm against a real Slurm 25.11: tests/integration/test_slurm_adapter.py
# (target 25.11-native) and tests/integration/test_slurm_pyslurm_conf.py.
