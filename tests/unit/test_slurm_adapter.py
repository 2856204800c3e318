"""RealSlurmAdapter against a fake Slurm (commands answered in Python, files real)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Dict, List

import pytest

from hpcbridge.engine.driver import PartialSubmissionError
from hpcbridge.errors import (
    ConfigurationError,
    JobNotFoundError,
    JobSubmissionError,
    SchedulerUnavailableError,
)
from hpcbridge.model import JobState
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from hpcbridge.settings.config import Settings
from hpcbridge.store.jobs import JobStore
from hpcbridge.transports.base import CommandResult
from hpcbridge.transports.local import LocalExecutor

#: sbatch's words past the association's MaxSubmitJobs (Slurm 22.05)
CAP_REFUSAL = (
    "sbatch: error: AssocMaxSubmitJobLimit\n"
    "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy "
    "(job submit limit, user's size and/or time limits)\n"
)


class FakeSlurm(LocalExecutor):
    """Files on the local disk; sbatch/squeue/sacct/scancel answered from ``jobs``."""

    def __init__(self) -> None:
        super().__init__()
        self.next_id = 100
        self.jobs: Dict[str, Dict[str, str]] = {}  # id -> {state, exit, reason}
        self.history: Dict[str, Dict[str, str]] = {}
        self.calls: List[List[str]] = []
        self.accounting = True
        self.controller_up = True
        self.refuse_arrays = False
        self.max_array = "1001"
        self.submitted: List[List[str]] = []
        #: MaxSubmitJobs on the user's association ("": none), enforced by sbatch
        self.cap = ""
        #: sbatch runs refused for the cap
        self.refused = 0
        #: jobs end as soon as they are submitted (a sweep through a cap moves on)
        self.end_at_once = False

    def run(self, argv, timeout=None, env=None, cwd=None, input=None, idempotent=True):
        argv = [str(part) for part in argv]
        self.calls.append(argv)
        handler = getattr(self, "_" + argv[0], None)
        if handler is None:
            return CommandResult(argv, 127, "", f"{argv[0]}: command not found")
        return handler(argv)

    def _ok(self, argv: List[str], out: str = "") -> CommandResult:
        return CommandResult(argv, 0, out, "")

    def _sbatch(self, argv: List[str]) -> CommandResult:
        if not self.controller_up:
            return CommandResult(
                argv,
                1,
                "",
                "sbatch: error: Batch job submission failed: Unable to contact slurm controller\n",
            )
        if any(part == "--partition=nosuch" for part in argv):
            return CommandResult(
                argv,
                1,
                "",
                "sbatch: error: Batch job submission failed: Invalid partition name specified\n",
            )
        array = next((part.split("=", 1)[1] for part in argv if part.startswith("--array=")), None)
        if array and self.refuse_arrays:
            return CommandResult(
                argv,
                1,
                "",
                "sbatch: error: Batch job submission failed: Invalid job array specification\n",
            )
        count = int(array.split("-")[1]) + 1 if array else 1
        queued = sum(job["state"] in ("PENDING", "RUNNING") for job in self.jobs.values())
        if self.cap and queued + count > int(self.cap):
            self.refused += 1
            return CommandResult(argv, 1, "", CAP_REFUSAL)
        self.submitted.append(argv)
        job_id = str(self.next_id)
        self.next_id += 1
        state = "COMPLETED" if self.end_at_once else "PENDING"
        if array:
            for index in range(count):
                self.jobs[f"{job_id}_{index}"] = {"state": state, "exit": "0", "reason": ""}
        else:
            self.jobs[job_id] = {"state": state, "exit": "0", "reason": ""}
        return self._ok(argv, f"{job_id};cluster\n")

    def _squeue(self, argv: List[str]) -> CommandResult:
        if not self.controller_up:
            return CommandResult(
                argv,
                1,
                "",
                "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n",
            )
        wanted = next(part for part in argv if part.startswith("--jobs=")).split("=", 1)[1]
        wanted_ids = set(wanted.split(","))
        rows = []
        for job_id, job in self.jobs.items():
            if job_id in wanted_ids or job_id.split("_")[0] in wanted_ids:
                status = int(job["exit"]) << 8
                rows.append(
                    f"{job_id}|{job_id}|{job['state']}|{job['reason'] or 'None'}|"
                    f"2026-11-29T15:32:06|2026-11-29T15:32:07|{status}|\n"
                )
        if not rows and len(wanted_ids) == 1 and "," not in wanted:
            return CommandResult(argv, 1, "", "slurm_load_jobs error: Invalid job id specified\n")
        return self._ok(argv, "".join(rows))

    def _sacct(self, argv: List[str]) -> CommandResult:
        if not self.accounting:
            return CommandResult(argv, 1, "", "Slurm accounting storage is disabled\n")
        wanted = set(next(p for p in argv if p.startswith("--jobs=")).split("=", 1)[1].split(","))
        rows = [
            f"{job_id}|{job_id}|{job['state']}|{job['exit']}:0|2026-11-29T15:32:06|"
            f"2026-11-29T15:32:07|None\n"
            for job_id, job in self.history.items()
            if job_id in wanted or job_id.split("_")[0] in wanted
        ]
        return self._ok(argv, "".join(rows))

    def _scancel(self, argv: List[str]) -> CommandResult:
        for job_id in argv[1:]:
            if job_id in self.jobs and self.jobs[job_id]["state"] in ("PENDING", "RUNNING"):
                self.jobs[job_id]["state"] = "CANCELLED"
        return self._ok(argv)

    def _scontrol(self, argv: List[str]) -> CommandResult:
        if argv[1:] == ["show", "config"]:
            return self._ok(argv, f"MaxArraySize            = {self.max_array}\n")
        if argv[1] == "--version":
            return self._ok(argv, "slurm-wlm 22.05.8\n")
        return CommandResult(argv, 1, "", "slurm_load_jobs error: Invalid job id specified\n")

    def _id(self, argv: List[str]) -> CommandResult:
        return self._ok(argv, "me\n")

    def _sacctmgr(self, argv: List[str]) -> CommandResult:
        if not self.accounting:
            return CommandResult(argv, 1, "", "sacctmgr: error: Problem talking to the database\n")
        if "assoc" in argv:
            return self._ok(argv, f"c|acct|{self.cap}|||normal\n")
        return self._ok(argv, "normal|||\n")

    def finish(self, job_id: str, state: str = "COMPLETED", code: int = 0) -> None:
        self.jobs[job_id].update(state=state, exit=str(code))

    def purge(self, job_id: str, to_history: bool = True) -> None:
        job = self.jobs.pop(job_id)
        if to_history:
            self.history[job_id] = job


@pytest.fixture
def fake() -> FakeSlurm:
    return FakeSlurm()


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/sh\necho hi\n")
    return str(path)


@pytest.fixture
def adapter(fake: FakeSlurm, tmp_path: Path) -> RealSlurmAdapter:
    settings = Settings.from_env(env={}, state_dir=str(tmp_path / "state"), scheduler="slurm")
    return RealSlurmAdapter(
        executor=fake,
        settings=settings,
        store=JobStore(tmp_path / "jobs.db"),
        remote_workdir=str(tmp_path / "jobs"),
        driver="cli",
        unknown_limit=3,
        command_timeout=1.0,  # a busy fake controller is asked again for a second at most
    )


def test_submit_job_argv_record_and_describe(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str, tmp_path: Path
) -> None:
    job_id = adapter.submit_job(
        script,
        {"partition": "debug", "time": "1", "gpus": 0},
        remote_dir=str(tmp_path / "jobs" / "a"),
    )
    assert job_id == "100"
    argv = fake.submitted[0]
    folder = str(tmp_path / "jobs" / "a")
    assert f"--output={folder}/slurm-%j.out" in argv and f"--chdir={folder}" in argv
    assert "--time=0:01:00" in argv and "--job-name=run.sh" in argv
    assert not any(part.startswith("--gpus") for part in argv)
    assert argv[-1].startswith(f"{folder}/.hpcbridge/") and os.path.exists(argv[-1])
    record = adapter.store.get("100", "slurm")
    assert record is not None and record.log_path == f"{folder}/slurm-100.out"
    assert record.exit_file and record.exit_file.endswith(".exit")
    described = adapter.describe_submission(script, {"qos": "fast"}, depends_on="100")
    assert described.startswith("sbatch --parsable --qos=fast")
    assert "--dependency=afterok:100" in described


def test_a_parent_slurm_forgot_is_judged_by_its_exit_code_file(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str
) -> None:
    """No accounting, purged from squeue: the record's exit-code file says how it ended."""
    fake.accounting = False
    completed, failed = adapter.submit_job(script), adapter.submit_job(script)
    for job_id, code in ((completed, "0"), (failed, "2")):
        fake.purge(job_id, to_history=False)
        record = adapter.store.get(job_id, "slurm")
        assert record is not None and record.exit_file
        Path(record.exit_file).write_text(f"{code}\n")
    child = adapter.submit_job(script, depends_on=completed)
    assert f"--dependency=afterok:{completed}" in fake.submitted[-1]
    with pytest.raises(JobSubmissionError, match=f"parent job {failed} already ended FAILED"):
        adapter.submit_job(script, depends_on=[child, failed])
    assert len(fake.submitted) == 3


def test_a_parent_the_controller_cannot_be_asked_about_stops_the_submission(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str, tmp_path: Path
) -> None:
    parent = adapter.submit_job(script)
    fake.controller_up = False
    with pytest.raises(SchedulerUnavailableError, match=f"cannot check the parent job.*{parent}"):
        adapter.submit_job(script, depends_on=parent, remote_dir=str(tmp_path / "child"))
    assert len(fake.submitted) == 1 and not (tmp_path / "child").exists()


def test_submission_error_carries_the_message(adapter: RealSlurmAdapter, script: str) -> None:
    with pytest.raises(JobSubmissionError, match="Invalid partition name specified"):
        adapter.submit_job(script, {"partition": "nosuch"})


def test_status_from_squeue_then_sacct_then_exit_file(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str
) -> None:
    first, second, third = (adapter.submit_job(script) for _ in range(3))
    fake.finish(first, "FAILED", 3)
    fake.finish(second, "COMPLETED", 0)
    fake.purge(second)  # now only in sacct
    fake.finish(third, "COMPLETED", 0)
    fake.purge(third, to_history=False)  # nowhere: accounting lost it
    record = adapter.store.get(third, "slurm")
    assert record is not None and record.exit_file
    Path(record.exit_file).write_text("0\n")
    fake.calls.clear()
    found = adapter.get_job_statuses([first, second, third])
    assert found[first].state is JobState.FAILED and found[first].exit_code == 3
    assert found[second].state is JobState.COMPLETED
    assert found[third].state is JobState.COMPLETED and "exit-code file" in found[third].reason
    # (and, once, scontrol --version: has squeue --only-job-state?)
    assert [call[0] for call in fake.calls if call[0] != "scontrol"] == ["squeue", "sacct"]


def test_accounting_off_exit_file_failure_then_unknown(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str
) -> None:
    fake.accounting = False
    failed, lost = adapter.submit_job(script), adapter.submit_job(script)
    for job_id in (failed, lost):
        fake.purge(job_id, to_history=False)
    record = adapter.store.get(failed, "slurm")
    assert record is not None and record.exit_file
    Path(record.exit_file).write_text("4\n")
    found = adapter.get_job_statuses([failed, lost])
    assert found[failed].state is JobState.FAILED and found[failed].exit_code == 4
    assert found[lost].state is JobState.UNKNOWN


def test_never_existing_id_raises_after_the_streak(adapter: RealSlurmAdapter) -> None:
    with pytest.raises(JobNotFoundError, match="3 times in a row"):
        adapter.wait_until_complete("999999", poll_interval=0.01)


def test_controller_down_is_unknown_then_final(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str
) -> None:
    job_id = adapter.submit_job(script)
    fake.controller_up = False
    status = adapter.get_job_status(job_id)
    assert status.state is JobState.UNKNOWN and "Unable to contact" in status.reason
    fake.controller_up = True
    fake.finish(job_id)
    assert adapter.wait(job_id, poll_interval=0.01).state is JobState.COMPLETED


def test_cancel_then_confirm(adapter: RealSlurmAdapter, fake: FakeSlurm, script: str) -> None:
    job_id = adapter.submit_job(script)
    fake.calls.clear()
    adapter.cancel_job(job_id)
    assert [call[0] for call in fake.calls] == ["scancel"]
    assert adapter.store.get(job_id, "slurm").cancel_requested  # type: ignore[union-attr]
    assert adapter.get_job_status(job_id).state is JobState.CANCELLED
    done = adapter.submit_job(script)
    fake.finish(done)
    fake.purge(done)
    adapter.cancel_job(done)  # already finished and purged: no error


def test_submit_many_one_array(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str, tmp_path: Path
) -> None:
    other = tmp_path / "other.sh"
    other.write_text("exit 3\n")
    ids = adapter.submit_many([script, (str(other), ["x y"]), script], {"job_name": "sweep"})
    assert ids == ["100_0", "100_1", "100_2"]
    assert len(fake.submitted) == 1 and "--array=0-2" in fake.submitted[0]
    assert "--job-name=sweep" in fake.submitted[0]
    output = next(part for part in fake.submitted[0] if part.startswith("--output="))
    assert output.endswith("/slurm-%A_%a.out")
    wrapper = Path(fake.submitted[0][-1]).read_text()
    table = Path(fake.submitted[0][-1] + ".0").read_text()  # other.sh travels in it
    assert "SLURM_ARRAY_TASK_ID" in wrapper and "'x y'" in table
    records = [adapter.store.get(job_id, "slurm") for job_id in ids]
    assert all(record is not None for record in records)
    assert records[1].exit_file.endswith(".exit.1")  # type: ignore[union-attr]
    assert records[1].log_path.endswith("/slurm-100_1.out")  # type: ignore[union-attr]
    assert records[1].script.endswith("/other.sh")  # type: ignore[union-attr]
    fake.finish("100_1", "FAILED", 3)
    fake.finish("100_0")
    fake.finish("100_2")
    final = adapter.wait_all(ids, poll_interval=0.01)
    assert final["100_1"].state is JobState.FAILED and final["100_1"].exit_code == 3
    assert final["100_0"].state is JobState.COMPLETED


def test_distinct_scripts_go_in_as_one_array_each_task_keeping_its_own_name(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str, tmp_path: Path
) -> None:
    other = tmp_path / "other.sh"
    other.write_text("exit 3\n")
    jobs = [script, script, str(other), script]
    ids = adapter.submit_many(jobs, {"output": "%x-%A_%a.log"})
    assert ids == ["100_0", "100_1", "100_2", "100_3"]
    assert len(fake.submitted) == 1 and "--array=0-3" in fake.submitted[0]
    # Slurm names an array once: the first task's name and how many follow it.
    assert "--job-name=run.sh+3" in fake.submitted[0]
    # the table runs each its own; other.sh, one task's alone, travels in it
    table = Path(fake.submitted[0][-1] + ".0").read_text()
    assert "/run.sh" in table and "/other.sh" in table and "exit 3" in table
    records = [adapter.store.get(job_id, "slurm") for job_id in ids]
    assert [r.job_name for r in records if r] == ["run.sh", "run.sh", "other.sh", "run.sh"]
    assert [os.path.basename(r.script) for r in records if r] == [
        "run.sh",
        "run.sh",
        "other.sh",
        "run.sh",
    ]
    # %x is what Slurm writes: the array's one name, for every task
    assert [os.path.basename(r.log_path) for r in records if r] == [
        f"run.sh+3-100_{index}.log" for index in range(4)
    ]
    described = adapter.describe_many(jobs)
    assert "--job-name=run.sh+3" in described
    assert "each named after its own: run.sh, other.sh" in described


def test_where_arrays_are_refused_each_task_goes_in_under_its_own_name(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str, tmp_path: Path
) -> None:
    fake.refuse_arrays = True
    other = tmp_path / "other.sh"
    other.write_text("exit 3\n")
    ids = adapter.submit_many([script, str(other)], {"output": "%x-%j.log"})
    assert ids == ["100", "101"]
    names = [next(p for p in argv if p.startswith("--job-name=")) for argv in fake.submitted]
    assert names == ["--job-name=run.sh", "--job-name=other.sh"]
    records = [adapter.store.get(job_id, "slurm") for job_id in ids]
    assert [os.path.basename(r.log_path) for r in records if r] == [
        "run.sh-100.log",
        "other.sh-101.log",
    ]


def test_a_given_job_name_names_the_array_and_every_task(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str, tmp_path: Path
) -> None:
    other = tmp_path / "other.sh"
    other.write_text("true\n")
    ids = adapter.submit_many([script, str(other)], {"job_name": "sweep"})
    assert "--job-name=sweep" in fake.submitted[0]
    assert [adapter.store.get(i, "slurm").job_name for i in ids] == ["sweep", "sweep"]  # type: ignore[union-attr]


def test_submit_many_respects_max_array_size(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str
) -> None:
    fake.max_array = "2"
    fake.jobs["7"] = {"state": "RUNNING", "exit": "0", "reason": ""}
    ids = adapter.submit_many([script] * 5, depends_on=["7"])
    assert ids == ["100_0", "100_1", "101_0", "101_1", "102"]
    assert [part for part in fake.submitted[0] if part.startswith("--array")] == ["--array=0-1"]
    assert not any(part.startswith("--array") for part in fake.submitted[2])
    assert all("--dependency=afterok:7" in argv for argv in fake.submitted)
    folders = {argv[-1].rsplit("/.hpcbridge/", 1)[0] for argv in fake.submitted}
    assert len(folders) == 1  # one job folder for the whole batch
    assert len({argv[-1] for argv in fake.submitted}) == 3  # one wrapper per chunk
    fake.calls.clear()
    adapter.submit_many([script] * 2)
    assert not any(call[:3] == ["scontrol", "show", "config"] for call in fake.calls)  # cached


def test_submit_many_falls_back_when_arrays_are_refused(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str
) -> None:
    fake.refuse_arrays = True
    ids = adapter.submit_many([script] * 3)
    assert ids == ["100", "101", "102"]
    # Each task's index is the wrapper's argument (no --export: see sbatch_argv).
    assert [argv[-1] for argv in fake.submitted] == ["0", "1", "2"]
    assert not any(p.startswith("--export") for argv in fake.submitted for p in argv)
    assert len({argv[-2] for argv in fake.submitted}) == 1  # one wrapper picks each task
    wrapper = Path(fake.submitted[0][-2]).read_text()
    assert 'hpcb_index="${1:-${SLURM_ARRAY_TASK_ID:-}}"' in wrapper
    for index, job_id in enumerate(ids):
        record = adapter.store.get(job_id, "slurm")
        assert record is not None and record.exit_file.endswith(f".exit.{index}")  # type: ignore[union-attr]
        assert record.log_path.endswith(f"/slurm-{job_id}.out")


def test_refused_array_then_controller_lost_records_what_went_in(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str
) -> None:
    fake.refuse_arrays = True
    real_sbatch = fake._sbatch

    def sbatch(argv: List[str]):  # the controller goes away after two jobs
        if len(fake.submitted) == 2:
            fake.controller_up = False
        return real_sbatch(argv)

    fake._sbatch = sbatch  # type: ignore[method-assign]
    with pytest.raises(PartialSubmissionError) as caught:
        adapter.submit_many([script] * 4)
    assert caught.value.submitted_ids == ["100", "101"]
    assert "Unable to contact slurm controller" in str(caught.value)
    assert all(adapter.store.get(job_id, "slurm") is not None for job_id in ("100", "101"))


def test_max_array_size_keyword_overrides_the_cluster(
    fake: FakeSlurm, script: str, tmp_path: Path
) -> None:
    settings = Settings.from_env(env={}, state_dir=str(tmp_path / "state"), scheduler="slurm")
    adapter = RealSlurmAdapter(
        executor=fake,
        settings=settings,
        store=JobStore(tmp_path / "jobs.db"),
        remote_workdir=str(tmp_path / "jobs"),
        driver="cli",
        max_array_size=2,
    )
    assert adapter.max_array_size() == 2
    fake.accounting = False  # no cap to read (which would read ClusterName)
    assert adapter.submit_many([script] * 3) == ["100_0", "100_1", "101"]
    assert not any(call[:3] == ["scontrol", "show", "config"] for call in fake.calls)


def test_submit_many_single_job_is_plain(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str
) -> None:
    assert adapter.submit_many([script]) == ["100"]


def test_two_hundred_statuses_two_commands(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str
) -> None:
    ids = adapter.submit_many([script] * 200)
    for job_id in ids[:150]:
        fake.finish(job_id)
    for job_id in ids[150:]:
        fake.finish(job_id)
        fake.purge(job_id)
    fake.calls.clear()
    found = adapter.get_job_statuses(ids)
    assert all(status.state is JobState.COMPLETED for status in found.values())
    assert len([call for call in fake.calls if call[0] != "scontrol"]) <= 2


def test_task_cancel(adapter: RealSlurmAdapter, fake: FakeSlurm, script: str) -> None:
    ids = adapter.submit_many([script] * 3)
    adapter.cancel_job(ids[1])
    found = adapter.get_job_statuses(ids)
    assert found[ids[1]].state is JobState.CANCELLED
    assert found[ids[0]].state is JobState.PENDING


def test_native_driver_required_but_missing(
    fake: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpcbridge.schedulers.slurm import native_driver as native

    monkeypatch.setattr(native, "installed_pyslurm_version", lambda: None)  # not installed
    settings = Settings.from_env(env={}, state_dir=str(tmp_path), scheduler="slurm")
    with pytest.raises(SchedulerUnavailableError, match="not importable"):
        RealSlurmAdapter(executor=fake, settings=settings, driver="native").open()
    adapter = RealSlurmAdapter(executor=fake, settings=settings)
    session = adapter.open()
    assert session.driver.name == "cli" and "not importable" in adapter.describe()
    assert session.choice.name == "cli" and "not importable" in session.choice.reason


def test_unknown_driver_name(fake: FakeSlurm, tmp_path: Path) -> None:
    settings = Settings.from_env(env={}, state_dir=str(tmp_path), scheduler="slurm")
    with pytest.raises(ConfigurationError, match="unknown slurm driver 'fast'"):
        RealSlurmAdapter(executor=fake, settings=settings, driver="fast")


def test_logs_and_log_path_without_record(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str
) -> None:
    job_id = adapter.submit_job(script)
    assert adapter.get_job_logs(job_id) == ""
    record = adapter.store.get(job_id, "slurm")
    assert record is not None and record.log_path
    Path(record.log_path).write_text("hello\n")
    assert adapter.get_job_logs(job_id) == "hello\n"
    with pytest.raises(JobNotFoundError):
        adapter.log_path("55555")


def test_normalize_job_id(adapter: RealSlurmAdapter) -> None:
    assert adapter.normalize_job_id(" 12;cluster ") == "12"
    assert adapter.normalize_job_id(12) == "12"


def test_output_override(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str, tmp_path: Path
) -> None:
    job_id = adapter.submit_job(script, {"output": "out-%x-%j.log"}, remote_dir=str(tmp_path / "o"))
    record = adapter.store.get(job_id, "slurm")
    assert record is not None
    assert record.log_path == str(tmp_path / "o" / f"out-run.sh-{job_id}.log")


def test_array_output_override_keeps_paths_knowable(
    adapter: RealSlurmAdapter, fake: FakeSlurm, script: str
) -> None:
    ids = adapter.submit_many([script] * 2, resources={"output": "task-%j.log"})
    output = next(part for part in fake.submitted[0] if part.startswith("--output="))
    assert output.endswith("/task-%A_%a.log")
    record = adapter.store.get(ids[1], "slurm")
    assert record is not None and record.log_path.endswith("/task-100_1.log")  # type: ignore[union-attr]


# -- the cluster's cap on queued jobs: known, met, read after a refusal; shared --------


def sacctmgr_runs(fake: FakeSlurm) -> int:
    return sum(call[0] == "sacctmgr" for call in fake.calls)


def slurm_adapter(fake: FakeSlurm, tmp_path: Path, **env: str) -> RealSlurmAdapter:
    """An adapter of this user's state folder (``tmp_path/state``), as another process
    of theirs would make it, opened (``scontrol show config``) before it submits."""
    settings = Settings.from_env(
        env={"HPCBRIDGE_POLL_INTERVAL": "1", "HPCBRIDGE_MIN_POLL_INTERVAL": "0", **env},
        state_dir=str(tmp_path / "state"),
        scheduler="slurm",
    )
    made = RealSlurmAdapter(
        executor=fake,
        settings=settings,
        store=JobStore(tmp_path / "jobs.db"),
        remote_workdir=str(tmp_path / "jobs"),
        driver="cli",
    )
    made.max_array_size()
    return made


def commands_of(fake: FakeSlurm, call: Callable[[], object]) -> List[str]:
    """The commands ``call()`` ran, in order."""
    before = len(fake.calls)
    call()
    return [argv[0] for argv in fake.calls[before:]]


def test_a_first_submit_many_runs_sbatch_alone(
    fake: FakeSlurm, script: str, tmp_path: Path
) -> None:
    fake.cap = "40"
    first = slurm_adapter(fake, tmp_path)  # a new state folder: no cap known
    assert commands_of(fake, lambda: first.submit_many([script] * 3)) == ["sbatch"]
    assert not (tmp_path / "state" / "cache").exists()


def test_one_job_pays_no_look_up(fake: FakeSlurm, script: str, tmp_path: Path) -> None:
    fake.cap = "40"
    adapter = slurm_adapter(fake, tmp_path)
    assert commands_of(fake, lambda: adapter.submit_job(script)) == ["sbatch"]
    assert commands_of(fake, lambda: adapter.submit_many([script])) == ["sbatch"]
    assert len(fake.submitted) == 2


def test_a_cap_met_is_read_then_known_to_every_process_of_the_state_folder(
    fake: FakeSlurm, script: str, tmp_path: Path
) -> None:
    fake.cap, fake.end_at_once = "2", True
    first = slurm_adapter(fake, tmp_path)
    ids = first.submit_many([script] * 3)  # the array of 3 refused whole, then fed by 2
    assert len(set(ids)) == 3 and fake.refused == 1
    assert sacctmgr_runs(fake) == 2  # read after the refusal: the association, its QOS
    assert first.open().driver.queue_limit() == 2
    second = slurm_adapter(fake, tmp_path)  # another process: the cap is known
    assert len(set(second.submit_many([script] * 3))) == 3
    assert fake.refused == 1  # fed through the known cap from the start
    assert sacctmgr_runs(fake) == 2
    assert len(second.submit_many([script] * 2)) == 2  # within the cap: one array
    assert len(list((tmp_path / "state" / "cache").glob("queue-limit-*.json"))) == 1


def test_the_cap_is_read_once_for_every_adapter_of_the_state_folder(
    fake: FakeSlurm, tmp_path: Path
) -> None:
    fake.cap = "40"
    assert slurm_adapter(fake, tmp_path).open().driver.queue_limit(ask=False) is None
    assert sacctmgr_runs(fake) == 0  # not asked: nothing known yet
    assert slurm_adapter(fake, tmp_path).open().driver.queue_limit() == 40
    assert sacctmgr_runs(fake) == 2  # the association, then its QOS
    second = slurm_adapter(fake, tmp_path)  # another process of the same user
    assert second.open().driver.queue_limit() == 40
    assert second.open().driver.queue_limit(ask=False) == 40
    assert sacctmgr_runs(fake) == 2
    # another account is another association: read on its own
    assert second.open().driver.queue_limit("other") is None
    assert sacctmgr_runs(fake) == 4


def test_no_cap_at_all_is_remembered_too(fake: FakeSlurm, tmp_path: Path) -> None:
    assert slurm_adapter(fake, tmp_path).open().driver.queue_limit() is None
    assert slurm_adapter(fake, tmp_path).open().driver.queue_limit() is None
    assert sacctmgr_runs(fake) == 2


def test_a_cap_given_is_never_looked_up(fake: FakeSlurm, script: str, tmp_path: Path) -> None:
    adapter = slurm_adapter(fake, tmp_path)
    assert len(adapter.submit_many([script] * 3, max_queued=5)) == 3
    by_env = slurm_adapter(fake, tmp_path, HPCBRIDGE_MAX_QUEUED="5")
    assert len(by_env.submit_many([script] * 3)) == 3
    assert sacctmgr_runs(fake) == 0
    assert not (tmp_path / "state" / "cache").exists()
