"""The pyslurm driver: Slurm's C API in process, where it loads safely and matches.

Written against pyslurm's API as observed with pyslurm 25.11.2 on Slurm 25.11
(``JobSubmitDescription(...).submit()``, ``Jobs.load``, ``Job.load``,
``db.Jobs.load(db.JobFilter(ids=...))``, ``Job(id).cancel()``, ``RPCError``).
pyslurm links against one Slurm major release and its version says which
(``25.11.2`` is for Slurm 25.11): with any other Slurm it is not used.  The
mapping code lives in ``pyslurm_jobs`` (pure), the import guard in
``pyslurm_loading``.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ...engine.adoption import adopt_or_resubmit
from ...engine.driver import (
    DriverChoice,
    NotAskedNow,
    Planned,
    SchedulerDriver,
    SubmitBatch,
    Submitted,
    choose_driver,
)
from ...engine.retrying import retry
from ...engine.tracking import exit_code_from_file
from ...errors import (
    JobSubmissionError,
    SchedulerUnavailableError,
    SubmissionUncertainError,
)
from ...model import JobStatus
from ...transports.base import Executor
from . import commands, libslurm_output
from .cli import ADOPTION_BUDGET, SlurmCliDriver
from .commands import (
    CAPABILITIES,
    NOT_FOUND,
    SubmitSpec,
    planned_spec,
    submit_batch,
    unknown,
)
from .ids import split_job_id
from .pyslurm_jobs import (
    iter_jobs,
    job_ids_of,
    may_be_folded,
    status_from_job,
    statuses_from_jobs,
    submit_description_kwargs,
    unfolded,
)
from .pyslurm_loading import (
    PYSLURM_SKIP_REASON,
    ensure_loadable,
    import_pyslurm,
    installed_pyslurm_version,
    versions_match,
    wanted_slurm_conf,
)

log = logging.getLogger("hpcbridge.slurm")

__all__ = [
    "PYSLURM_SKIP_REASON",
    "SlurmNativeDriver",
    "build_native_driver",
    "choose_slurm_driver",
    "import_pyslurm",
    "installed_pyslurm_version",
    "iter_jobs",
    "job_ids_of",
    "status_from_job",
    "statuses_from_jobs",
    "submit_description_kwargs",
    "versions_match",
]


# -- building the driver -------------------------------------------------------------


def build_native_driver(
    executor: Executor, cli: SlurmCliDriver, command_env: Optional[Mapping[str, str]] = None
) -> Tuple[SlurmNativeDriver, str]:
    """The pyslurm driver and why it is usable, or ``SchedulerUnavailableError`` saying why not.

    ``command_env``: the environment the settings give the Slurm commands;
    its ``SLURM_CONF`` (else the process's) is the cluster pyslurm must talk to.
    """
    if not executor.is_local:
        raise SchedulerUnavailableError(
            f"pyslurm talks to the local Slurm only; transport is {executor.kind}"
        )
    # The version comes from pyslurm's metadata: nothing is loaded for another Slurm.
    pyslurm_version = installed_pyslurm_version()
    if pyslurm_version is None:
        raise SchedulerUnavailableError(f"{PYSLURM_SKIP_REASON}: no module named 'pyslurm'")
    slurm_version = cli.version()
    if not versions_match(pyslurm_version, slurm_version):
        raise SchedulerUnavailableError(
            f"pyslurm {pyslurm_version} does not match Slurm {slurm_version or '?'}"
        )
    ensure_loadable(wanted_slurm_conf(command_env or {}, os.environ))
    try:
        pyslurm = import_pyslurm()
    except Exception as exc:  # ImportError, or an ABI mismatch at import time
        raise SchedulerUnavailableError(
            f"pyslurm not importable ({type(exc).__name__}: {exc})"
        ) from exc
    return SlurmNativeDriver(
        cli, pyslurm
    ), f"pyslurm {pyslurm_version} matches Slurm {slurm_version}"


def choose_slurm_driver(
    requested: str,
    executor: Executor,
    cli: SlurmCliDriver,
    command_env: Optional[Mapping[str, str]] = None,
) -> Tuple[SchedulerDriver, DriverChoice]:
    """pyslurm when it is usable here, else ``cli`` (the rule of ``driver.choose_driver``)."""
    native = lambda: build_native_driver(executor, cli, command_env)  # noqa: E731 - deferred
    return choose_driver("slurm", requested, native=native, cli=lambda: cli)


# -- the driver --------------------------------------------------------------------


class SlurmNativeDriver:
    """Slurm through pyslurm; array-task cancels, one-task-at-a-time submissions,
    config and version through the CLI."""

    name = "native"
    capabilities = CAPABILITIES

    def __init__(self, cli: SlurmCliDriver, pyslurm: Any) -> None:
        self.cli = cli
        self.pyslurm = pyslurm
        #: "no job history from slurmdbd" is logged once per driver
        self._no_history_noted = False
        #: the environment sbatch would run with, beyond the process's (SLURM_CONF...)
        self.command_env: Dict[str, str] = {**cli.executor.env, **(cli.env or {})}
        #: job id -> the wrapper's exit-code file, for the jobs this driver submitted
        self._exit_files: Dict[str, str] = {}

    def plan(self, batch: SubmitBatch) -> Planned:
        return self.cli.plan(batch)

    def describe(self, planned: Planned) -> str:
        if planned.batch.resources.native_options("slurm"):
            return self.cli.describe(planned)
        kwargs = submit_description_kwargs(planned_spec(planned))
        fields = ", ".join(f"{key}={value!r}" for key, value in kwargs.items())
        return f"pyslurm.JobSubmitDescription({fields}).submit()"

    def submit_many(self, planned: Planned) -> List[Submitted]:
        batch = planned.batch
        # pyslurm's JobSubmitDescription takes the fields it names only: native sbatch
        # options go in through sbatch itself.
        native = batch.resources.native_options("slurm")
        submitted = submit_batch(planned, self.cli.submit if native else self._submit_spec)
        for item in submitted:
            self._exit_files[item.job_id] = batch.job.exit_file_for(item.index, batch.count)
        return submitted

    def _submit_spec(self, spec: SubmitSpec) -> str:
        # One task of a many-task wrapper goes in through sbatch, its index the
        # wrapper's argument.
        return self.cli.submit(spec) if spec.task_index is not None else self.submit(spec)

    def submit(self, spec: SubmitSpec) -> str:
        """One submission; its job id.  An answer lost to a timeout is looked for by
        the submission's key (``adoption``, as for sbatch); any other error is a refusal."""
        try:
            return self._submit_once(spec)
        except SubmissionUncertainError:
            if not spec.key:
                raise
            return adopt_or_resubmit(
                lambda: self.cli.find_by_key(spec.key),
                lambda: self._submit_once(spec),
                key=spec.key,
                budget=ADOPTION_BUDGET,
                settle=self.cli.settle(),
                where="slurmctld",
            )

    def _submit_once(self, spec: SubmitSpec) -> str:
        kwargs = submit_description_kwargs(spec)
        try:
            # pyslurm reads ``script`` as a file only when that path exists, else
            # as the script's text: the wrapper's text is passed, never its path.
            with open(spec.wrapper_path, encoding="utf-8") as wrapper:
                kwargs["script"] = wrapper.read()
        except OSError as exc:
            raise JobSubmissionError(f"cannot read the wrapper {spec.wrapper_path}: {exc}") from exc
        kwargs["environment"] = submit_environment(self.command_env)
        said: List[str] = []
        try:
            with libslurm_output.caught(said):
                job_id = self.pyslurm.JobSubmitDescription(**kwargs).submit()
        except Exception as exc:  # RPCError from Slurm; ValueError/TypeError from pyslurm's checks
            message = _with_libslurm(str(exc) or type(exc).__name__, said)
            _log_libslurm(said, logging.DEBUG)
            raise commands.refusal_error(message)(
                f"Slurm refused the job: {message}", scheduler_message=message
            ) from exc
        _log_libslurm(said)
        return str(job_id)

    @staticmethod
    def _quiet(call: Callable[[], Any]) -> Any:
        """``call()`` with what libslurm writes to stderr logged (DEBUG), not shown
        (``libslurm_output``): a question's failure is reported by its caller."""
        said: List[str] = []
        try:
            with libslurm_output.caught(said):
                return call()
        finally:
            _log_libslurm(said, logging.DEBUG)

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """Every id: from slurmctld, else slurmdbd, else UNKNOWN."""
        ids = list(dict.fromkeys(job_ids))
        try:
            live = retry(
                lambda: self._quiet(self.pyslurm.Jobs.load),
                budget=self.cli.query_retries,
                retry_on=(Exception,),
                pause=1.0,
                backoff=2.0,
                max_pause=8.0,
                what="pyslurm.Jobs.load",
            )
        except Exception as exc:  # RPCError: slurmctld down or restarting, past the retries
            raise NotAskedNow(f"slurmctld query failed: {exc}") from exc
        answers = statuses_from_jobs(iter_jobs(live), ids)
        missing = [job_id for job_id in ids if job_id not in answers]
        if missing:
            answers.update(self.history(missing))
        self._unfold_exit_codes(answers)
        return {job_id: answers.get(job_id) or unknown(job_id, NOT_FOUND) for job_id in ids}

    def history(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """What slurmdbd remembers of these ids (nothing when accounting is off)."""
        bases = sorted({int(split_job_id(job_id)[0]) for job_id in job_ids})
        try:
            db = self.pyslurm.db
            jobs = self._quiet(lambda: db.Jobs.load(db.JobFilter(ids=bases)))
        except Exception as exc:  # RPCError; no slurmdbd (accounting off)
            if not self._no_history_noted:
                self._no_history_noted = True
                log.info("pyslurm: no job history from slurmdbd: %s", exc)
            return {}
        return statuses_from_jobs(iter_jobs(jobs), job_ids, history=True)

    def _unfold_exit_codes(self, answers: Dict[str, JobStatus]) -> None:
        """Exit codes pyslurm folded (143 -> 15): the exit-code file's, else the CLI's."""
        unresolved: List[str] = []
        for job_id in [job_id for job_id, status in answers.items() if may_be_folded(status)]:
            settled = unfolded(answers[job_id], self._recorded_exit_code(job_id))
            if settled is None:
                unresolved.append(job_id)
            else:
                answers[job_id] = settled
        if not unresolved:
            return
        try:
            from_cli = self.cli.query(unresolved)
        except NotAskedNow:
            return  # pyslurm's codes stand until a later round
        for job_id in unresolved:
            settled = unfolded(answers[job_id], from_cli[job_id].exit_code)
            answers[job_id] = settled or answers[job_id]

    def _recorded_exit_code(self, job_id: str) -> Optional[int]:
        path = self._exit_files.get(job_id)
        if path is None:
            return None
        try:
            with open(path, encoding="utf-8") as recorded:
                return exit_code_from_file(recorded.read())
        except OSError:
            return None

    def cancel(self, job_ids: Sequence[str]) -> None:
        """Through ``scancel``: pyslurm's ``Job(id).cancel()`` returns None for a
        running, a finished and an unknown id alike, so it cannot tell a refusal,
        and it takes no ``ARRAY_TASK`` ids."""
        self.cli.cancel(job_ids)

    def find_output(self, job_id: str) -> Optional[str]:
        base, task = split_job_id(job_id)
        if task is not None:
            return self.cli.find_output(job_id)
        try:
            job = self._quiet(lambda: self.pyslurm.Job.load(int(base)))
        except Exception:  # RPCError: Invalid job id specified
            return None
        path = getattr(job, "standard_output", None)
        return str(path) if path else None

    def find_submitted(
        self, planned: Planned, since: Optional[float] = None
    ) -> Optional[List[Submitted]]:
        """By the key in the job's comment, as the CLI driver finds it (one squeue)."""
        found = self.cli.find_submitted(planned, since)
        for item in found or ():
            self._exit_files[item.job_id] = planned.batch.job.exit_file_for(
                item.index, planned.batch.count
            )
        return found

    def queue_limit(self, account: Optional[str] = None) -> Optional[int]:
        """The cap on queued jobs, read with sacctmgr (pyslurm has no association query)."""
        return self.cli.queue_limit(account)

    def max_batch(self) -> int:
        return self.cli.max_batch()

    def waiter(self, job_ids: Sequence[str]) -> None:
        """pyslurm has no job events to wait on: the adapter sleeps between rounds."""
        return None

    def close(self) -> None:
        """Nothing to release: pyslurm keeps no connection open."""


def _with_libslurm(message: str, said: Sequence[str]) -> str:
    """pyslurm's error with libslurm's own words for it, where they add to it."""
    extra = [line for line in said if line and line not in message]
    return f"{message} ({'; '.join(extra)})" if extra else message


def _log_libslurm(said: Sequence[str], level: int = logging.INFO) -> None:
    for line in said:
        log.log(level, "libslurm: %s", line)


def submit_environment(command_env: Mapping[str, str]) -> Dict[str, str]:
    """The job's environment: what sbatch would run with (the process's and the
    settings' command environment), as its default ``--export=ALL`` passes on."""
    return {**os.environ, **command_env}
