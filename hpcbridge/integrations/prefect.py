"""Prefect tasks ``submit_task`` and ``wait_task`` (the source system's names:
``slurm_submit_task``, ``slurm_wait_task``) over :mod:`hpcbridge.integrations.pipeline`;
the scheduler and transport come from the settings.

Their async forms, ``submit_task_async`` and ``wait_task_async``, are for async flows
(Prefect 3): awaited, they never block the flow's event loop, so one flow can await
hundreds of jobs at once (``asyncio.gather``); given the same ``adapter=``, one thread
follows them all, asking the scheduler as one waiter would.  The sync tasks stay as
they were."""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from prefect import get_run_logger, task

from ..engine.adapter import SchedulerAdapter
from ..model import JobState, JobStatus
from .pipeline import (
    ArtifactNotFoundError,
    JobFailedError,
    SettingsLike,
    submit,
    submit_async,
    wait_and_fetch,
    wait_and_fetch_async,
)

try:  # Prefect >= 3: a submission has side effects, so never serve one from a cache
    from prefect.cache_policies import NO_CACHE

    _TASK_OPTIONS: Dict[str, Any] = {"cache_policy": NO_CACHE}
except ImportError:  # pragma: no cover - Prefect 2 does not cache unless asked
    _TASK_OPTIONS = {}


@task(name="hpcbridge-submit", retries=0, **_TASK_OPTIONS)
def submit_task(
    script: Union[None, str, os.PathLike] = None,
    command: Union[None, str, Sequence[str]] = None,
    resources: Optional[Mapping[str, Any]] = None,
    remote_dir: Optional[str] = None,
    artifact: str = "model.pkl",
    arguments: Sequence[Any] = (),
    environment: Optional[Mapping[str, str]] = None,
    depends_on: Union[None, str, int, Sequence[Any]] = None,
    adapter: Optional[SchedulerAdapter] = None,
    settings: SettingsLike = None,
) -> Tuple[str, str]:
    """Submit ``script`` (or ``command``); return ``(job_id, <remote_dir>/<artifact>)``.
    Never retried: an uncertain submission must not be repeated blindly."""
    logger = get_run_logger()
    job_id, remote_artifact = submit(
        script=script,
        command=command,
        resources=resources,
        remote_dir=remote_dir,
        artifact=artifact,
        arguments=arguments,
        environment=environment,
        depends_on=depends_on,
        adapter=adapter,
        settings=settings,
    )
    logger.info("submitted job %s; its artifact will be %s", job_id, remote_artifact)
    return job_id, remote_artifact


@task(name="hpcbridge-wait", retries=0, **_TASK_OPTIONS)
def wait_task(
    job_id: Any,
    artifact_path: str,
    local_dir: Union[None, str, os.PathLike] = None,
    poll_interval: float = 10.0,
    timeout: Optional[float] = None,
    adapter: Optional[SchedulerAdapter] = None,
    settings: SettingsLike = None,
) -> Tuple[JobState, str]:
    """Wait for the job and fetch its artifact; return ``(state, local artifact path)``."""
    logger = get_run_logger()

    def report(status: JobStatus) -> None:
        logger.info("job %s is %s", status.job_id, status.state.value)

    state, local_path = wait_and_fetch(
        job_id,
        artifact_path,
        local_dir=local_dir,
        poll_interval=poll_interval,
        timeout=timeout,
        adapter=adapter,
        settings=settings,
        on_change=report,
    )
    logger.info("job %s %s; fetched %s", job_id, state.value, local_path)
    return state, local_path


@task(name="hpcbridge-submit-async", retries=0, **_TASK_OPTIONS)
async def submit_task_async(
    script: Union[None, str, os.PathLike] = None,
    command: Union[None, str, Sequence[str]] = None,
    resources: Optional[Mapping[str, Any]] = None,
    remote_dir: Optional[str] = None,
    artifact: str = "model.pkl",
    arguments: Sequence[Any] = (),
    environment: Optional[Mapping[str, str]] = None,
    depends_on: Union[None, str, int, Sequence[Any]] = None,
    adapter: Optional[SchedulerAdapter] = None,
    settings: SettingsLike = None,
) -> Tuple[str, str]:
    """``submit_task`` awaited: the submission runs off the flow's event loop."""
    job_id, remote_artifact = await submit_async(
        script=script,
        command=command,
        resources=resources,
        remote_dir=remote_dir,
        artifact=artifact,
        arguments=arguments,
        environment=environment,
        depends_on=depends_on,
        adapter=adapter,
        settings=settings,
    )
    get_run_logger().info("submitted job %s; its artifact will be %s", job_id, remote_artifact)
    return job_id, remote_artifact


@task(name="hpcbridge-wait-async", retries=0, **_TASK_OPTIONS)
async def wait_task_async(
    job_id: Any,
    artifact_path: str,
    local_dir: Union[None, str, os.PathLike] = None,
    timeout: Optional[float] = None,
    adapter: Optional[SchedulerAdapter] = None,
    settings: SettingsLike = None,
) -> Tuple[JobState, str]:
    """``wait_task`` awaited: the adapter's follower waits at the adapter's poll interval
    (one thread for every job of that adapter: pass the same ``adapter=`` to each)."""
    logger = get_run_logger()

    def report(status: JobStatus) -> None:
        logger.info("job %s is %s", status.job_id, status.state.value)

    state, local_path = await wait_and_fetch_async(
        job_id,
        artifact_path,
        local_dir=local_dir,
        timeout=timeout,
        adapter=adapter,
        settings=settings,
        on_change=report,
    )
    logger.info("job %s %s; fetched %s", job_id, state.value, local_path)
    return state, local_path


#: The source system's names for the same tasks.
slurm_submit_task = submit_task
slurm_wait_task = wait_task

__all__ = [
    "ArtifactNotFoundError",
    "JobFailedError",
    "slurm_submit_task",
    "slurm_wait_task",
    "submit_task",
    "submit_task_async",
    "wait_task",
    "wait_task_async",
]
