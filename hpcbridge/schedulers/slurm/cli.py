"""The Slurm CLI driver: sbatch/squeue/sacct/scancel run through an executor (local or SSH),
and the cap on queued jobs kept a few minutes for all of a user's processes."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pwd
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ...engine.adoption import CannotAsk, adopt_or_resubmit, look_up
from ...engine.driver import NotAskedNow, Planned, SubmitBatch, Submitted
from ...errors import JobTimeoutError, SchedulerAdapterError, SubmissionUncertainError
from ...model import JobStatus
from ...native_options import option_names
from ...retrying import Deadline, retry
from ...transports.base import CommandResult, Executor
from . import commands, status
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

log = logging.getLogger("hpcbridge.slurm")

#: seconds an uncertain submission may take to be found, or found surely absent
ADOPTION_BUDGET = 180.0

#: seconds a cap on queued jobs is taken from the cache
TTL = 300.0


class LimitCache:
    """Answers of ``queue_limit`` by key, each kept ``ttl`` seconds in ``folder`` (one JSON
    file per key, written whole and renamed into place) for every process of the user; a
    file that cannot be read or written is a miss, never an error."""

    def __init__(
        self, folder: Path, ttl: float = TTL, clock: Callable[[], float] = time.time
    ) -> None:
        self.folder = Path(folder)
        self.ttl = ttl
        self.clock = clock

    def path(self, key: str) -> Path:
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]
        return self.folder / f"queue-limit-{digest}.json"

    def get(self, key: str) -> Tuple[bool, Optional[int]]:
        """``(True, cap)`` for an answer younger than ``ttl`` (``cap`` may be ``None``:
        no cap); ``(False, None)`` when there is none."""
        try:
            data = json.loads(self.path(key).read_text(encoding="utf-8"))
            read, cap = float(data["read"]), data["cap"]
        except (OSError, ValueError, KeyError, TypeError):
            return False, None
        age = self.clock() - read
        fresh = data.get("key") == key and 0 <= age < self.ttl
        if not fresh or not (cap is None or (isinstance(cap, int) and cap > 0)):
            return False, None
        return True, cap

    def put(self, key: str, cap: Optional[int]) -> None:
        """Keep ``cap`` (``None``: no cap) as read now; a failure is logged, not raised."""
        text = json.dumps({"key": key, "cap": cap, "read": self.clock()})
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=".queue-limit-")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    out.write(text)
                os.replace(temporary, self.path(key))
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError as exc:
            log.debug("cannot keep the cap on queued jobs in %s: %s", self.folder, exc)


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
        """``env``: extra environment for every command (``SLURM_CONF``...).
        ``query_retries``: seconds a question to a busy controller is asked again for
        (default: 10, or the command timeout if shorter), then ``NotAskedNow``.
        ``light_rounds``: whether squeue has ``--only-job-state`` (``None``: from the
        version).  ``limit_cache``: where ``queue_limit`` keeps the cap for other processes."""
        self.executor = executor
        self.command_timeout = command_timeout
        self.env = dict(env) if env else None
        self._max_array_size = max_array_size
        self._config: Optional[Dict[str, str]] = None
        self._accounting_off_noted = False
        self._busy_noted = False
        self.query_retries = (
            query_retries if query_retries is not None else min(10.0, command_timeout or 60.0)
        )
        self._has_light = light_rounds
        #: the last unfinished answers, for the light rounds
        self._last: Dict[str, JobStatus] = {}
        self.limit_cache = limit_cache
        #: the cap on queued jobs by ``_limit_key``: when it was read (monotonic), and it
        self._queue_limits: Dict[str, Tuple[float, Optional[int]]] = {}
        self._option_names: Optional[Dict[str, str]] = None

    def _run(self, argv: List[str], idempotent: bool = True) -> CommandResult:
        return self.executor.run(
            argv, timeout=self.command_timeout, env=self.env, idempotent=idempotent
        )

    def _ask(self, argv: List[str]) -> CommandResult:
        """A question to the controller, asked again with back-off while it is busy,
        restarting or rate-limiting us, within ``query_retries``."""

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
            result = self._run(["sbatch", "--help"])
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
        """One sbatch; its job id."""
        argv = commands.sbatch_argv(spec)
        return self.adopting(spec, lambda: self._sbatch(argv))

    def adopting(self, spec: SubmitSpec, once: Callable[[], str]) -> str:
        """``once()``'s job id; where its answer was lost, the job found by the spec's key
        or (surely absent) submitted again (``adoption``)."""
        try:
            return once()
        except SubmissionUncertainError as lost:
            if not spec.key:
                raise
            log.warning(
                "the submission's answer was lost (%s); looking for job hpcbridge:%s",
                lost,
                spec.key,
            )
            return adopt_or_resubmit(
                lambda: self.find_by_key(spec.key),
                once,
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
            # An ended job that left the queue: sacct has the comment with job_comment set.
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

    def queue_limit(self, account: Optional[str] = None, *, ask: bool = True) -> Optional[int]:
        """The smallest cap on this user's queued jobs (of ``account``'s association when
        given, else of all the user's); ``None`` where none is set or it cannot be asked.
        Read at most once per cluster, login and account in ``TTL`` seconds; with
        ``ask=False`` only a cap read before (by any process of the state folder), else
        ``None`` with nothing run: slurmctld refuses an array past the cap whole, in the
        one sbatch, and the sweep that follows reads it."""
        key = self._limit_key(account)
        ttl = self.limit_cache.ttl if self.limit_cache else TTL
        now = time.monotonic()
        memo = self._queue_limits.get(key)
        if memo is not None and now - memo[0] < ttl:
            return memo[1]
        found, cap = self.limit_cache.get(key) if self.limit_cache else (False, None)
        if not found:
            if not ask:
                return None
            cap = self._read_queue_limit(account)
            if self.limit_cache:
                self.limit_cache.put(key, cap)
        self._queue_limits[key] = (now, cap)
        return cap

    def _limit_key(self, account: Optional[str]) -> str:
        """The login (``user@host``) and the slurm.conf the commands read there, the account."""
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
        user = self._run(["id", "-un"])  # the login the association is kept under
        assoc = self._run(commands.assoc_argv(user.stdout.strip())) if user.ok else user
        if not assoc.ok:
            log.info("no cap on queued jobs known: %s", commands.scheduler_message(assoc.message()))
            return None
        cluster = self.config().get("ClusterName")
        caps, qos_names = commands.parse_assoc(assoc.stdout, cluster, account)
        qos = self._run(commands.qos_argv())
        if qos.ok:
            caps += commands.parse_qos(qos.stdout, qos_names)
        return min(caps, default=None)

    def settle(self) -> float:
        """How long an absent key must stay absent: slurmctld's MessageTimeout, or 10 s."""
        try:
            return max(float(self.config().get("MessageTimeout", "10").split()[0]), 5.0)
        except ValueError:
            return 10.0

    # -- status ------------------------------------------------------------

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """Every id: from squeue, else sacct, else UNKNOWN; ``NotAskedNow`` when squeue
        fails (past the retries).  Where squeue has ``--only-job-state``, only the jobs
        whose state changed since the last round are asked their full fields."""
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
                answers.update(status.parse_squeue(result.stdout, wanted=to_ask))
            elif not commands.is_invalid_job_id(result.message()):
                # e.g. "Unable to contact slurm controller" while slurmctld restarts
                raise NotAskedNow(f"squeue failed: {commands.scheduler_message(result.message())}")
        missing = [job_id for job_id in ids if job_id not in answers]
        if missing:
            answers.update(self.history(missing))
        others = [job_id for job_id in missing if job_id not in answers]
        if others and status.by_user(to_ask):  # squeue listed the user's jobs: not another's
            result = self._ask(status.squeue_argv(others, by_id=True))
            if result.ok:
                answers.update(status.parse_squeue(result.stdout, wanted=others))
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
        """What sacct remembers of these ids (nothing when accounting is off)."""
        # Tasks cancelled before they started have one row, under the array's id.
        found = self._sacct(job_ids, job_ids)
        if found is None:
            return {}
        missing = status.array_ids([job_id for job_id in job_ids if job_id not in found])
        if missing:
            found.update(self._sacct(missing, [i for i in job_ids if i not in found]) or {})
        return found

    def _sacct(self, asked: Sequence[str], wanted: Sequence[str]) -> Optional[Dict[str, JobStatus]]:
        """One sacct for ``asked``: the statuses of the ``wanted`` ids it has; ``None``
        when sacct failed."""
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
        return status.parse_sacct(result.stdout, wanted=wanted)

    # -- cancel, logs, config ----------------------------------------------------

    def cancel(self, job_ids: Sequence[str]) -> None:
        """scancel; a job that ended meanwhile or was purged is no failure."""
        if not job_ids:
            return
        result = self._run(commands.scancel_argv(job_ids))
        if not result.ok:
            message = commands.scheduler_message(result.message())
            if commands.job_already_ended(message):
                return
            raise SchedulerAdapterError(f"scancel failed (exit {result.returncode}): {message}")

    def find_output(self, job_id: str) -> Optional[str]:
        """Where a job without a record writes its output (while Slurm knows it)."""
        result = self._run(["scontrol", "--oneliner", "show", "job", job_id])
        if not result.ok:
            return None
        return commands.output_of_record(commands.parse_scontrol_record(result.stdout))

    def config(self) -> Dict[str, str]:
        """``scontrol show config`` (read once); empty when it cannot be read."""
        if self._config is None:
            result = self._run(["scontrol", "show", "config"])
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
        result = self._run(["scontrol", "--version"])
        if not result.ok:
            return None
        parsed = commands.parse_version(result.stdout)
        return commands.format_version(parsed) if parsed else None

    def waiter(self, job_ids: Sequence[str]) -> None:
        return None  # no job events: the adapter sleeps between rounds

    def close(self) -> None:
        """Nothing to release: the executor belongs to the adapter."""
