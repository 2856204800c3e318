"""The Slurm CLI driver: sbatch/squeue/sacct/scancel run through an executor.

It never knows whether the executor is local or SSH.  Status is batched:
one ``squeue`` for every asked id, then one ``sacct`` for those squeue no
longer knows; what neither knows is left for the adapter (exit-code file,
then UNKNOWN).
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
from ...model import JobState, JobStatus
from ...transports.base import CommandResult, Executor
from . import commands

log = logging.getLogger("hpcbridge.slurm")

_logged_once: set = set()


def log_once(key: str, message: str, *args: object, level: int = logging.INFO) -> None:
    """Log a message the first time only (per process): fallbacks, accounting off."""
    if key in _logged_once:
        return
    _logged_once.add(key)
    log.log(level, message, *args)


class SlurmCliDriver:
    """Slurm through its commands."""

    name = "cli"

    def __init__(
        self,
        executor: Executor,
        command_timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.executor = executor
        self.command_timeout = command_timeout
        #: extra environment for every command, e.g. ``SLURM_CONF`` where the
        #: login environment lacks it (an SSH session without a login shell)
        self.env = dict(env) if env else None
        self._config: Optional[Dict[str, str]] = None

    def _run(self, argv: List[str], idempotent: bool = True) -> CommandResult:
        return self.executor.run(
            argv, timeout=self.command_timeout, env=self.env, idempotent=idempotent
        )

    # -- submit ------------------------------------------------------------

    def describe(self, spec: commands.SubmitSpec) -> str:
        return commands.describe_argv(commands.sbatch_argv(spec))

    def submit(self, spec: commands.SubmitSpec) -> str:
        argv = commands.sbatch_argv(spec)
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
            message = commands.scheduler_message(result.stderr or result.stdout)
            cls = (
                SubmissionUncertainError
                if any(text in message for text in commands.UNCERTAIN_SUBMISSION)
                else JobSubmissionError
            )
            raise cls(
                f"sbatch refused the job (exit {result.returncode}): {message}",
                argv=argv,
                scheduler_message=message,
            )
        try:
            return commands.parse_sbatch_id(result.stdout)
        except ValueError as exc:
            raise SubmissionUncertainError(
                f"sbatch succeeded but printed no job id: {result.stdout.strip()[:200]!r}",
                argv=argv,
            ) from exc

    # -- status ------------------------------------------------------------

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """Statuses from squeue, then sacct; ids neither knows are left out.

        When squeue itself fails (controller down or restarting) every id is
        UNKNOWN with squeue's words: the adapter's wait loop rides that out.
        """
        ids = list(dict.fromkeys(job_ids))
        if not ids:
            return {}
        result = self._run(commands.squeue_argv(ids))
        answers: Dict[str, JobStatus] = {}
        if result.ok:
            in_queue = commands.parse_squeue(result.stdout)
            answers.update({job_id: in_queue[job_id] for job_id in ids if job_id in in_queue})
        elif not commands.is_invalid_job_id(result.message()):
            # e.g. "slurm_load_jobs error: Unable to contact slurm controller
            # (connect failure)" while slurmctld restarts.
            reason = f"squeue failed: {commands.scheduler_message(result.message())}"
            return {job_id: JobStatus(job_id, JobState.UNKNOWN, reason=reason) for job_id in ids}
        missing = [job_id for job_id in ids if job_id not in answers]
        if missing:
            answers.update(self.history(missing))
        return answers

    def history(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """What sacct remembers of these ids (nothing when accounting is off)."""
        result = self._run(commands.sacct_argv(job_ids))
        if not result.ok:
            message = result.message()
            if commands.accounting_disabled(message):
                # "Slurm accounting storage is disabled": no history here; the
                # adapter falls back on the wrapper's exit-code file.
                log_once(
                    f"no-accounting:{self.executor.host}",
                    "Slurm accounting is disabled on %s: finished jobs are known from "
                    "squeue (MinJobAge) and then from the exit-code file",
                    self.executor.host,
                )
            else:
                log.warning("sacct failed (exit %s): %s", result.returncode, message)
            return {}
        history = commands.parse_sacct(result.stdout)
        return {job_id: history[job_id] for job_id in job_ids if job_id in history}

    # -- cancel, logs, config ----------------------------------------------------

    def cancel(self, job_ids: Sequence[str]) -> None:
        """scancel; unknown and finished ids exit 0, so any failure is real."""
        if not job_ids:
            return
        result = self._run(commands.scancel_argv(job_ids))
        if not result.ok:
            message = commands.scheduler_message(result.message())
            if all(
                commands.is_invalid_job_id(line) or "completed" in line.lower()
                for line in message.split("; ")
            ):
                return  # the job ended (and maybe was purged) meanwhile
            raise SchedulerAdapterError(f"scancel failed (exit {result.returncode}): {message}")

    def output_path(self, job_id: str) -> Optional[str]:
        """Where a job without a record writes its output (while Slurm knows it)."""
        result = self._run(commands.scontrol_show_job_argv(job_id))
        if not result.ok:
            return None
        fields = commands.parse_scontrol_record(result.stdout)
        path = fields.get("StdOut")
        return path if path and path != "(null)" else None

    def config(self, refresh: bool = False) -> Dict[str, str]:
        """``scontrol show config`` (cached); empty when it cannot be read."""
        if self._config is None or refresh:
            result = self._run(commands.scontrol_config_argv())
            if not result.ok:
                log.warning("scontrol show config failed: %s", result.message())
                return {}
            self._config = commands.parse_scontrol_config(result.stdout)
        return self._config

    def max_array_size(self) -> int:
        return commands.max_array_size(self.config())

    def version(self) -> Optional[str]:
        """Slurm's version as ``sinfo``/``scontrol --version`` prints it, e.g. 22.05.8."""
        result = self._run(["scontrol", "--version"])
        if not result.ok:
            return None
        parsed = commands.parse_version(result.stdout)
        return commands.format_version(parsed) if parsed else None
