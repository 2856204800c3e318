"""Running ``flux`` subcommands against one instance, through the executor (local or SSH).

``FluxCommands`` runs the command lines of ``command_line`` (``FLUX_URI`` in
each command's environment when a specific broker, e.g. a nested instance, is
targeted) and reads the instance's facts with them; the drivers submit,
follow and cancel with it.
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, List, Optional, Sequence, TypeVar

from ...errors import SchedulerUnavailableError
from ...retrying import retry
from ...transports.base import CommandResult, Executor
from . import command_line as cl
from .instance import (
    FluxPolicy,
    QueueInfo,
    parse_config_json,
    parse_flux_version_output,
    parse_queue_list,
)

log = logging.getLogger("hpcbridge")

T = TypeVar("T")

# A job whose broker is still starting is worth waiting for: a Flux job that
# has not published its URI yet, a Slurm job still pending ("empty nodelist")
# or whose `flux start` is not up yet ("doesn't seem to have a FLUX_URI").
# "not running" / "not found" are final.
_URI_NOT_YET = ("URI not found", "doesn't seem to have a FLUX_URI", "empty nodelist")


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
        result = self.executor.run(
            list(argv),
            timeout=timeout if timeout is not None else self.command_timeout,
            env={"FLUX_URI": self.uri} if self.uri else None,
            cwd=cwd,
            input=input,
            idempotent=idempotent,
        )
        if result.returncode == 127 and not result.stdout:
            raise SchedulerUnavailableError(
                f"{argv[0]} not found where commands run ({self.executor.kind}): "
                f"{result.message()} - set HPCBRIDGE_FLUX_COMMAND to the flux command's path"
            )
        return result

    def versions(self) -> Dict[str, str]:
        """``flux version``: commands, libflux-core and (when reachable) broker."""
        found = parse_flux_version_output(self.run(cl.version_argv(self.flux)).stdout)
        if "broker" not in found:
            # The broker line appears only when the broker answered.
            attr = self.run(cl.getattr_argv(self.flux, "version"))
            if attr.ok and attr.stdout.strip():
                found["broker"] = attr.stdout.strip()
            else:
                found["broker_error"] = attr.message()
        return found

    def hostname(self) -> Optional[str]:
        result = self.executor.run(cl.hostname_argv(), timeout=self.command_timeout)
        return result.stdout.strip() if result.ok else None

    def queue_info(self, policy: FluxPolicy) -> Optional[QueueInfo]:
        """The configuration's queues (``flux config get``), else ``flux queue list``."""
        found = None
        if policy.config_rpc:
            found = self._parsed(cl.config_get_argv(self.flux), parse_config_json)
        if found is None:
            found = self._parsed(cl.queue_list_argv(self.flux), parse_queue_list)
        return found

    def _parsed(self, argv: List[str], parse: Callable[[str], T]) -> Optional[T]:
        """``parse`` of what ``argv`` prints; ``None`` when it fails or prints nonsense."""
        result = self.run(argv)
        if not result.ok:
            return None
        try:
            return parse(result.stdout)
        except ValueError as exc:
            log.debug("%s: %s", " ".join(argv[1:3]), exc)
            return None

    def expiration(self) -> Optional[float]:
        return self._parsed(cl.resource_r_argv(self.flux), cl.parse_expiration)

    def wait_ready(self, timeout: float) -> None:
        """A trivial request answered = the broker is up (submits retry on top)."""
        argv = cl.getattr_argv(self.flux, "rank")
        retry(lambda: self.run(argv), budget=timeout, again=lambda r: not r.ok, pause=0.5)

    def resolve_uri(self, target: str, policy: FluxPolicy, timeout: float) -> str:
        """``flux uri --remote TARGET`` where the commands run (retried until published).

        Asked of this object's instance: the parent of a job id target, or the
        commands' default instance.  Raises ``LookupError`` when it cannot tell.
        """
        if not policy.uri_resolution:
            raise SchedulerUnavailableError(
                f"Flux adapter {policy.name} has no `flux uri`; give an ssh:// or local:// URI"
            )
        argv = cl.uri_argv(self.flux, target)

        def published_yet(result: CommandResult) -> bool:
            return bool(result.ok and cl.parse_uri_output(result.stdout))

        def starting(result: CommandResult) -> bool:
            return not published_yet(result) and any(m in result.message() for m in _URI_NOT_YET)

        result = retry(lambda: self.run(argv), budget=timeout, again=starting, pause=0.5)
        uri = cl.parse_uri_output(result.stdout) if result.ok else None
        if not uri:
            raise LookupError(f"flux uri --remote {target}: {result.message()}")
        return uri

    def output_of(self, job_id: str) -> Optional[str]:
        """From the job's jobspec (``flux job info ID jobspec``) when there is no record."""
        result = self.run(cl.jobspec_argv(self.flux, job_id))
        return cl.output_path_from_jobspec(result.stdout, job_id) if result.ok else None
