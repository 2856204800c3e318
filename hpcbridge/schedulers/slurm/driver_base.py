"""What every Slurm driver shares - the order of the questions (the queue, the history,
by id), adoption of a lost submission by its key, the cap on queued jobs and its cache,
array sizes - over a table of rows each driver fills: the CLI driver (``cli_driver``) with
Slurm's commands, the pyslurm driver (``native_driver``) with the C API over the CLI's
rows, the REST driver (``rest_driver``) with slurmrestd's requests."""

from __future__ import annotations

import os
import pwd
from typing import Callable, Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from ...engine.driver import Planned, SubmitBatch, Submitted
from ...engine.runner import Runner
from ...errors import JobSubmissionError
from ...model import JobStatus
from ...store.caps import LimitCache
from ...transports.base import Executor
from . import cluster, commands, queries
from .commands import CAPABILITIES, SubmitSpec, planned_spec, submit_batch
from .queries import NoHistory, Statuses


class SlurmDriverBase:
    """A Slurm driver but its rows (the methods each driver defines below)."""

    name = ""
    capabilities = CAPABILITIES
    #: the queue's statuses of ids asked by id, where the queue was asked for the user's
    #: jobs only (``queries.statuses``); ``None``: the queue's answer lists every user's
    _by_id: Optional[Callable[[List[str]], Statuses]] = None

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

    # -- the rows: each driver's own (its methods) ------------------------------------

    _live: Callable[[List[str]], Statuses]
    _history: Callable[[List[str], List[str]], Statuses]
    _send: Callable[[SubmitSpec], str]
    _read_queue_limit: Callable[[Optional[str]], Optional[int]]
    find_keys: Callable[[Collection[str]], Dict[str, str]]
    plan: Callable[[SubmitBatch], Planned]
    describe: Callable[[Planned], str]
    cancel: Callable[[Sequence[str]], None]
    find_output: Callable[[str], Optional[str]]
    config: Callable[[], Dict[str, str]]
    version: Callable[[], Optional[str]]

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
        answers = queries.statuses(job_ids, self._live, self._history_noted, self._by_id)
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
