"""How a submission is cut into chunks and what each task and chunk is called (pure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from hpcbridge.engine.driver import SubmitBatch, Submitted
from hpcbridge.engine.jobscript import (
    TaskSpec,
    plan_chunks,
    shared_name,
    staged_basenames,
    wrapper_files,
)
from hpcbridge.engine.submitting import Placement, Stager, job_records
from hpcbridge.resources import Resources
from hpcbridge.schedulers.flux import jobspec as flux_jobspec
from hpcbridge.schedulers.flux import planning
from hpcbridge.schedulers.flux import request as flux_request
from hpcbridge.transports.local import LocalExecutor


def tasks(*scripts: str) -> List[TaskSpec]:
    return [TaskSpec(f"/home/me/{script}") for script in scripts]


def test_distinct_scripts_make_one_chunk_each_task_keeping_its_own_name() -> None:
    many = tasks(*(f"t{index}.sh" for index in range(100)))
    chunks = plan_chunks("/j", many, None, 1001, "T")
    assert len(chunks) == 1
    job, chunk = chunks[0]
    assert chunk == many
    assert job.task_names == tuple(f"t{index}.sh" for index in range(100))
    assert job.job_name == "t0.sh+99"
    assert job.scripts == [f"/j/t{index}.sh" for index in range(100)]
    assert [job.name_of(index) for index in (0, 57, 99)] == ["t0.sh", "t57.sh", "t99.sh"]


def test_chunks_are_cut_only_at_the_size_limit() -> None:
    five = tasks("a.sh", "a.sh", "b.sh", "b.sh", "c.sh")
    chunks = plan_chunks("/j", five, None, 2, "T")
    assert [len(chunk) for _, chunk in chunks] == [2, 2, 1]
    assert [job.token for job, _ in chunks] == ["T", "T-1", "T-2"]
    assert [job.job_name for job, _ in chunks] == ["a.sh", "b.sh", "c.sh"]
    mixed = plan_chunks("/j", tasks("a.sh", "b.sh", "a.sh", "c.sh", "d.sh"), None, 3, "T")
    assert [job.job_name for job, _ in mixed] == ["a.sh+2", "c.sh+1"]
    assert [job.task_names for job, _ in mixed] == [("a.sh", "b.sh", "a.sh"), ("c.sh", "d.sh")]
    assert {job.remote_dir for job, _ in mixed} == {"/j"}


def test_a_given_job_name_names_the_chunk_and_every_task() -> None:
    [(job, _)] = plan_chunks("/j", tasks("a.sh", "b.sh"), "train", 10, "T")
    assert job.job_name == "train"
    assert job.task_names == ("train", "train")


def test_same_named_scripts_of_different_folders_are_staged_apart() -> None:
    two = [TaskSpec("/x/run.sh"), TaskSpec("/y/run.sh")]
    [(job, _)] = plan_chunks("/j", two, None, 10, "T")
    assert job.scripts == ["/j/run.sh", "/j/run.sh.2"]
    assert job.job_name == "run.sh" and job.task_names == ("run.sh", "run.sh")


def test_single_use_scripts_are_those_one_task_of_the_whole_submission_runs() -> None:
    """Only they may travel in a table: two tasks writing one file at once would race."""
    chunks = plan_chunks("/j", tasks("a.sh", "b.sh", "c.sh", "a.sh", "d.sh"), None, 2, "T")
    assert [sorted(job.single_use) for job, _ in chunks] == [["/j/b.sh"], ["/j/c.sh"], []]
    [(alone, _)] = plan_chunks("/j", tasks("a.sh"), None, 10, "T")
    assert alone.single_use == frozenset()  # a one-task wrapper runs its copied script


def test_the_stager_bundles_what_can_travel_and_copies_the_rest(tmp_path: Path) -> None:
    written = {
        "a.sh": b"echo a\n",
        "bin": b"\x7fELF\0\1",
        "open.sh": b"echo no line end",
        "twice.sh": b"echo twice\n",
    }
    for name, data in written.items():
        (tmp_path / name).write_bytes(data)
    many = [TaskSpec(str(tmp_path / name)) for name in [*written, "twice.sh"]]
    jobs = tmp_path / "jobs"
    [(job, chunk)] = plan_chunks(str(jobs), many, None, 10, "T")
    stager = Stager(LocalExecutor(), str(jobs), "out")
    bundled = stager.bundle(job, chunk)
    assert bundled == {str(jobs / "a.sh"): "echo a\n"}
    files = wrapper_files(job, chunk, None, bundled=bundled)
    stager.stage(job, chunk, files, bundled.keys())
    staged = sorted(path.name for path in jobs.iterdir() if path.is_file())
    assert staged == ["bin", "open.sh", "twice.sh"]  # a.sh is in the table
    assert "echo a" in Path(job.wrapper_path + ".0").read_text()


def test_a_shared_folder_keeps_one_name_per_script_across_submissions() -> None:
    """A sweep's submissions stage into one folder: the names given over all its scripts."""
    everyone = staged_basenames(["/p/run.sh", "/t/run.sh", "/p/run.sh", "/t/x.sh"])
    assert everyone == {"/p/run.sh": "run.sh", "/t/run.sh": "run.sh.2", "/t/x.sh": "x.sh"}
    [(job, _)] = plan_chunks("/j", [TaskSpec("/t/run.sh")], None, 10, "T", everyone)
    assert job.scripts == ["/j/run.sh.2"]  # alone in its submission, still not run.sh
    assert staged_basenames(["/q/run.sh"], everyone)["/q/run.sh"] == "run.sh.3"


@pytest.mark.parametrize(
    "names, shown",
    [
        (["a.sh"], "a.sh"),
        (["a.sh"] * 3, "a.sh"),
        (["a.sh", "b.sh"], "a.sh+1"),
        (["b.sh", "a.sh", "a.sh"], "b.sh+2"),
    ],
)
def test_shared_name(names: List[str], shown: str) -> None:
    assert shared_name(names) == shown


def test_shared_name_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError):
        shared_name([])


def test_every_record_keeps_its_own_tasks_name() -> None:
    three = tasks("a.sh", "b.sh", "c.sh")
    [(job, chunk)] = plan_chunks("/j", three, None, 10, "T")
    batch = SubmitBatch(job, 3, Resources(), (), "/j/slurm-%A_%a.out")
    went = [Submitted(f"7_{index}", f"/j/slurm-7_{index}.out", index) for index in (2, 0)]
    records = job_records(went, batch, chunk, Placement("slurm", "local", "h"), None)
    assert [(r.job_id, r.job_name, r.script) for r in records] == [
        ("7_2", "c.sh", "/home/me/c.sh"),
        ("7_0", "a.sh", "/home/me/a.sh"),
    ]


# -- Flux: every job is its own submission, under its own name ---------------------------


def flux_plan(*scripts: str) -> flux_request.FluxPlan:
    [(job, _)] = plan_chunks("/j", tasks(*scripts), None, 100, "T")
    batch = SubmitBatch(job, len(scripts), Resources(), (), "/j/flux-{{id}}.out")
    request = flux_request.SubmitRequest(job.wrapper_path, job.job_name, batch.output, "/j")
    environments = tuple({"HPCBRIDGE_TASK_INDEX": str(i)} for i in range(len(scripts)))
    names = tuple(job.name_of(index) for index in range(len(scripts)))
    return flux_request.FluxPlan(request, environments, planning.job_keys("T", len(scripts)), names)


def test_each_flux_job_carries_its_own_name_and_key() -> None:
    made = flux_plan("a.sh", "b.sh", "c.sh")
    assert [made.job(index).job_name for index in range(3)] == ["a.sh", "b.sh", "c.sh"]
    assert [made.job(index).key for index in range(3)] == ["T.0", "T.1", "T.2"]
    again = made.only([2, 0])
    assert again.names == ("c.sh", "a.sh") and again.keys == ("T.2", "T.0")
    assert again.environments == ({"HPCBRIDGE_TASK_INDEX": "2"}, {"HPCBRIDGE_TASK_INDEX": "0"})
    assert again.job(0).job_name == "c.sh"


class _Spec:
    """What ``submit_all`` does to a jobspec (JobspecV1's setters), recorded."""

    def __init__(self, jobname: str) -> None:
        self.attributes: Dict[str, Any] = {"system.job.name": jobname}
        self.environment: Dict[str, str] = {}

    @classmethod
    def from_batch_command(cls, script: str, jobname: str, **_: Any) -> _Spec:
        return cls(jobname)

    def setattr(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def dumps(self) -> str:
        return json.dumps(self.attributes)


class _FluxJob:
    JobspecV1 = _Spec

    def __init__(self) -> None:
        self.sent: List[Dict[str, Any]] = []

    def submit_async(self, handle: Any, text: str) -> Any:
        self.sent.append(json.loads(text))
        number = len(self.sent)

        class Future:
            def get_id(self) -> int:
                return number

        return Future()


def test_the_bulk_submission_names_each_job_after_its_own_script() -> None:
    made = flux_plan("a.sh", "b.sh")
    flux_job = _FluxJob()
    params = flux_jobspec.jobspec_params(made.request)
    found = flux_jobspec.submit_all(
        None, flux_job, params, made.environments, {}, made.keys, names=made.names
    )
    assert found == [(True, 1), (True, 2)]
    assert [sent["system.job.name"] for sent in flux_job.sent] == ["a.sh", "b.sh"]
