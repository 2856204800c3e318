"""The Slurm CLI driver: sbatch/squeue/sacct/scancel run through an executor.

It never knows whether the executor is local or SSH.  Status is batched:
one ``squeue`` for every asked id, then one ``sacct`` for those squeue no
longer knows; an id neither knows is UNKNOWN (the adapter then looks for
the wrapper's exit-code file).
"""

from __future__ import annotations

import logging
from typing import Dict, List, Mapping, Optional, Sequence

from ...errors import (
    JobSubmissionError,
    JobTimeoutError,
    SchedulerAdapterError,
    SubmissionUncertainError,
)
from ...model import JobStatus
from ...transports.base import CommandResult, Executor
from ..driver import Planned, SubmitBatch, Submitted, unreachable
from . import control, messages, status, submission
from .batches import CAPABILITIES, NOT_FOUND, plan_batch, planned_spec, submit_batch, unknown

log = logging.getLogger("hpcbridge.slurm")


class SlurmCliDriver:
    """Slurm through its commands."""

    name = "cli"
    capabilities = CAPABILITIES

    def __init__(
        self,
        executor: Executor,
        command_timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        max_array_size: Optional[int] = None,
    ) -> None:
        """``env``: extra environment for every command, e.g. ``SLURM_CONF``
        where the login environment lacks it (an SSH session without a login
        shell).  ``max_array_size`` overrides the cluster's ``MaxArraySize``."""
        self.executor = executor
        self.command_timeout = command_timeout
        self.env = dict(env) if env else None
        self._max_array_size = max_array_size
        self._config: Optional[Dict[str, str]] = None
        #: "accounting is disabled" is logged once per driver
        self._accounting_off_noted = False

    def _run(self, argv: List[str], idempotent: bool = True) -> CommandResult:
        return self.executor.run(
            argv, timeout=self.command_timeout, env=self.env, idempotent=idempotent
        )

    # -- submit ------------------------------------------------------------

    def plan(self, batch: SubmitBatch) -> Planned:
        return plan_batch(batch)

    def describe(self, planned: Planned) -> str:
        return submission.describe_argv(submission.sbatch_argv(planned_spec(planned)))

    def submit_many(self, planned: Planned) -> List[Submitted]:
        return submit_batch(planned, self.submit)

    def submit(self, spec: submission.SubmitSpec) -> str:
        """One sbatch; its job id."""
        argv = submission.sbatch_argv(spec)
        try:
            # Not idempotent: a dropped connection must not submit twice.
            result = self._run(argv, idempotent=False)
        except JobTimeoutError as exc:
            raise SubmissionUncertainError(
                f"sbatch did not answer in time; the job may or may not exist "
                f"(check squeue before retrying): {exc}",
                argv=argv,
            ) from exc
        if result.returncode == 127:
            raise JobSubmissionError(
                f"sbatch not found on {self.executor.host}: {result.message()}", argv=argv
            )
        if not result.ok:
            message = messages.scheduler_message(result.stderr or result.stdout)
            cls = (
                SubmissionUncertainError
                if messages.submission_uncertain(message)
                else JobSubmissionError
            )
            raise cls(
                f"sbatch refused the job (exit {result.returncode}): {message}",
                argv=argv,
                scheduler_message=message,
            )
        try:
            return submission.parse_sbatch_id(result.stdout)
        except ValueError as exc:
            raise SubmissionUncertainError(
                f"sbatch succeeded but printed no job id: {result.stdout.strip()[:200]!r}",
                argv=argv,
            ) from exc

    # -- status ------------------------------------------------------------

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """Every id: from squeue, else sacct, else UNKNOWN.

        When squeue itself fails (controller down or restarting) every id is
        UNKNOWN with squeue's words: the adapter's wait loop rides that out.
        """
        ids = list(dict.fromkeys(job_ids))
        if not ids:
            return {}
        result = self._run(status.squeue_argv(ids))
        answers: Dict[str, JobStatus] = {}
        if result.ok:
            in_queue = status.parse_squeue(result.stdout)
            answers.update({job_id: in_queue[job_id] for job_id in ids if job_id in in_queue})
        elif not messages.is_invalid_job_id(result.message()):
            # e.g. "slurm_load_jobs error: Unable to contact slurm controller
            # (connect failure)" while slurmctld restarts.
            reason = f"squeue failed: {messages.scheduler_message(result.message())}"
            return {job_id: unreachable(job_id, reason) for job_id in ids}
        missing = [job_id for job_id in ids if job_id not in answers]
        if missing:
            answers.update(self.history(missing))
        return {job_id: answers.get(job_id) or unknown(job_id, NOT_FOUND) for job_id in ids}

    def history(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """What sacct remembers of these ids (nothing when accounting is off)."""
        result = self._run(status.sacct_argv(job_ids))
        if not result.ok:
            message = messages.scheduler_message(result.message())  # one line, never raw
            if not messages.accounting_disabled(message):
                log.warning("sacct failed (exit %s): %s", result.returncode, message)
            elif not self._accounting_off_noted:
                self._accounting_off_noted = True
                log.info(
                    "Slurm accounting is disabled on %s: finished jobs are known from "
                    "squeue (MinJobAge) and then from the exit-code file",
                    self.executor.host,
                )
            return {}
        history = status.parse_sacct(result.stdout)
        return {job_id: history[job_id] for job_id in job_ids if job_id in history}

    # -- cancel, logs, config ----------------------------------------------------

    def cancel(self, job_ids: Sequence[str]) -> None:
        """scancel; unknown and finished ids exit 0, so any failure is real."""
        if not job_ids:
            return
        result = self._run(control.scancel_argv(job_ids))
        if not result.ok:
            message = messages.scheduler_message(result.message())
            if messages.job_already_ended(message):
                return  # the job ended (and maybe was purged) meanwhile
            raise SchedulerAdapterError(f"scancel failed (exit {result.returncode}): {message}")

    def find_output(self, job_id: str) -> Optional[str]:
        """Where a job without a record writes its output (while Slurm knows it)."""
        result = self._run(control.scontrol_show_job_argv(job_id))
        if not result.ok:
            return None
        return control.output_of_record(control.parse_scontrol_record(result.stdout))

    def config(self) -> Dict[str, str]:
        """``scontrol show config`` (read once); empty when it cannot be read."""
        if self._config is None:
            result = self._run(control.scontrol_config_argv())
            if not result.ok:
                message = messages.scheduler_message(result.message())
                log.warning("scontrol show config failed: %s", message)
                return {}
            self._config = control.parse_scontrol_config(result.stdout)
        return self._config

    def max_batch(self) -> int:
        """Tasks per array: ``MaxArraySize`` (asked once), or the override; at least 1."""
        if self._max_array_size is None:
            self._max_array_size = control.max_array_size(self.config())
        return max(1, self._max_array_size)

    def version(self) -> Optional[str]:
        """Slurm's version as ``scontrol --version`` prints it, e.g. 22.05.8."""
        result = self._run(control.scontrol_version_argv())
        if not result.ok:
            return None
        parsed = control.parse_version(result.stdout)
        return control.format_version(parsed) if parsed else None

    def waiter(self, job_ids: Sequence[str]) -> None:
        """Slurm has no job events to wait on: the adapter sleeps between rounds."""
        return None

    def close(self) -> None:
        """Nothing to release: the executor belongs to the adapter."""
