"""What a sweep (``sweeping``, ``feeding``) uses of an adapter: a protocol, so the
sweep's modules need not import the adapter's (``SchedulerAdapter`` declares each
member and is what is handed in)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Protocol, Union

from ..config import Settings
from ..model import JobStatus
from ..resources import Resources
from ..store.jobs import JobStore
from ..transports.base import Executor
from .driver import Session
from .jobscript import TaskSpec
from .submitting import DependsOn, Order, Stager, Submission
from .waiting import Following


class SubmissionService(Protocol):
    """An adapter as a sweep sees it: where it records and stages, how it orders,
    submits, waits and cancels (see ``SchedulerAdapter`` for each)."""

    settings: Settings
    store: JobStore
    executor: Executor
    stager: Stager

    @property
    def scheduler_name(self) -> str: ...

    @property
    def host_label(self) -> str: ...

    @property
    def instance_label(self) -> Optional[str]: ...

    @property
    def default_poll_interval(self) -> float: ...

    @property
    def poll_floor(self) -> float: ...

    def open(self) -> Session: ...

    def following(self) -> Following: ...

    def order(
        self,
        tasks: Callable[[], List[TaskSpec]],
        resources: Union[None, Mapping[str, Any], Resources],
        depends_on: DependsOn,
        remote_dir: Optional[str],
        options: Mapping[str, Any],
    ) -> Order: ...

    def submission(self) -> Submission: ...

    def wait_all(
        self,
        job_ids: Iterable[Any],
        poll_interval: Optional[float] = None,
        timeout: Optional[float] = None,
    ) -> Dict[str, JobStatus]: ...

    def cancel_jobs(self, job_ids: Iterable[Any]) -> None: ...
