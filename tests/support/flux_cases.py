"""Helpers for the Flux integration tests (brokers, adapters); no tests here.

Flux is found under ``HPCBRIDGE_TEST_FLUX_PREFIXES`` (colon-separated install
prefixes; when set, exactly those), else on PATH and as ``/opt/flux-*/bin/flux``
(newest release first); without it every Flux test skips with the reason.
Each test module starts its own brokers with
``tests.support.flux.FluxInstance`` and stops them at the end.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any, Callable, Iterable, List, Optional, Tuple

import pytest

from hpcbridge import Settings
from hpcbridge.model import JobState
from hpcbridge.schedulers.flux.adapter import FluxAdapter
from hpcbridge.schedulers.flux.bindings import (
    BindingsUnavailable,
    bindings_version,
    import_bindings,
)
from hpcbridge.schedulers.flux.ids import canonical_job_id
from tests.support.flux import (
    FluxInstance,
    config_accepts_noverify,
    find_flux_commands,
    flux_absent_reason,
    flux_version,
)

FLUX_COMMANDS = find_flux_commands()
FLUX: Optional[str] = FLUX_COMMANDS[0] if FLUX_COMMANDS else None
NOT_FOUND = flux_absent_reason()

NAMED_QUEUES = textwrap.dedent(
    """
    [queues.debug]
    [queues.batch]
    [policy.jobspec.defaults.system]
    queue = "batch"
    """
)


def require_flux() -> str:
    if FLUX is None:
        pytest.skip(NOT_FOUND)
    return FLUX


def flux_params() -> List[Any]:
    """One parameter per flux-core found (e.g. 0.49 and 0.88 side by side)."""
    if not FLUX_COMMANDS:
        return [pytest.param(None, id="no-flux")]
    return [pytest.param(flux, id=f"flux-{flux_version(flux)}") for flux in FLUX_COMMANDS]


def native_bindings_or_skip(flux: Optional[str] = None) -> Any:
    flux = flux or require_flux()
    try:
        module = import_bindings(flux)
    except BindingsUnavailable as exc:
        pytest.skip(f"flux bindings not importable here: {exc}")
    # One process holds one release's bindings; clients of another release
    # break ("Protocol error", hangs), so other releases go through the CLI only.
    loaded, wanted = bindings_version(module), flux_version(flux)
    if loaded and wanted != "?" and loaded != wanted:
        pytest.skip(f"bindings {loaded} loaded in this process, broker {wanted}: native not tried")
    return module


def driver_or_skip(driver: str, flux: Optional[str] = None) -> str:
    """``driver`` ("native" or "cli"), the test skipped when native bindings are not here."""
    if driver == "native":
        native_bindings_or_skip(flux)
    return driver


def many_cores_config(flux: str, workdir: Path, cores: int = 16, gpus: int = 0) -> str:
    """Resource config with more (virtual) cores than the machine has, and ``gpus``
    GPUs it does not have at all.

    Batch jobs mostly sleep; 16 slots let a test's jobs run side by side on
    a 2-core machine instead of queueing one core each.  That needs
    ``noverify`` (the cores are checked against the machine otherwise), which
    0.26 does not read from the configuration: there, the machine's cores, no GPUs.
    """
    noverify = config_accepts_noverify(flux)
    if not noverify:
        cores, gpus = os.cpu_count() or 1, 0
    devices = [f"--gpus=0-{gpus - 1}"] if gpus else []
    result = subprocess.run(
        [
            flux,
            "R",
            "encode",
            "--ranks=0",
            f"--cores=0-{cores - 1}",
            *devices,
            f"--hosts={os.uname().nodename}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    path = workdir / "R.json"
    path.write_text(result.stdout)
    path.chmod(0o644)
    return f'[resource]\npath = "{path}"\n' + ("noverify = true\n" if noverify else "")


def start_instance(
    workdir: Path,
    named: bool = False,
    user: Optional[str] = None,
    cores: int = 16,
    flux: Optional[str] = None,
    gpus: int = 0,
) -> FluxInstance:
    flux = flux or require_flux()
    workdir.mkdir(parents=True, exist_ok=True)
    config = many_cores_config(flux, workdir, cores, gpus)
    if named:
        config += NAMED_QUEUES
    instance = FluxInstance(flux, config=config, workdir=str(workdir), user=user)
    return instance.start()


def make_adapter(
    driver: str,
    uri: Optional[str],
    state: Path,
    executor: Any = None,
    nested: Optional[bool] = None,
    **kwargs: Any,
) -> FluxAdapter:
    """``nested``: batch (True) or plain (False) jobs; ``None``: the instance's default.

    Status rounds every half second: the cases watch jobs change state on a broker
    of their own (politeness is ``test_polite_polling``'s business).
    """
    settings = Settings.from_env(
        env={},
        state_dir=str(state),
        flux_nested=nested,
        poll_interval=0.5,
        min_poll_interval=0.0,  # the broker is the test's own: no floor under its rounds
    )
    kwargs.setdefault("unknown_limit", 3)
    kwargs.setdefault("flux_command", require_flux())
    return FluxAdapter(executor=executor, uri=uri, settings=settings, driver=driver, **kwargs)


def instance_spans(
    instance: FluxInstance, start: str = "t_submit", ids: Optional[Iterable[str]] = None
) -> List[Tuple[float, float]]:
    """(``start``, t_inactive) of every job the instance has seen (``ids``: of those jobs
    only), newest first, by its own clock.  ``t_depend`` starts a job's span after a
    jobtap plugin accepted it: its ``t_submit`` is the ingest's, earlier, while the jobs
    before it still ran."""
    out = instance.check(
        ["jobs", "-a", "-n", "-c", "100000", "-o", f"{{id}} {{{start}}} {{t_inactive}}"]
    )
    rows = [line.split() for line in out.splitlines() if line]
    wanted = None if ids is None else {canonical_job_id(job_id) for job_id in ids}
    return [
        (float(begin), float(end))
        for job_id, begin, end in rows
        if wanted is None or canonical_job_id(job_id) in wanted
    ]


def active_jobs(instance: Any, settle: float = 60.0) -> str:
    """The instance's active jobs once a released batch job had ``settle`` seconds to shut
    its instance down (CLEANUP)."""
    deadline = time.monotonic() + settle
    while True:
        listed = instance.run(["jobs", "--no-header", "-o", "{id} {name} {state}"])
        assert listed.returncode == 0, listed.stderr
        if not listed.stdout.strip() or time.monotonic() > deadline:
            return str(listed.stdout.strip())
        time.sleep(0.5)


def write_script(folder: Path, name: str, body: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body).lstrip())
    path.chmod(0o755)
    return str(path)


def wait_for(
    check: Callable[[], bool], timeout: float = 60.0, interval: float = 0.2, what: str = ""
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what or check}")


def wait_state(
    adapter: FluxAdapter, job_id: str, states: List[JobState], timeout: float = 60.0
) -> None:
    seen: List[JobState] = []

    def reached() -> bool:
        seen.append(adapter.get_job_status(job_id).state)
        return seen[-1] in states

    try:
        wait_for(reached, timeout, what=f"{job_id} in {[s.value for s in states]}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen {seen[-1].value if seen else 'nothing'}") from None


def describe_flux() -> str:
    return f"{FLUX} ({flux_version(FLUX)})" if FLUX else NOT_FOUND


def adapter_on(instance: Any, driver: str, tmp_path: Path, **kwargs: Any) -> FluxAdapter:
    """``driver``'s adapter on a test instance (anything with ``uri`` and ``flux``), its
    state in ``tmp_path/state`` and its jobs' folders under ``tmp_path/jobs``."""
    return make_adapter(
        driver_or_skip(driver, instance.flux),
        instance.uri,
        tmp_path / "state",
        remote_workdir=str(tmp_path / "jobs"),
        flux_command=instance.flux,
        **kwargs,
    )
