"""Flux pieces shared by the Flux scenarios: find flux-core and its bindings,
start a throw-away broker, cancel everything in it."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Tuple

from ..common import Skip


def find_flux() -> Tuple[str, Any]:
    """(the flux command, the imported ``flux`` bindings) or ``Skip``."""
    try:
        from hpcbridge.schedulers.flux.bindings import import_bindings
        from tests.support.flux import find_flux_commands
    except Exception as exc:  # noqa: BLE001 - the Flux package may be in progress
        raise Skip(
            f"hpcbridge's Flux support does not import: {type(exc).__name__}: {exc}"
        ) from exc
    commands = find_flux_commands()
    if not commands:
        raise Skip("flux-core not found (PATH, HPCBRIDGE_TEST_FLUX_PREFIXES, /opt/flux-*)")
    try:
        module = import_bindings(commands[0])
    except Exception as exc:  # noqa: BLE001
        raise Skip(f"Flux's Python bindings do not import: {exc}") from exc
    return commands[0], module


@contextmanager
def flux_instance(flux_command: str, workdir: str) -> Iterator[Any]:
    from tests.support.flux import FluxInstance

    with FluxInstance(flux_command, workdir=workdir) as instance:
        yield instance


@contextmanager
def flux_uri_env(uri: str) -> Iterator[None]:
    """FLUX_URI for libraries that open ``flux.Flux()`` with no argument (PSI/J)."""
    old: Optional[str] = os.environ.get("FLUX_URI")
    os.environ["FLUX_URI"] = uri
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("FLUX_URI", None)
        else:
            os.environ["FLUX_URI"] = old


def reset(instance: Any, timeout: float = 120.0) -> None:
    """Cancel every job of the instance and wait until none is active."""
    instance.run(["cancel", "--all", "--quiet"])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        active = instance.run(["jobs", "--no-header", "-o", "{id}"]).stdout.split()
        if not active:
            return
        time.sleep(0.2)


def psij_flux_executor() -> Any:
    """PSI/J's Flux executor.  ``JobExecutor.get_instance("flux")`` fails when
    psij was imported before the Flux bindings were on ``sys.path`` (its plugin
    scan remembers the failed import): then build the class directly."""
    import psij

    try:
        return psij.JobExecutor.get_instance("flux")
    except Exception:  # noqa: BLE001
        from psij.executors.flux import FluxJobExecutor

        return FluxJobExecutor()


def psij_flux_job(executable: str, arguments: Optional[list] = None, directory: Any = None) -> Any:
    """A PSI/J job for the Flux executor.  With flux-core 0.88's bindings the
    executor needs an explicit ``ResourceSpecV1(process_count=1)``: without it
    ``JobspecV1.from_command`` gets no task count and raises."""
    import psij

    return psij.Job(
        psij.JobSpec(
            executable=executable,
            arguments=arguments or [],
            directory=directory,
            resources=psij.ResourceSpecV1(process_count=1, cpu_cores_per_process=1),
        )
    )
