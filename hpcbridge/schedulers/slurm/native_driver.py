"""The pyslurm driver: Slurm's C API in process, where it loads safely and matches.

It is the CLI driver's table with three rows of its own - the queue (``Jobs.load``), the
history (``db.Jobs.load``) and a submission (``JobSubmitDescription``) - each a call the
engine's runner runs, its answer read by ``pyslurm_records`` as the rows the Slurm parsers
read.  Cancels, native options, config, the caps on queued jobs and the key lookups stay
Slurm's commands."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...engine.driver import (
    DriverChoice,
    NotAskedNow,
    Planned,
    SchedulerDriver,
    Submitted,
    choose_driver,
)
from ...engine.tracking import exit_code_from_file
from ...errors import SchedulerUnavailableError
from ...model import JobStatus
from ...transports.base import Executor
from . import pyslurm_records as records
from . import queries
from .cli_driver import SlurmCliDriver
from .commands import SubmitSpec, planned_spec
from .ids import split_job_id
from .pyslurm_loading import call, ensure_loadable, import_pyslurm, installed_pyslurm_version
from .queries import Statuses


def build_native_driver(
    executor: Executor, cli: SlurmCliDriver, command_env: Optional[Mapping[str, str]] = None
) -> Tuple[SlurmNativeDriver, str]:
    """The pyslurm driver and why it is usable, or ``SchedulerUnavailableError`` saying why not.
    ``command_env``: the settings' environment for Slurm's commands (its ``SLURM_CONF``)."""
    if not executor.is_local:
        raise SchedulerUnavailableError(
            f"pyslurm talks to the local Slurm only; transport is {executor.kind}"
        )
    # The version comes from pyslurm's metadata: nothing is loaded for another Slurm.
    pyslurm_version = installed_pyslurm_version()
    slurm_version = cli.version() if pyslurm_version else None  # no command without pyslurm
    problem = records.version_problem(pyslurm_version, slurm_version)
    if problem:
        raise SchedulerUnavailableError(problem)
    ensure_loadable(records.wanted_slurm_conf(command_env or {}, os.environ))
    try:
        pyslurm = import_pyslurm()
    except Exception as exc:  # ImportError, or an ABI mismatch at import time
        raise SchedulerUnavailableError(
            f"pyslurm not importable ({type(exc).__name__}: {exc})"
        ) from exc
    driver = SlurmNativeDriver.like(cli, pyslurm)
    return driver, f"pyslurm {pyslurm_version} matches Slurm {slurm_version}"


def choose_slurm_driver(
    requested: str,
    executor: Executor,
    cli: SlurmCliDriver,
    command_env: Optional[Mapping[str, str]] = None,
) -> Tuple[SchedulerDriver, DriverChoice]:
    """pyslurm when it is usable here, else ``cli`` (the rule of ``driver.choose_driver``)."""

    def native() -> Tuple[SlurmNativeDriver, str]:
        return build_native_driver(executor, cli, command_env)

    return choose_driver("slurm", requested, native=native, cli=lambda: cli)


class SlurmNativeDriver(SlurmCliDriver):
    """Slurm through pyslurm; cancels, sbatch-only submissions, config and version by
    Slurm's commands."""

    name = "native"

    def __init__(self, executor: Executor, pyslurm: Any, *args: Any, **options: Any) -> None:
        """``pyslurm``: the imported module; the rest as ``SlurmCliDriver``'s."""
        super().__init__(executor, *args, **options)
        self.pyslurm = pyslurm
        #: job id -> the wrapper's exit-code file, for the jobs this driver submitted
        self._exit_files: Dict[str, str] = {}

    @classmethod
    def like(cls, cli: SlurmCliDriver, pyslurm: Any) -> SlurmNativeDriver:
        """A pyslurm driver with ``cli``'s settings (timeout, environment, caches)."""
        return cls(
            cli.executor,
            pyslurm,
            cli.command_timeout,
            cli.env,
            cli._max_array_size,
            query_retries=cli.query_retries,
            light_rounds=cli._has_light,
            limit_cache=cli.limits,
        )

    # -- the table's own rows ------------------------------------------------------

    def _live(self, ids: List[str]) -> Statuses:
        load = call("pyslurm.Jobs.load", self.pyslurm.Jobs.load)
        return self.runner.ask(load, lambda outcome: records.live_reply(outcome, ids))

    def _history(self, asked: List[str], wanted: List[str]) -> Statuses:
        db, bases = self.pyslurm.db, records.history_filter_ids(asked)
        load = call("pyslurm.db.Jobs.load", lambda: db.Jobs.load(db.JobFilter(ids=bases)))
        return self.runner.ask(load, lambda outcome: records.history_reply(outcome, wanted))

    def _send(self, spec: SubmitSpec) -> str:
        # JobSubmitDescription takes only the fields it names: native options go through
        # sbatch; so does one task of a many-task wrapper (its index the wrapper's argument).
        if spec.resources.native_options("slurm") or spec.task_index is not None:
            return super()._send(spec)
        kwargs = self._description(spec)
        submit = call(
            "pyslurm.JobSubmitDescription.submit",
            lambda: self.pyslurm.JobSubmitDescription(**kwargs).submit(),
            shown=True,
        )
        return self.runner.submit(
            submit, records.submitted_reply, key=spec.key, find=self.find_keys, settle=self.settle
        )

    def _description(self, spec: SubmitSpec) -> Dict[str, Any]:
        kwargs = records.submit_description_kwargs(spec)
        # pyslurm reads ``script`` as a file only when that path exists: pass the text.
        kwargs["script"], kwargs["environment"] = self._wrapper(spec)
        return kwargs

    # -- what differs beyond the table -----------------------------------------------

    def describe(self, planned: Planned) -> str:
        if planned.batch.resources.native_options("slurm"):
            return super().describe(planned)
        return records.describe_submission(planned_spec(planned))

    def submit_many(self, planned: Planned) -> List[Submitted]:
        return self._remember(planned, super().submit_many(planned))

    def find_submitted(
        self, planned: Planned, since: Optional[float] = None
    ) -> Optional[List[Submitted]]:
        found = super().find_submitted(planned, since)
        return None if found is None else self._remember(planned, found)

    def _remember(self, planned: Planned, submitted: List[Submitted]) -> List[Submitted]:
        """``submitted``, each job's exit-code file noted."""
        batch = planned.batch
        for item in submitted:
            self._exit_files[item.job_id] = batch.job.exit_file_for(item.index, batch.count)
        return submitted

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """The CLI driver's rounds over pyslurm's rows; exit codes pyslurm folded
        (143 -> 15) taken from the exit-code file, else from the commands."""
        answers = super().query(job_ids)
        unsure = records.unfold(answers, self._recorded_exit_code)
        if unsure:
            cli = SlurmCliDriver
            try:
                told = queries.statuses(
                    unsure, lambda i: cli._live(self, i), lambda a, w: cli._history(self, a, w)
                )
            except NotAskedNow:
                return answers  # pyslurm's codes stand until a later round
            records.unfold(answers, lambda job_id: told[job_id].exit_code)
        return answers

    def _recorded_exit_code(self, job_id: str) -> Optional[int]:
        try:
            with open(self._exit_files[job_id], encoding="utf-8") as recorded:
                return exit_code_from_file(recorded.read())
        except (KeyError, OSError):  # not submitted here, or not written yet
            return None

    # pyslurm's Job(id).cancel() returns None for a running, ended and unknown id alike,
    # and takes no array task ids: cancel is the CLI driver's scancel.

    def find_output(self, job_id: str) -> Optional[str]:
        if split_job_id(job_id)[1] is not None:
            return super().find_output(job_id)
        base = split_job_id(job_id)[0]
        if not base.isdecimal():
            return None
        load = call("pyslurm.Job.load", lambda: self.pyslurm.Job.load(int(base)))
        return self.runner.ask(load, records.output_reply)

    def close(self) -> None:
        """Nothing to release: pyslurm keeps no connection open."""
