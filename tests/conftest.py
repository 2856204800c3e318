"""Shared fixtures.  Integration tests skip, with the reason, when their component is absent."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from hpcbridge import Settings

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    """A private state folder (job store, mock jobs) for this test, also for subprocesses."""
    folder = tmp_path / "state"
    folder.mkdir()
    monkeypatch.setenv("HPCBRIDGE_STATE_DIR", str(folder))
    for name in list(os.environ):
        if name.startswith(("HPCBRIDGE_", "EXAMLOPS_")) and name != "HPCBRIDGE_STATE_DIR":
            monkeypatch.delenv(name)
    return folder


@pytest.fixture
def make_script(tmp_path):
    """Write a shell script into the test's folder and return its path."""

    def make(body: str, name: str = "job.sh") -> str:
        path = tmp_path / name
        path.write_text("#!/bin/sh\n" + textwrap.dedent(body).lstrip())
        path.chmod(0o755)
        return str(path)

    return make


@pytest.fixture
def mock_adapter(state_dir):
    from hpcbridge import MockAdapter

    settings = Settings.from_env({}, state_dir=str(state_dir))
    adapter = MockAdapter(settings=settings, unknown_limit=3)
    yield adapter
    adapter.close()
