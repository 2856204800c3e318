"""The batch jobspec builder and the bulk helper, with a stand-in JobspecV1 and
(when importable) the real flux bindings."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List

import pytest

from hpcbridge.schedulers.flux import jobspec
from hpcbridge.schedulers.flux.bindings import BindingsUnavailable, import_bindings
from hpcbridge.schedulers.flux.bulk_helper import constraint_parser
from hpcbridge.schedulers.flux.cli_driver import _helper_source
from tests.support.flux import find_flux_commands


class FakeJobspec:
    """Records what the builder does; mimics JobspecV1's setters."""

    calls: List[Any] = []

    def __init__(self, script: str, jobname: str, **kwargs: Any) -> None:
        self.script = script
        self.jobname = jobname
        self.kwargs = kwargs
        self.attributes: Dict[str, Any] = {}
        self.duration = 0.0
        self.cwd = None
        self.environment: Dict[str, str] = {}
        self.stdout = None
        self.stderr = None

    @classmethod
    def from_batch_command(cls, script: str, jobname: str, **kwargs: Any) -> FakeJobspec:
        if "duration" in kwargs:
            raise TypeError("from_batch_command() got an unexpected keyword argument 'duration'")
        return cls(script, jobname, **kwargs)

    def setattr(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def dumps(self) -> str:
        return json.dumps({"script": self.script, "attributes": self.attributes})


def params(**changes: Any) -> Dict[str, Any]:
    base = {
        "script": jobspec.batch_script("/j/.hpcbridge/w.sh"),
        "jobname": "train",
        "num_slots": 2,
        "cores_per_slot": 4,
        "gpus_per_slot": 0,
        "num_nodes": None,
        "duration": 90.0,
        "cwd": "/j",
        "output": "/j/flux-{{id}}.out",
        "queue": "debug",
        "bank": "guests",
        "requires": None,
        "dependencies": ["7381975040"],
        "environment": {"HPCBRIDGE_TASK_INDEX": "3"},
    }
    base.update(changes)
    return base


def test_batch_script_execs_the_wrapper() -> None:
    assert jobspec.batch_script("/a b/w.sh") == "#!/bin/sh\nexec '/a b/w.sh'\n"


def test_builder_sets_everything_and_never_passes_duration() -> None:
    spec = jobspec.build_jobspec(FakeJobspec, params(), {"PATH": "/bin"})
    assert spec.kwargs == {
        "num_slots": 2,
        "cores_per_slot": 4,
        "gpus_per_slot": None,
        "num_nodes": None,
    }
    assert spec.duration == 90.0 and spec.cwd == "/j"
    assert spec.environment == {"PATH": "/bin", "HPCBRIDGE_TASK_INDEX": "3"}
    assert spec.stdout == spec.stderr == "/j/flux-{{id}}.out"
    assert spec.attributes["system.queue"] == "debug"
    assert spec.attributes["system.bank"] == "guests"
    assert spec.attributes["system.dependencies"] == [{"scheme": "afterok", "value": "7381975040"}]


def test_unlimited_and_no_queue() -> None:
    spec = jobspec.build_jobspec(FakeJobspec, params(duration=0, queue=None, bank=None), {})
    assert spec.duration == 0.0
    assert "system.queue" not in spec.attributes and "system.bank" not in spec.attributes


def test_simple_constraint_without_flux_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    # No flux parser importable, even where an earlier test already imported it.
    for name in [name for name in sys.modules if name == "flux" or name.startswith("flux.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "flux", None)
    assert jobspec.parse_constraint("amd,fast") == {"properties": ["amd", "fast"]}
    with pytest.raises(ValueError):
        jobspec.parse_constraint("host:node[1-3] or rank:0")


FAKE_FLUX = textwrap.dedent(
    """
    import json

    class Flux:
        pass

    """
)
FAKE_FLUX_JOB = textwrap.dedent(
    """
    import json

    class JobspecV1:
        @classmethod
        def from_batch_command(cls, script, jobname, **kw):
            spec = cls()
            spec.attrs = {}
            return spec
        def setattr(self, key, value):
            self.attrs[key] = value
        def dumps(self):
            return json.dumps({"attrs": self.attrs, "env": self.environment})

    class _Future:
        def __init__(self, number, fail):
            self.number, self.fail = number, fail
        def get_id(self):
            if self.fail:
                raise OSError(22, "Invalid queue 'nosuch' specified")
            return self.number

    _count = [100]

    def submit_async(handle, text):
        _count[0] += 1
        return _Future(_count[0], "nosuch" in text)
    """
)


def test_bulk_helper_protocol(tmp_path: Path) -> None:
    """The helper (run remotely as `flux python -c <jobspec.py + bulk_helper.py>`) answers one
    line per job."""
    package = tmp_path / "flux"
    package.mkdir()
    (package / "__init__.py").write_text(FAKE_FLUX)
    (package / "job.py").write_text(FAKE_FLUX_JOB)
    source = _helper_source()
    # One jobspec, three jobs that differ in their variables; the second is refused.
    request = {"job": params(), "environments": [{"Q": "a"}, {"Q": "nosuch"}, {"Q": "c"}]}
    result = subprocess.run(
        [sys.executable, "-c", source],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert result.stdout.splitlines() == [
        "OK 101",
        "ERR Invalid queue 'nosuch' specified",
        "OK 103",
    ]


def _real_bindings() -> Any:
    commands = find_flux_commands()
    try:
        return import_bindings(commands[0] if commands else None)
    except BindingsUnavailable as exc:
        pytest.skip(f"flux bindings not importable: {exc}")


def test_with_real_jobspecv1() -> None:
    flux = _real_bindings()
    spec = jobspec.build_jobspec(
        flux.job.JobspecV1, params(gpus_per_slot=1, num_nodes=1), {"A": "1"}
    )
    data = json.loads(spec.dumps())
    system = data["attributes"]["system"]
    assert system["duration"] == 90.0
    assert system["queue"] == "debug" and system["bank"] == "guests"
    assert system["dependencies"] == [{"scheme": "afterok", "value": "7381975040"}]
    assert system["environment"]["HPCBRIDGE_TASK_INDEX"] == "3"
    assert system["shell"]["options"]["output"]["stdout"]["path"] == "/j/flux-{{id}}.out"
    assert data["tasks"][0]["command"][:2] == ["flux", "broker"]
    assert system["files"]["script"]["data"] == "#!/bin/sh\nexec /j/.hpcbridge/w.sh\n"


def test_real_constraint_parser() -> None:
    _real_bindings()
    parser = constraint_parser()
    assert parser is not None
    assert jobspec.parse_constraint("amd", parser) == {"properties": ["amd"]}
