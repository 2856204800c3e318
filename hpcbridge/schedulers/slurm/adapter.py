"""RealSlurmAdapter: Slurm through pyslurm or its CLI, over any executor.

Status comes from the driver (squeue, then sacct); a job neither knows is
looked up in the wrapper's exit-code file (accounting off, history purged);
only then is it UNKNOWN, and only a streak of UNKNOWN is "not found".
Bulk submission is one ``sbatch --array=0-N`` per ``MaxArraySize`` chunk.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ...config import Settings
from ...errors import (
    JobSubmissionError,
    SchedulerAdapterError,
    SchedulerUnavailableError,
)
from ...jobscript import PreparedJob, TaskSpec, marker_path, new_token
from ...model import JobState, JobStatus
from ...resources import Resources
from ...store import JobRecord, JobStore
from ...transports.base import Executor
from ..base import SchedulerAdapter
from . import commands
from .cli import SlurmCliDriver, log_once
from .native import DriverChoice, SlurmNativeDriver, choose_driver

log = logging.getLogger("hpcbridge.slurm")

Driver = Union[SlurmCliDriver, SlurmNativeDriver]


class RealSlurmAdapter(SchedulerAdapter):
    """Submits, follows, logs and cancels Slurm jobs."""

    scheduler_name = "slurm"
    output_template = "slurm-{id}.out"
    output_placeholder = "%j"
    #: the default output of an array task: ``%A`` array id, ``%a`` task index
    array_output_template = "slurm-%A_%a.out"

    def __init__(
        self,
        executor: Optional[Executor] = None,
        remote_workdir: Optional[str] = None,
        *,
        settings: Optional[Settings] = None,
        store: Optional[JobStore] = None,
        driver: Optional[str] = None,
        unknown_limit: Optional[int] = None,
        command_timeout: Optional[float] = None,
        max_array_size: Optional[int] = None,
        command_env: Optional[Mapping[str, str]] = None,
    ) -> None:
        """``driver``: "auto" (pyslurm when it imports and matches, else the CLI),
        "native" or "cli"; default from ``HPCBRIDGE_SLURM_DRIVER``.
        ``command_env``: extra environment for the Slurm commands (e.g.
        ``{"SLURM_CONF": ...}`` over SSH).  ``max_array_size`` overrides the
        cluster's ``MaxArraySize`` (else asked once)."""
        super().__init__(
            executor,
            remote_workdir,
            settings=settings,
            store=store,
            unknown_limit=unknown_limit,
            command_timeout=command_timeout,
        )
        driver = driver or self.settings.slurm_driver
        self.cli_driver = SlurmCliDriver(self.executor, self.command_timeout, command_env)
        self.driver_choice: DriverChoice = choose_driver(driver, self.executor, self.cli_driver)
        self.driver: Driver = self.cli_driver
        if self.driver_choice.name == "native":
            try:
                self.driver = SlurmNativeDriver(self.cli_driver)
            except Exception as exc:  # pyslurm imported once, then failed to load
                self.driver_choice = DriverChoice("cli", f"pyslurm failed to load: {exc}")
        if driver == "native" and self.driver.name != "native":
            raise SchedulerUnavailableError(
                f"the pyslurm driver cannot be used: {self.driver_choice.reason}"
            )
        if self.driver.name == "cli" and driver == "auto":
            log_once(
                f"driver:{self.driver_choice.reason}",
                "Slurm: using the CLI driver (%s)",
                self.driver_choice.reason,
                level=logging.WARNING
                if "does not match" in self.driver_choice.reason
                else logging.INFO,
            )
        self._max_array_size = max_array_size

    # -- ids, output paths ---------------------------------------------------------

    def normalize_job_id(self, job_id: Any) -> str:
        return commands.normalize_job_id(job_id)

    def describe(self) -> str:
        choice = self.driver_choice
        return f"slurm via {self.executor.kind} ({self.driver.name} driver: {choice.reason})"

    def _task_index_variable(self) -> Optional[str]:
        return "SLURM_ARRAY_TASK_ID"

    def _resolve_output(self, job: PreparedJob, resources: Resources, job_id: str) -> str:
        return commands.output_for_task(
            self.output_path(job, resources), job_id, job_name=job.job_name
        )

    def _array_output(self, job: PreparedJob, resources: Resources) -> str:
        if not resources.output:
            return f"{job.remote_dir.rstrip('/')}/{self.array_output_template}"
        # In an array, %j is each task's own job id, unknown until the task
        # starts: %A_%a names the same task and is known at submission.
        return re.sub(r"(?<!%)%j", "%A_%a", self.output_path(job, resources))

    def _spec(
        self,
        job: PreparedJob,
        resources: Resources,
        depends_on: Sequence[str],
        output: Optional[str] = None,
        array: Optional[str] = None,
    ) -> commands.SubmitSpec:
        return commands.SubmitSpec(
            wrapper_path=job.wrapper_path,
            workdir=job.remote_dir,
            output=output or self.output_path(job, resources),
            job_name=job.job_name,
            resources=resources,
            depends_on=tuple(depends_on),
            array=array,
        )

    # -- the four operations ---------------------------------------------------------

    def _describe(self, job: PreparedJob, resources: Resources, depends_on: List[str]) -> str:
        return self.driver.describe(self._spec(job, resources, depends_on))

    def _submit(self, job: PreparedJob, resources: Resources, depends_on: List[str]) -> str:
        return self.driver.submit(self._spec(job, resources, depends_on))

    def _query(self, job_ids: List[str], records: Mapping[str, JobRecord]) -> Dict[str, JobStatus]:
        answers = self.driver.query(job_ids)
        for job_id in job_ids:
            if job_id not in answers:
                answers[job_id] = self._from_exit_file(job_id, records.get(job_id))
        return answers

    def _from_exit_file(self, job_id: str, record: Optional[JobRecord]) -> JobStatus:
        """Neither squeue nor sacct knows the job: did the wrapper record an end?"""
        unknown = JobStatus(
            job_id, JobState.UNKNOWN, reason="not in squeue, not in sacct, no exit-code file"
        )
        found = self._status_from_exit_file(unknown, record)
        if found is None:
            return unknown
        return found.with_(
            native_state="(exit-code file)",
            reason="from the exit-code file (not in squeue or sacct)",
        )

    def _cancel(self, job_ids: List[str]) -> None:
        self.driver.cancel(job_ids)
        # Confirm with one status round (records CANCELLED where Slurm already
        # says so); a job that had already finished keeps its final state.
        try:
            confirmed = self.get_job_statuses(job_ids)
        except SchedulerAdapterError as exc:
            log.debug("could not confirm the cancel of %s: %s", ", ".join(job_ids), exc)
            return
        for job_id, status in confirmed.items():
            log.debug("after scancel, %s is %s (%s)", job_id, status.state, status.native_state)

    def _find_log_path(self, job_id: str) -> Optional[str]:
        return self.driver.output_path(job_id)

    # -- bulk submission: job arrays ---------------------------------------------------

    def max_array_size(self) -> int:
        """``MaxArraySize`` of the cluster (asked once): tasks per array."""
        if self._max_array_size is None:
            self._max_array_size = self.driver.max_array_size()
        return self._max_array_size

    def _submit_tasks(
        self,
        tasks: List[TaskSpec],
        resources: Resources,
        depends_on: List[str],
        remote_dir: Optional[str],
    ) -> List[str]:
        """One ``sbatch --array=0-N`` per chunk of ``MaxArraySize`` tasks.

        The wrapper picks task ``SLURM_ARRAY_TASK_ID``; each task is recorded
        as ``ARRAYID_TASK`` with its own exit file and log.  When the cluster
        refuses arrays, each job is submitted on its own.
        """
        if len(tasks) == 1:
            return super()._submit_tasks(tasks, resources, depends_on, remote_dir)
        chunk_size = self.max_array_size()
        if chunk_size < 2:
            log_once("no-arrays", "Slurm: MaxArraySize=%s, submitting one job per task", chunk_size)
            return super()._submit_tasks(tasks, resources, depends_on, remote_dir)
        plan = self._plan(tasks, resources, remote_dir)  # one folder, script names for all
        ids: List[str] = []
        for start in range(0, len(tasks), chunk_size):
            chunk = tasks[start : start + chunk_size]
            token = plan.token if start == 0 else new_token()
            job = PreparedJob(
                token=token,
                remote_dir=plan.remote_dir,
                wrapper_path=marker_path(plan.remote_dir, token, ".sh"),
                exit_file=marker_path(plan.remote_dir, token, ".exit"),
                scripts=plan.scripts[start : start + len(chunk)],
                job_name=plan.job_name,
            )
            try:
                ids.extend(self._submit_chunk(job, chunk, resources, depends_on))
            except JobSubmissionError as exc:
                if not ids and "array" in str(exc).lower():
                    # e.g. "Invalid job array specification": arrays refused here.
                    log.warning("Slurm refused a job array (%s); submitting one job per task", exc)
                    return super()._submit_tasks(tasks, resources, depends_on, remote_dir)
                if ids:
                    raise type(exc)(
                        f"{exc} (already submitted: {len(ids)} job(s), {ids[0]} .. {ids[-1]})",
                        argv=exc.argv,
                        scheduler_message=exc.scheduler_message,
                    ) from exc
                raise
        return ids

    def _submit_chunk(
        self, job: PreparedJob, chunk: List[TaskSpec], resources: Resources, depends_on: List[str]
    ) -> List[str]:
        self._stage(job, chunk)
        if len(chunk) == 1:  # a last chunk of one: a plain job
            job_id = self._submit(job, resources, depends_on)
            self._record([job_id], job, resources, chunk)
            return [job_id]
        output = self._array_output(job, resources)
        spec = self._spec(job, resources, depends_on, output=output, array=f"0-{len(chunk) - 1}")
        array_id = self.driver.submit(spec)
        task_ids = commands.array_task_ids(array_id, len(chunk))
        self._record(
            task_ids,
            job,
            resources,
            chunk,
            exit_files=[f"{job.exit_file}.{index}" for index in range(len(chunk))],
            log_paths=[
                commands.output_for_task(output, task_id, array_id, str(index), job.job_name)
                for index, task_id in enumerate(task_ids)
            ],
        )
        log.info("submitted slurm array %s (%d tasks, %s)", array_id, len(chunk), job.remote_dir)
        return task_ids
