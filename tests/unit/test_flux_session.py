"""The Flux session and drivers with a scripted `flux`: the URI from the settings
(never this process's environment), one session for all threads, the driver
contract (every id answered, cancel raising only on real failures), dry runs
without Flux, and bindings loaded without a lasting sys.path entry."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any, List

import pytest

from hpcbridge import Settings
from hpcbridge.errors import SchedulerAdapterError
from hpcbridge.model import JobState
from hpcbridge.schedulers.flux.adapter import FluxAdapter
from hpcbridge.schedulers.flux.bindings import import_bindings
from hpcbridge.transports.base import CommandResult
from tests.support.fake_flux import FakeFlux, FakeSSH


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/sh\necho hi\n")
    path.chmod(0o755)
    return str(path)


def adapter_with(executor: Any, tmp_path: Path, env: Any, **kwargs: Any) -> FluxAdapter:
    settings = Settings.from_env(env=env, state_dir=str(tmp_path / "state"))
    kwargs.setdefault("driver", "cli")
    return FluxAdapter(
        executor=executor, remote_workdir=str(tmp_path / "jobs"), settings=settings, **kwargs
    )


def test_enclosing_uri_comes_from_the_settings_not_this_process(
    tmp_path: Path, script: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLUX_URI", "local:///this-process")
    executor = FakeFlux()
    adapter_with(executor, tmp_path, env={}).submit_job(script)
    assert all(env is None for env in executor.envs)

    executor = FakeFlux()
    adapter = adapter_with(executor, tmp_path, env={"FLUX_URI": "local:///enclosing"})
    adapter.submit_job(script)
    assert adapter.open().instance == "local:///enclosing"
    assert adapter.uri_setting.source == "FLUX_URI environment"
    assert all(env == {"FLUX_URI": "local:///enclosing"} for env in executor.envs)


def test_enclosing_uri_is_not_used_over_ssh(tmp_path: Path) -> None:
    adapter = adapter_with(FakeSSH(), tmp_path, env={"FLUX_URI": "local:///enclosing"})
    assert adapter.open().instance is None and adapter.uri_setting.source == "system instance"


def test_one_session_for_every_thread(tmp_path: Path) -> None:
    executor = FakeFlux()
    adapter = adapter_with(executor, tmp_path, env={})
    seen: List[Any] = []
    threads = [threading.Thread(target=lambda: seen.append(adapter.open())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(session) for session in seen}) == 1
    assert [call[1] for call in executor.calls].count("version") == 1
    assert adapter.open().choice.name == "cli"


def test_every_id_is_answered_when_flux_is_missing(tmp_path: Path) -> None:
    executor = FakeFlux()
    executor.handlers["version"] = lambda argv, _: CommandResult(argv, 127, "", "flux: not found")
    adapter = adapter_with(executor, tmp_path, env={})
    statuses = adapter.get_job_statuses(["ƒCFKYzj", "ƒ2TNt8FH"])
    assert {status.state for status in statuses.values()} == {JobState.UNKNOWN}
    assert all("not found" in status.reason for status in statuses.values())


def test_dry_run_without_flux_assumes_the_newest_adapter(tmp_path: Path, script: str) -> None:
    executor = FakeFlux()
    executor.handlers["version"] = lambda argv, _: CommandResult(argv, 127, "", "flux: not found")
    text = adapter_with(executor, tmp_path, env={}).describe_submission(script, {"time": "1h"})
    line, note = text.splitlines()
    assert line.startswith("flux batch -n1 -t3600s") and note.startswith("# not checked")


def test_cancel_of_an_ended_job_is_fine_a_real_failure_raises(tmp_path: Path) -> None:
    executor = FakeFlux()
    adapter = adapter_with(executor, tmp_path, env={})
    executor.handlers["cancel"] = lambda argv, _: CommandResult(
        argv, 1, "", "flux-cancel: ERROR: ƒCFKYzj: job is inactive"
    )
    adapter.cancel_job("ƒCFKYzj")
    executor.handlers["cancel"] = lambda argv, _: CommandResult(
        argv, 1, "", "flux-cancel: ERROR: Unable to connect to Flux: Connection refused"
    )
    with pytest.raises(SchedulerAdapterError, match="Unable to connect"):
        adapter.cancel_job("ƒCFKYzj")


def test_capabilities_say_what_flux_drops(tmp_path: Path) -> None:
    capabilities = adapter_with(FakeFlux(), tmp_path, env={}).open().driver.capabilities
    assert not capabilities.events and not capabilities.arrays
    assert set(capabilities.dropped_keys) == {"mem", "mem_per_cpu", "partition", "requeue"}


def test_bindings_beside_the_command_leave_sys_path_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = tmp_path / "flux-x"
    (prefix / "bin").mkdir(parents=True)
    command = prefix / "bin" / "flux"
    command.write_text("#!/bin/sh\n")
    command.chmod(0o755)
    site = prefix / "lib" / "flux" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    (site / "flux").mkdir(parents=True)
    (site / "flux" / "__init__.py").write_text("__version__ = 'fake'\n")
    (site / "flux" / "job.py").write_text("")
    (site / "flux" / "later.py").write_text("import _flux.inner\nVALUE = _flux.inner.VALUE\n")
    (site / "_flux").mkdir()
    (site / "_flux" / "__init__.py").write_text("")
    (site / "_flux" / "inner.py").write_text("VALUE = 42\n")
    for name in _bindings_modules():
        monkeypatch.delitem(sys.modules, name)  # restored afterwards
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "flux" not in p])
    before = list(sys.path)
    try:
        module = import_bindings(str(command))
        assert module.__version__ == "fake" and sys.path == before
        from flux import later  # the bindings' own later imports still work

        assert later.VALUE == 42 and sys.path == before
    finally:
        for name in _bindings_modules():
            del sys.modules[name]  # the stand-in must not outlive the test


def _bindings_modules() -> List[str]:
    return [name for name in sys.modules if name.split(".")[0] in ("flux", "_flux")]


def test_describe_names_the_driver_and_the_instance(tmp_path: Path) -> None:
    adapter = adapter_with(FakeFlux(), tmp_path, env={}, uri="local:///tmp/f/local-0")
    assert adapter.describe() == "flux via local (cli driver, local:///tmp/f/local-0)"
    missing = FakeFlux()
    missing.handlers["version"] = lambda argv, _: CommandResult(argv, 127, "", "flux: not found")
    adapter = adapter_with(missing, tmp_path, env={})
    assert adapter.describe() == "flux via local (cli driver, system instance)"
