"""A pack's allocations: Slurm jobs each running a Flux instance (reached as
``slurm:<id>``), or a Flux system's batch jobs - asked for, reached and released through
the outer adapter; each instance is a Flux adapter made through the registry."""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from datetime import datetime, timezone
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
)

from ..engine.adapter import SchedulerAdapter
from ..engine.driver import Session
from ..engine.feeding import Sends
from ..engine.observation import Observation
from ..errors import ConfigurationError, SchedulerAdapterError
from ..model import RELEASED, JobState, JobStatus
from ..settings.schedulers import scheduler_entry
from .request import Pack
from .script import allocation_script

if TYPE_CHECKING:
    from ..engine.jobscript import TaskSpec
    from ..engine.parents import DependsOn
    from ..engine.submitting import Order
    from ..resources import Resources
    from ..settings.config import Settings

log = logging.getLogger("hpcbridge")


class AllocationError(SchedulerAdapterError):
    """An allocation of a pack ended before its instance could take tasks."""


class _Commands(Protocol):
    def capacity(self) -> Optional[Tuple[int, int]]:
        """The cores the instance schedules on: of its ranks up, and of all (its R)."""
        ...


class _InstanceSession(Session, Protocol):
    @property
    def commands(self) -> _Commands: ...


class Instance(Sends, Protocol):
    """What the feeding uses of an allocation's Flux instance (a Flux adapter: a
    ``SubmissionService``): its ``submission()`` as ``Sends`` declares it, and more."""

    settings: Settings

    def order(
        self,
        tasks: Callable[[], List[TaskSpec]],
        resources: Union[None, Mapping[str, Any], Resources],
        depends_on: DependsOn,
        remote_dir: Optional[str],
        options: Mapping[str, Any],
    ) -> Order: ...

    def open(self) -> _InstanceSession: ...

    def get_job_statuses(self, job_ids: Iterable[Any]) -> Dict[str, JobStatus]: ...

    def time_left(self) -> Optional[float]:
        """Seconds until the instance expires, where Flux says so."""
        ...

    def close(self) -> None: ...


class Allocations:
    """The pack's allocations on one outer adapter (see the module docstring)."""

    def __init__(
        self,
        outer: SchedulerAdapter,
        pack: Pack,
        flux_command: str = "flux",
        given: Optional[Mapping[str, Any]] = None,
    ) -> None:
        """``given``: the command's resource keys that are the allocations' (the first
        part of ``split_resources``); refused here, before anything is held."""
        if outer.scheduler_name not in ("slurm", "flux"):
            raise ConfigurationError(
                f"--pack holds Slurm allocations or Flux batch jobs; the scheduler here is "
                f"{outer.scheduler_name}: add --scheduler slurm or --scheduler flux"
            )
        self.outer = outer
        self.pack = pack
        self.flux_command = flux_command
        #: one allocation's resources, as its scheduler takes them
        self.resources: Dict[str, Any] = pack.allocation_resources(given)
        outer.validate_resources(self.resources)
        self._script: Optional[str] = None

    def script(self) -> str:
        """The allocations' batch script, written once under the state folder; its path."""
        if self._script is None:
            state = self.outer.settings.state_path
            state.mkdir(parents=True, exist_ok=True)
            folder = tempfile.mkdtemp(prefix="pack-", dir=state)
            path = os.path.join(folder, "allocation.sh")
            text = allocation_script(
                self.flux_command,
                self.pack.nodes,
                self.outer.scheduler_name,
                self.pack.cpus_per_node,
            )
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(path, 0o700)
            self._script = path
        return self._script

    def ask(self) -> str:
        """Submit one allocation (on Flux: a batch job); its job id."""
        if self.outer.scheduler_name == "flux":
            job_id = self.outer.submit_job(self.script(), self.resources, nested=True)
        else:
            job_id = self.outer.submit_job(self.script(), self.resources)
        log.info("pack: allocation %s asked for", job_id)
        return job_id

    def instance(self, job_id: str, **kwargs: Any) -> Instance:
        """The Flux instance of allocation ``job_id``, reached, for plain jobs."""
        settings = dataclasses.replace(self.outer.settings, flux_nested=False)
        if self.outer.scheduler_name == "flux":
            # a batch job's instance, found through its parent (the outer instance)
            kwargs.setdefault("parent_uri", self.outer.instance_label)
            target = job_id
        else:
            target = f"slurm:{job_id}"
        flux_adapter = scheduler_entry("flux").adapter_class()
        adapter: Instance = flux_adapter(
            self.outer.executor,
            uri=target,
            flux_command=self.flux_command,
            settings=settings,
            **kwargs,
        )
        adapter.open()
        return adapter

    def release(self, job_ids: Sequence[str], done: bool = False) -> None:
        """Cancel these allocations (their instances and anything left in them); ``done``:
        their work was all done, so each is recorded COMPLETED, released - its
        scheduler would say CANCELLED, the end of a job it was told to stop."""
        if not job_ids:
            return
        self.outer.cancel_jobs(list(job_ids))
        log.info("pack: allocation(s) released: %s", " ".join(job_ids))
        if done:
            now = datetime.now(timezone.utc)
            reason = "released by its pack once its work was done"
            ends = [
                JobStatus(
                    job_id, JobState.COMPLETED, end_time=now, native_state=RELEASED, reason=reason
                )
                for job_id in job_ids
            ]
            self.outer.tracker.observe({status.job_id: Observation(status) for status in ends})


def ended_early(job_id: str, status: JobStatus) -> str:
    reason = f" ({status.reason})" if status.reason else ""
    return (
        f"pack: allocation {job_id} ended {status.state.value}{reason} before its Flux "
        "instance took a task; see its output (`hpcbridge logs "
        f"{job_id}`) - is flux on PATH on the compute nodes (HPCBRIDGE_FLUX_COMMAND)?"
    )
