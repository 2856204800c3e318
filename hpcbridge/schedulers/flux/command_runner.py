"""``flux`` subcommands against one instance, run by the engine's runner through the executor
(local or SSH), and the jobs of a submission whose answer was lost, found by the key in their
jobspecs (``KeyFinder``).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Callable, Collection, Dict, List, Optional, Sequence, Tuple, TypeVar

from ...engine.driver import Command, Reply
from ...engine.runner import Runner
from ...errors import (
    JobTimeoutError,
    SchedulerUnavailableError,
    TransportError,
)
from ...retrying import retry
from ...transports.base import CommandResult, Executor
from . import answers, commands, instance_answers
from .instance import (
    Association,
    FluxPolicy,
    QueueInfo,
    parse_config_json,
    parse_flux_version_output,
    parse_queue_list,
)
from .jobspec import KEY_ATTRIBUTE
from .options import Attributes, JudgedOptions

log = logging.getLogger("hpcbridge")

T = TypeVar("T")
R = TypeVar("R", bound=Reply)

#: seconds the user's flux-accounting rows are trusted before they are read again
ASSOCIATIONS_TTL = 300.0


class FluxCommands:
    """Runs ``flux`` subcommands against one instance (``uri``; ``None`` = the default)."""

    def __init__(
        self,
        executor: Executor,
        flux_command: str = "flux",
        command_timeout: float = 60.0,
        uri: Optional[str] = None,
    ) -> None:
        self.executor = executor
        self.flux = flux_command
        self.command_timeout = command_timeout
        self.uri = uri
        #: the engine's runner of this instance's commands (adoption, sending, chunks)
        self.runner = Runner(
            executor,
            timeout=command_timeout,
            env={"FLUX_URI": uri} if uri else None,
            where=f"the Flux instance {uri}" if uri else "the system Flux instance",
            adoption_budget=ADOPTION_BUDGET,
        )
        #: what each native option sets, judged by dry runs (``native_attributes``)
        self._judged = JudgedOptions()
        #: the login the instance's accounting knows this user by (``associations``)
        self._user: Optional[str] = None
        #: when the user's flux-accounting rows were read, and them (``associations``)
        self._associations: Tuple[float, Optional[List[Association]]] = (-math.inf, None)

    def for_uri(self, uri: Optional[str]) -> FluxCommands:
        """The same commands aimed at another instance."""
        return FluxCommands(self.executor, self.flux, self.command_timeout, uri)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: Optional[float] = None,
        idempotent: bool = True,
        input: Optional[str] = None,
        cwd: Optional[str] = None,
    ) -> CommandResult:
        """``argv`` run once by the runner (``FLUX_URI`` set; ``timeout``: the command
        timeout); ``SchedulerUnavailableError`` where the command does not exist."""
        request = Command(argv, cwd=cwd, stdin=input, timeout=timeout)
        return self.found(self.runner.run(request, idempotent=idempotent), argv[0])

    def found(self, result: R, command: Optional[str] = None) -> R:
        """``result`` of ``command`` (default: flux); ``SchedulerUnavailableError`` where
        the command does not exist where commands run."""
        return answers.command_found(result, command or self.flux, self.executor.kind)

    def versions(self) -> Dict[str, str]:
        """``flux version``: commands, libflux-core and (only when it answered) broker."""
        found = parse_flux_version_output(self.run(commands.version_argv(self.flux)).stdout)
        if "broker" in found:
            return found
        return instance_answers.with_broker(
            found, self.run(commands.getattr_argv(self.flux, "version"))
        )

    def hostname(self) -> Optional[str]:
        result = self.runner.run(commands.hostname_argv())
        return result.stdout.strip() if result.ok else None

    def queue_info(self, policy: FluxPolicy) -> Optional[QueueInfo]:
        """The configuration's queues (``flux config get``), else ``flux queue list``."""
        found = None
        if policy.config_rpc:
            found = self._parsed(commands.config_argv(self.flux), parse_config_json)
        if found is None:
            found = self._parsed(commands.queue_list_argv(self.flux), parse_queue_list)
        return found

    def _parsed(self, argv: List[str], parse: Callable[[str], T]) -> Optional[T]:
        return answers.parsed(self.run(argv), parse, " ".join(argv[1:3]))

    def _resource_r(self, parse: Callable[[str], T]) -> Optional[T]:
        return self._parsed(commands.resource_r_argv(self.flux), parse)

    def expiration(self) -> Optional[float]:
        return self._resource_r(instance_answers.parse_expiration)

    def capacity(self) -> Optional[Tuple[int, int]]:
        """The cores the instance schedules on: of its ranks up, and of all of them (its R)."""
        return self._parsed(commands.resource_list_argv(self.flux), instance_answers.parse_capacity)

    def associations(self) -> Optional[List[Association]]:
        """This user's flux-accounting banks with their limits; ``None`` where it has none or
        will not say (its service answers its owner only)."""
        asked, found = self._associations
        if time.monotonic() - asked <= ASSOCIATIONS_TTL:
            return found
        found = None
        if self._user is None:
            user = self.runner.run(commands.user_argv())
            self._user = user.stdout.strip() if user.ok else ""
        if not self._user:  # who asks is unknown: there is no row to ask for
            self._associations = (time.monotonic(), None)
            return None
        try:
            # through flux-accounting's service: no database path
            result = self.run([self.flux, "account", "view-user", self._user])
        except SchedulerUnavailableError as exc:  # no flux command: no accounting to ask
            result = CommandResult([], 1, "", str(exc))
        found = instance_answers.associations(result)
        self._associations = (time.monotonic(), found)
        return found

    def native_attributes(
        self, policy: FluxPolicy, batch: bool, options: Sequence[str]
    ) -> Attributes:
        """What ``options`` (Flux's own words) set in a job's attributes, by dry runs (bare,
        then one per option; remembered); ``ResourceError`` for one refused."""
        command = policy.batch_command if batch else policy.submit_command
        return self._judged.attributes(
            batch, options, lambda asked: self._dry_run(command, batch, asked)
        )

    def _dry_run(self, command: Sequence[str], batch: bool, options: Sequence[str]) -> str:
        argv = commands.dry_run_argv(self.flux, command, batch, options)
        return answers.dry_run_jobspec(self.run(argv), command, options)

    def wait_ready(self, timeout: float) -> None:
        """A trivial request answered = the broker is up (submits retry on top)."""
        argv = commands.getattr_argv(self.flux, "rank")
        retry(lambda: self.run(argv), budget=timeout, again=lambda r: not r.ok, pause=0.5)

    def resolve_uri(self, target: str, policy: FluxPolicy, timeout: float) -> str:
        """``flux uri --remote TARGET`` (``slurm:ID``: ``flux uri`` by a step on the job's
        first node), asked again until published; ``LookupError``: not known."""
        if not policy.uri_resolution:
            raise SchedulerUnavailableError(
                f"Flux adapter {policy.name} has no `flux uri`; give an ssh:// or local:// URI"
            )
        scheme, _, job_id = target.partition(":")

        def ask() -> CommandResult:
            if scheme == "slurm":
                return self._uri_on_first_node(job_id)
            return self.run(commands.uri_argv(self.flux, target))

        starting = instance_answers.uri_not_yet
        result = retry(ask, budget=timeout, again=starting, pause=0.5)
        return instance_answers.resolved_uri(result, target)

    def _uri_on_first_node(self, job_id: str) -> CommandResult:
        """``flux uri slurm:JOB`` on the job's first node, where rank 0's broker runs."""
        # Flux's Slurm resolver before 0.80 runs its srun on any node of the job (Slurm
        # takes them in turn), and a broker of rank > 0 has no child to read FLUX_URI from.
        listed = self._slurm(commands.slurm_nodes_argv(job_id))
        if not listed.ok:
            return listed
        first = instance_answers.first_slurm_node(listed.stdout)
        if first is None:
            return CommandResult(listed.argv, 1, "", f"empty nodelist for Slurm job {job_id}")
        return self._slurm(commands.slurm_first_node_uri_argv(self.flux, job_id, first))

    def _slurm(self, argv: Sequence[str]) -> CommandResult:
        """A Slurm command run by the runner; ``SchedulerUnavailableError`` where Slurm's
        commands are missing (``slurm:ID`` needs squeue and srun where commands run)."""
        return answers.command_found(
            self.runner.run(Command(argv)),
            "Slurm's squeue and srun (for slurm:ID)",
            self.executor.kind,
            advice="put them on PATH (HPCBRIDGE_COMMAND_ENV) or give the instance's URI "
            "(flux uri --remote)",
        )

    def adopt(
        self,
        policy: FluxPolicy,
        keys: Sequence[str],
        started: Optional[float],
        resend: Optional[Callable[[List[str]], None]] = None,
    ) -> Dict[str, str]:
        """key -> id of the jobs carrying ``keys`` since ``started`` (epoch seconds; ``None``:
        ``LOOK_BACK`` ago), by the engine's one adoption routine; ``resend(missing keys)``
        once the rest surely never went in (without it, nothing is sent again: the sender
        died)."""
        label = keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"
        since = time.time() - LOOK_BACK if started is None else started
        return self.runner.look_up(
            keys,
            KeyFinder(self, policy, since).find,
            settle=SETTLE,
            resend=resend,
            look_for=f"jobs whose jobspec has {KEY_ATTRIBUTE}={label}",
        )

    def output_of(self, job_id: str) -> Optional[str]:
        result = self.run(commands.jobspec_argv(self.flux, job_id))
        return answers.output_path_from_jobspec(result.stdout, job_id) if result.ok else None


#: seconds an uncertain submission may take to be found, or found surely absent
ADOPTION_BUDGET = 180.0
#: seconds the instance must keep saying no job has the key before it is sent again (a paused
#: broker takes a held request in later; job-list learns of a job after the job-manager)
SETTLE = 10.0
#: seconds before the attempt began from which jobs are listed (t_submit is the broker's clock)
SINCE_MARGIN = 30.0
#: seconds back from now a lookup for a sender that died lists jobs from, by default
LOOK_BACK = 3600.0
#: seconds one question may take (a paused broker answers nothing: the command waits)
LOOK_TIMEOUT = 15.0


class KeyFinder:
    """The jobs carrying some keys on one instance, asked by command."""

    def __init__(self, commands: FluxCommands, policy: FluxPolicy, started: float) -> None:
        self.commands = commands
        self.policy = policy
        self.since = self._since(started)
        #: job id -> the key its jobspec carries (``None``: none)
        self._keys: Dict[str, Optional[str]] = {}

    def _since(self, started: float) -> float:
        elapsed = time.time() - started
        now = time.time()
        try:
            result = self.commands.run(commands.clock_argv(), timeout=LOOK_TIMEOUT)
            if result.ok:
                now = answers.parse_clock(result.stdout)
        except (ValueError, JobTimeoutError, TransportError, SchedulerUnavailableError) as exc:
            log.debug("flux: cannot read the clock where the commands run (%s)", exc)
        return now - elapsed - SINCE_MARGIN

    def find(self, keys: Collection[str]) -> Dict[str, str]:
        """key -> the id of the job carrying it; ``CannotAsk`` when the instance cannot tell."""
        argv = commands.recent_jobs_argv(self.commands.flux, self.policy, self.since)
        listing = self.commands.run(argv, timeout=LOOK_TIMEOUT)
        for job_id in answers.recent_jobs(listing, self.since):
            if job_id not in self._keys:
                argv = commands.jobspec_argv(self.commands.flux, job_id)
                jobspec = self.commands.run(argv, timeout=LOOK_TIMEOUT)
                self._keys[job_id] = answers.job_key(jobspec, job_id)
        return answers.keys_found(self._keys, keys)
