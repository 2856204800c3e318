"""The Slurm CLI driver: Slurm's commands (``commands``, ``queries``, ``cluster``) run by
the engine's runner through an executor (local or SSH), and the glue every Slurm driver
shares - the order of the questions (the queue, the history, by id), adoption of a lost
submission by its key, the cap on queued jobs and its cache, array sizes - over a table of
rows: the pyslurm driver (``native_driver``) and the REST driver (``rest_driver``) send
their own for the queue, the history and a submission (and the REST driver for the rest)."""

from __future__ import annotations

import functools
import logging
import os
import pwd
from typing import Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from ...engine.driver import Planned, SubmitBatch, Submitted
from ...engine.runner import CHUNK, Runner
from ...errors import JobSubmissionError
from ...model import JobStatus
from ...store.caps import LimitCache
from ...transports.base import Executor
from . import cluster, commands, options, queries
from .commands import CAPABILITIES, SubmitSpec, plan_batch, planned_spec, submit_batch
from .queries import NoHistory, Statuses

log = logging.getLogger("hpcbridge.slurm")

#: seconds a history (sacct) is looked into for a lost submission's key
KEY_HISTORY = "now-3600"


class SlurmCliDriver:
    """Slurm through its commands; the base of the pyslurm and REST drivers, which send
    their own rows (``_live``, ``_history``, ``_send``...) through the same glue."""

    name = "cli"
    capabilities = CAPABILITIES
    #: whether the queue is asked for the user's jobs only, so that other ids are asked by
    #: id (``_by_id``, ``queries.statuses``); slurmrestd's ``jobs/`` lists every user's
    asks_by_id = True

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
        retries = query_retries if query_retries is not None else min(10.0, command_timeout or 60.0)
        self.runner = Runner(
            executor,
            timeout=command_timeout,
            env=self.env,
            where=f"slurmctld on {executor.host}",
            patience=retries,
        )
        self._max_array_size = max_array_size
        self._config: Optional[Dict[str, str]] = None
        self._history_off_noted = False
        self._has_light = light_rounds
        #: the last unfinished answers, for the light rounds
        self._last: Dict[str, JobStatus] = {}
        self.limits = limit_cache or LimitCache(None)
        self._option_names: Optional[Dict[str, str]] = None

    @property
    def query_retries(self) -> float:
        """Seconds a question to a busy controller is asked again for (the runner's patience)."""
        return self.runner.patience

    @query_retries.setter
    def query_retries(self, seconds: float) -> None:
        self.runner.patience = seconds

    # -- submit ------------------------------------------------------------------------

    def submit_many(self, planned: Planned) -> List[Submitted]:
        return submit_batch(planned, self.submit)

    def submit(self, spec: SubmitSpec) -> str:
        """One submission of ``spec``; its job id."""
        return self._send(spec)

    def _wrapper(self, spec: SubmitSpec) -> Tuple[str, Dict[str, str]]:
        """The wrapper's text, for a driver that hands Slurm the script itself, and the
        job's environment as sbatch's ``--export=ALL`` passes it on: this process's where
        the commands run here, the transport's and the driver's (``env``) over it."""
        try:
            script = self.executor.read_text(spec.wrapper_path)
        except OSError as exc:
            raise JobSubmissionError(f"cannot read the wrapper {spec.wrapper_path}: {exc}") from exc
        local = os.environ if self.executor.is_local else {}
        return script, {**local, **self.executor.env, **(self.env or {})}

    def find_submitted(
        self, planned: Planned, since: Optional[float] = None
    ) -> Optional[List[Submitted]]:
        """The jobs a lost submission of ``planned`` made, by its key (``adoption``)."""
        spec = planned_spec(planned)
        found = self.runner.look_up([spec.key], self.find_keys, settle=self.settle())
        first = found.get(spec.key)
        return None if first is None else commands.submitted_for(planned.batch, spec, first)

    def settle(self) -> float:
        """How long an absent key must stay absent (``cluster.settle_time``)."""
        return cluster.settle_time(self.config())

    # -- the cap on queued jobs ----------------------------------------------------------

    def queue_limit(self, account: Optional[str] = None, *, ask: bool = True) -> Optional[int]:
        """The smallest cap on this user's queued jobs (of ``account``'s association when
        given, else of all the user's); ``None`` where none is set or it cannot be asked.
        Read at most once per cluster, login and account in ``TTL`` seconds; with
        ``ask=False`` only a cap read before (by any process of the state folder), else
        ``None`` with nothing run: slurmctld refuses an array past the cap whole, in the
        one sbatch, and the sweep that follows reads it."""
        key = self._limit_key(account)
        return self.limits.remembered(key, lambda: self._read_queue_limit(account), ask)

    def _limit_key(self, account: Optional[str]) -> str:
        executor, login = self.executor, self.executor.host
        conf = cluster.slurm_conf([self.env or {}, executor.env], os.environ, executor.is_local)
        if executor.is_local:
            try:
                login = f"{pwd.getpwuid(os.geteuid()).pw_name}@{login}"
            except KeyError:  # a uid without a passwd entry (a container)
                login = f"{os.geteuid()}@{login}"
        return cluster.limit_key(login, conf, account)

    # -- status --------------------------------------------------------------------------

    def query(self, job_ids: Sequence[str]) -> Dict[str, JobStatus]:
        """Every id: from the queue, else from the history, else UNKNOWN (``queries.statuses``);
        ``NotAskedNow`` when the queue cannot be asked (past the retries)."""
        by_id = self._by_id if self.asks_by_id else None
        answers = queries.statuses(job_ids, self._live, self._history_noted, by_id)
        self._last = {
            job_id: answer for job_id, answer in answers.items() if answer.state.rank in (0, 1)
        }
        return answers

    def _history_noted(self, asked: List[str], wanted: List[str]) -> Statuses:
        try:
            return self._history(asked, wanted)
        except NoHistory as none:
            self._history_off_noted = none.note(self.executor.host, self._history_off_noted)
            raise

    def max_batch(self) -> int:
        """Tasks per array: ``MaxArraySize`` (asked once), or the override; at least 1."""
        if self._max_array_size is None:
            self._max_array_size = cluster.max_array_size(self.config())
        return max(1, self._max_array_size)

    def launcher(self, options: object) -> str:
        """``srun``: what starts a job's parallel tasks (``$HPCBRIDGE_LAUNCHER -n 2 app``)."""
        return "srun"

    def waiter(self, job_ids: Sequence[str]) -> None:
        return None  # no job events: the adapter pauses between rounds

    def close(self) -> None:
        """Nothing to release: the executor belongs to the adapter."""

    # -- the rows: what this driver sends for each question (the others send their own)

    def _live(self, ids: List[str]) -> Statuses:
        """The queue's statuses (squeue); where squeue has ``--only-job-state``, the full
        fields only of the jobs whose state changed since the last round."""
        states = None
        # A cold round (nothing known yet) needs every job's full fields: no light one.
        if self._last and self._light():
            try:
                states = self.runner.ask_each(queries.squeue_state_argv, ids, queries.states_reply)
            except queries.NoAnswer:
                states = None  # every job's full fields
        answers, to_ask = queries.light_round(ids, self._last, states)
        if to_ask:
            size = queries.squeue_chunk(to_ask, CHUNK)  # many ids: one squeue --me
            answers.update(
                self.runner.ask_each(queries.squeue_argv, to_ask, queries.squeue_reply, size=size)
            )
        return answers

    def _by_id(self, ids: List[str]) -> Statuses:
        """The queue's statuses of ``ids``, asked by their ids."""
        argv = queries.squeue_argv(ids, by_id=True)
        return self.runner.ask(argv, lambda reply: queries.squeue_reply(reply, ids))

    def _history(self, asked: List[str], wanted: List[str]) -> Statuses:
        """What sacct remembers of ``asked``: the statuses of the ``wanted`` ids it has."""
        return self.runner.ask(queries.sacct_argv(asked), lambda r: queries.sacct_reply(r, wanted))

    def _send(self, spec: SubmitSpec) -> str:
        """One sbatch; its job id (a lost answer adopted by the spec's key)."""
        argv = commands.sbatch_argv(spec)
        parse = functools.partial(commands.sbatch_reply, argv, self.executor.host)
        return self.runner.submit(
            argv, parse, key=spec.key, find=self.find_keys, settle=self.settle
        )

    # -- submit ------------------------------------------------------------------

    def plan(self, batch: SubmitBatch) -> Planned:
        if batch.resources.native_options("slurm"):
            options.check_native(batch.resources, self.option_names(), self.executor.host)
        return plan_batch(batch)

    def option_names(self) -> Optional[Dict[str, str]]:
        """The option names of the running sbatch, from its ``--help`` (read once);
        ``None`` where it cannot be read (then sbatch itself judges a native option)."""
        if self._option_names is None:
            reply = self.runner.run(["sbatch", "--help"])
            self._option_names = cluster.options_reply(reply, self.executor.host)
        return self._option_names or None

    def describe(self, planned: Planned) -> str:
        return commands.describe_argv(commands.sbatch_argv(planned_spec(planned)))

    def find_keys(self, keys: Collection[str]) -> Dict[str, str]:
        """key -> the job carrying it, from squeue, else from sacct (an ended job that left
        the queue: Slurm keeps its comment with ``AccountingStoreFlags=job_comment``)."""
        found = self.runner.ask(queries.key_argv(), lambda reply: queries.keys_reply(reply, keys))
        if len(found) < len(keys):
            history = self.runner.run(queries.sacct_key_argv(KEY_HISTORY))
            found = {**queries.history_keys_reply(history, keys), **found}
        return found

    # -- the cap on queued jobs ----------------------------------------------------

    def _read_queue_limit(self, account: Optional[str] = None) -> Optional[int]:
        user = self.runner.run(["id", "-un"])  # the login the association is kept under
        assoc = self.runner.run(cluster.assoc_argv(user.stdout.strip())) if user.ok else user
        qos = self.runner.run(cluster.qos_argv()) if assoc.ok else None
        return cluster.caps_reply(assoc, qos, self.config().get("ClusterName"), account)

    # -- status ------------------------------------------------------------------

    def _light(self) -> bool:
        """Whether this Slurm has ``squeue --only-job-state`` (asked once)."""
        if self._has_light is None:
            parsed = cluster.parse_version(self.version() or "")
            self._has_light = parsed is not None and parsed >= queries.ONLY_JOB_STATE_SINCE
        return self._has_light

    # -- cancel, logs, config ------------------------------------------------------

    def cancel(self, job_ids: Sequence[str]) -> None:
        """scancel; a job that ended meanwhile or was purged is no failure."""
        if job_ids:
            commands.cancel_reply(self.runner.run(commands.scancel_argv(job_ids)))

    def find_output(self, job_id: str) -> Optional[str]:
        """Where a job without a record writes its output (while Slurm knows it)."""
        argv = ["scontrol", "--oneliner", "show", "job", job_id]
        return cluster.output_reply(self.runner.run(argv))

    def config(self) -> Dict[str, str]:
        """``scontrol show config`` (read once); empty when it cannot be read."""
        if self._config is None:
            self._config = cluster.config_reply(self.runner.run(["scontrol", "show", "config"]))
        return self._config or {}

    def version(self) -> Optional[str]:
        """Slurm's version as ``scontrol --version`` prints it, e.g. 22.05.8."""
        return cluster.version_reply(self.runner.run(["scontrol", "--version"]))
