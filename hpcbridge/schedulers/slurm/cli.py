"""The Slurm CLI driver: sbatch/squeue/sacct/scancel run through an executor.

It never knows whether the executor is local or SSH.  Status is batched:
one ``squeue`` for every asked id, then one ``sacct`` for those squeue no
longer knows; an id neither knows is UNKNOWN (the adapter then looks for
the wrapper's exit-code file).
"""

from __future__ import annotations

import logging
import os
import pwd
import time
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ...engine.adoption import CannotAsk, adopt_or_resubmit, look_up
from ...engine.driver import NotAskedNow, Planned, SubmitBatch, Submitted
from ...engine.retrying import Deadline, retry
from ...errors import (
    JobTimeoutError,
    SchedulerAdapterError,
    SubmissionUncertainError,
)
from ...model import JobStatus
from ...native_options import option_names
from ...transports.base import CommandResult, Executor
from . import commands, limits, status
from .commands import (
    CAPABILITIES,
    NOT_FOUND,
    SubmitSpec,
    plan_batch,
    planned_spec,
    submit_batch,
    submitted_for,
    unknown,
)
from .limit_cache import TTL, LimitCache

log = logging.getLogger("hpcbridge.slurm")

#: seconds an uncertain submission may take to be found, or found surely absent
ADOPTION_BUDGET = 180.0


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
        *,
        query_retries: Optional[float] = None,
        light_rounds: Optional[bool] = None,
        limit_cache: Optional[LimitCache] = None,
    ) -> None:
        """``env``: extra environment for every command, e.g. ``SLURM_CONF``
        where the login environment lacks it (an SSH session without a login
        shell).  ``max_array_size`` overrides the cluster's ``MaxArraySize``.
        ``query_retries``: seconds a question to a busy controller is asked again
        for (default: 10, or the command timeout if shorter); past them ``query``
        raises ``NotAskedNow`` and the wait loop rides the outage out at its own pace.
        ``light_rounds``: whether squeue has ``--only-job-state`` (``None``: from
        Slurm's version, asked once).  ``limit_cache``: where the cap on queued jobs
        is kept for the user's other processes (``queue_limit``)."""
        self.executor = executor
        self.command_timeout = command_timeout
        self.env = dict(env) if env else None
        self._max_array_size = max_array_size
        self._config: Optional[Dict[str, str]] = None
        #: "accounting is disabled" and "slurmctld is busy" are logged once per driver
        self._accounting_off_noted = False
        self._busy_noted = False
        self.query_retries = (
            query_retries if query_retries is not None else min(10.0, command_timeout or 60.0)
        )
        #: whether squeue has ``--only-job-state``, once asked; the last unfinished answers
        self._has_light = light_rounds
        self._last: Dict[str, JobStatus] = {}
        self.limit_cache = limit_cache
        #: the cap on queued jobs by ``_limit_key``: when it was read (monotonic), and it
        self._queue_limits: Dict[str, Tuple[float, Optional[int]]] = {}
        #: sbatch's option names (``option_names``), once read
        self._option_names: Optional[Dict[str, str]] = None

    def _run(self, argv: List[str], idempotent: bool = True) -> CommandResult:
        return self.executor.run(
            argv, timeout=self.command_timeout, env=self.env, idempotent=idempotent
        )

    def _ask(self, argv: List[str]) -> CommandResult:
        """A question to the controller, asked again with back-off while it is busy,
        restarting or rate-limiting us, within one command budget."""

        def busy(result: CommandResult) -> bool:
            return not result.ok and commands.transient(result.message())

        result = retry(
            lambda: self._run(argv),
            budget=self.query_retries,
            again=busy,
            pause=1.0,
            backoff=2.0,
            max_pause=8.0,
            what=argv[0],
        )
        if busy(result) and not self._busy_noted:
            self._busy_noted = True
            log.warning(
                "slurmctld on %s is busy or restarting: %s", self.executor.host, result.message()
            )
        return result

    # -- submit ------------------------------------------------------------

    def plan(self, batch: SubmitBatch) -> Planned:
        if batch.resources.native_options("slurm"):
            commands.check_native(batch.resources, self.option_names(), self.executor.host)
        return plan_batch(batch)

    def option_names(self) -> Optional[Dict[str, str]]:
        """The option names of the running sbatch, from its ``--help`` (read once);
        ``None`` where it cannot be read (then sbatch itself judges a native option)."""
        if self._option_names is None:
            result = self._run(commands.sbatch_help_argv())
            names = option_names(result.stdout) if result.ok else {}
            if not names:
                log.warning(
                    "cannot read sbatch's options on %s (%s): native options are checked "
                    "against hpcbridge's own only",
                    self.executor.host,
                    commands.scheduler_message(result.message()) or "no options listed",
                )
            self._option_names = names
        return self._option_names or None

    def describe(self, planned: Planned) -> str:
        return commands.describe_argv(commands.sbatch_argv(planned_spec(planned)))

    def submit_many(self, planned: Planned) -> List[Submitted]:
        return submit_batch(planned, self.submit)

    def submit(self, spec: SubmitSpec) -> str:
        """One sbatch; its job id.  A request that surely never reached the controller
        is sent again; one whose answer was lost is found by its key (``adoption``)."""
        argv = commands.sbatch_argv(spec)
        try:
            return self._sbatch(argv)
        except SubmissionUncertainError as lost:
            if not spec.key:
                raise
            log.warning(
                "sbatch's answer was lost (%s); looking for job hpcbridge:%s", lost, spec.key
            )
            return adopt_or_resubmit(
                lambda: self.find_by_key(spec.key),
                lambda: self._sbatch(argv),
                key=spec.key,
                budget=ADOPTION_BUDGET,
                settle=self.settle(),
                where=f"slurmctld on {self.executor.host}",
            )

    def _sbatch(self, argv: List[str]) -> str:
        """sbatch, again while its request cannot reach the controller (nothing went in)."""
        deadline: Optional[Deadline] = None  # started at the first miss
        while True:
            try:
                # Not idempotent: a dropped connection must not submit twice.
                result = self._run(argv, idempotent=False)
            except JobTimeoutError as exc:
                raise SubmissionUncertainError(
                    f"sbatch did not answer in time: {exc}", argv=argv
                ) from exc
            try:
                return commands.parse_sbatch_output(
                    argv, result.returncode, result.stdout, result.stderr, self.executor.host
                )
            except commands.NeverReached as missed:
                deadline = deadline or Deadline(self.command_timeout or 60.0)
                if deadline.expired:
                    raise missed.error from None
                log.info("sbatch did not reach slurmctld (%s); sending it again", missed)
                deadline.sleep(2.0)

    def find_by_key(self, key: str) -> Optional[str]:
        """The job carrying ``key`` (``None``: surely none); ``CannotAsk`` when unsure."""
        result = self._ask(status.key_argv())
        if not result.ok:
            raise CannotAsk(commands.scheduler_message(result.message()))
        found = status.parse_key_rows(result.stdout, key)
        if found is None:
            # A job that already ended and left the queue: history has the comment
            # where AccountingStoreFlags=job_comment is set.
            history = self._run(status.sacct_key_argv("now-3600"))
            if history.ok:
                found = status.parse_key_rows(history.stdout, key)
        return found

    def find_submitted(
        self, planned: Planned, since: Optional[float] = None
    ) -> Optional[List[Submitted]]:
        """The jobs a lost submission of ``planned`` made, by its key (``adoption``)."""
        spec = planned_spec(planned)
        found = look_up(
            lambda: self.find_by_key(spec.key),
            key=spec.key,
            budget=ADOPTION_BUDGET,
            settle=self.settle(),
            where=f"slurmctld on {self.executor.host}",
        )
        return None if found is None else submitted_for(planned.batch, spec, found)

    def queue_limit(self, account: Optional[str] = None) -> Optional[int]:
        """The smallest cap on this user's queued jobs (``limits``: of ``account``'s
        association when given, else of all the user's); ``None`` where none is set or
        the accounting cannot be asked.  Read at most once per cluster, login and
        account in ``limit_cache.TTL`` seconds: kept in memory and, with a
        ``limit_cache``, in the state folder for the user's other processes."""
        key = self._limit_key(account)
        ttl = self.limit_cache.ttl if self.limit_cache else TTL
        now = time.monotonic()
        memo = self._queue_limits.get(key)
        if memo is not None and now - memo[0] < ttl:
            return memo[1]
        found, cap = self.limit_cache.get(key) if self.limit_cache else (False, None)
        if not found:
            cap = self._read_queue_limit(account)
            if self.limit_cache:
                self.limit_cache.put(key, cap)
        self._queue_limits[key] = (now, cap)
        return cap

    def _limit_key(self, account: Optional[str]) -> str:
        """Which cluster, login and account a cap is of: the login (``user@host`` over
        SSH, the local user here) and the slurm.conf the commands read there."""
        executor = self.executor
        env = {**executor.env, **(self.env or {})}
        conf = env.get("SLURM_CONF") or (
            os.environ.get("SLURM_CONF", "") if executor.is_local else ""
        )
        login = executor.host
        if executor.is_local:
            try:
                login = f"{pwd.getpwuid(os.geteuid()).pw_name}@{login}"
            except KeyError:  # a uid without a passwd entry (a container)
                login = f"{os.geteuid()}@{login}"
        return "|".join((login, conf, account or ""))

    def _read_queue_limit(self, account: Optional[str] = None) -> Optional[int]:
        user = self._run(limits.user_argv())
        assoc = self._run(limits.assoc_argv(user.stdout.strip())) if user.ok else user
        if not assoc.ok:
            log.info("no cap on queued jobs known: %s", commands.scheduler_message(assoc.message()))
            return None
        cluster = self.config().get("ClusterName")
        caps, qos_names = limits.parse_assoc(assoc.stdout, cluster, account)
        qos = self._run(limits.qos_argv())
        if qos.ok:
            caps += limits.parse_qos(qos.stdout, qos_names)
        return limits.smallest(caps)

    def settle(self) -> float:
        """How long an absent key must stay absent: slurmctld's MessageTimeout, or 10 s."""
        try:
            return max(float(self.config().get("MessageTimeout", "10").split()[0]), 5.0)
        except ValueError:
            return 10.0

    # -- status ------------------------------------------------------------

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """Every id: from squeue, else sacct, else UNKNOWN.

        Where the release has it (23.11.5+), the light ``--only-job-state`` round
        comes first and the full fields are asked only for the jobs whose state
        changed since the last round.  When squeue itself fails (controller down
        or restarting, past the retries), ``NotAskedNow`` with squeue's words.
        """
        ids = list(dict.fromkeys(job_ids))
        if not ids:
            return {}
        answers: Dict[str, JobStatus] = {}
        to_ask = ids
        # A cold round (nothing known yet) needs every job's full fields: no light one.
        if self._last and self._light():
            light = self._ask(status.squeue_state_argv(ids))
            if light.ok:
                states = status.parse_squeue_states(light.stdout)
                for job_id, state in states.items():
                    last = self._last.get(job_id)
                    if last is not None and last.native_state == state:
                        answers[job_id] = last  # unchanged: the full answer stands
                to_ask = [job_id for job_id in ids if job_id in states and job_id not in answers]
        if to_ask:
            result = self._ask(status.squeue_argv(to_ask))
            if result.ok:
                in_queue = status.parse_squeue(result.stdout)
                answers.update(
                    {job_id: in_queue[job_id] for job_id in to_ask if job_id in in_queue}
                )
            elif not commands.is_invalid_job_id(result.message()):
                # e.g. "slurm_load_jobs error: Unable to contact slurm controller
                # (connect failure)" while slurmctld restarts.
                raise NotAskedNow(f"squeue failed: {commands.scheduler_message(result.message())}")
        missing = [job_id for job_id in ids if job_id not in answers]
        if missing:
            answers.update(self.history(missing))
        self._last = {
            job_id: answer for job_id, answer in answers.items() if not answer.is_terminal
        }
        return {job_id: answers.get(job_id) or unknown(job_id, NOT_FOUND) for job_id in ids}

    def _light(self) -> bool:
        """Whether this Slurm has ``squeue --only-job-state`` (asked once)."""
        if self._has_light is None:
            parsed = commands.parse_version(self.version() or "")
            self._has_light = parsed is not None and parsed >= status.ONLY_JOB_STATE_SINCE
        return self._has_light

    def history(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """What sacct remembers of these ids (nothing when accounting is off).

        A task it has no row for is asked again by its array's id: the tasks of an
        array cancelled before they started have one row under that id only."""
        found = self._sacct(job_ids, job_ids)
        if found is None:
            return {}
        missing = status.array_ids([job_id for job_id in job_ids if job_id not in found])
        if missing:
            found.update(self._sacct(missing, [i for i in job_ids if i not in found]) or {})
        return found

    def _sacct(self, asked: Sequence[str], wanted: Sequence[str]) -> Optional[Dict[str, JobStatus]]:
        """One sacct for ``asked``: the statuses of the ``wanted`` ids it has; ``None``
        when sacct failed (said once, see below)."""
        result = self._run(status.sacct_argv(asked))
        if not result.ok:
            message = commands.scheduler_message(result.message())  # one line, never raw
            if not commands.accounting_disabled(message):
                log.warning("sacct failed (exit %s): %s", result.returncode, message)
            elif not self._accounting_off_noted:
                self._accounting_off_noted = True
                log.info(
                    "Slurm accounting is disabled on %s: finished jobs are known from "
                    "squeue (MinJobAge) and then from the exit-code file",
                    self.executor.host,
                )
            return None
        history = status.parse_sacct(result.stdout, wanted=wanted)
        return {job_id: history[job_id] for job_id in wanted if job_id in history}

    # -- cancel, logs, config ----------------------------------------------------

    def cancel(self, job_ids: Sequence[str]) -> None:
        """scancel; a job that ended meanwhile or was purged (scancel's "Invalid job id",
        "already completing") is no failure; anything else is raised."""
        if not job_ids:
            return
        result = self._run(commands.scancel_argv(job_ids))
        if not result.ok:
            message = commands.scheduler_message(result.message())
            if commands.job_already_ended(message):
                return  # the job ended (and maybe was purged) meanwhile
            raise SchedulerAdapterError(f"scancel failed (exit {result.returncode}): {message}")

    def find_output(self, job_id: str) -> Optional[str]:
        """Where a job without a record writes its output (while Slurm knows it)."""
        result = self._run(commands.scontrol_show_job_argv(job_id))
        if not result.ok:
            return None
        return commands.output_of_record(commands.parse_scontrol_record(result.stdout))

    def config(self) -> Dict[str, str]:
        """``scontrol show config`` (read once); empty when it cannot be read."""
        if self._config is None:
            result = self._run(commands.scontrol_config_argv())
            if not result.ok:
                message = commands.scheduler_message(result.message())
                log.warning("scontrol show config failed: %s", message)
                return {}
            self._config = commands.parse_scontrol_config(result.stdout)
        return self._config

    def max_batch(self) -> int:
        """Tasks per array: ``MaxArraySize`` (asked once), or the override; at least 1."""
        if self._max_array_size is None:
            self._max_array_size = commands.max_array_size(self.config())
        return max(1, self._max_array_size)

    def version(self) -> Optional[str]:
        """Slurm's version as ``scontrol --version`` prints it, e.g. 22.05.8."""
        result = self._run(commands.scontrol_version_argv())
        if not result.ok:
            return None
        parsed = commands.parse_version(result.stdout)
        return commands.format_version(parsed) if parsed else None

    def waiter(self, job_ids: Sequence[str]) -> None:
        """Slurm has no job events to wait on: the adapter sleeps between rounds."""
        return None

    def close(self) -> None:
        """Nothing to release: the executor belongs to the adapter."""
