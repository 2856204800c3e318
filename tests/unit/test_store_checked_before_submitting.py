"""A job store that cannot be written stops a submission before anything is staged or
submitted: a job that went in unrecorded could be neither followed nor cancelled."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcbridge import MockAdapter, Settings
from hpcbridge.errors import ConfigurationError
from hpcbridge.store.jobs import JobStore


def test_an_unwritable_store_refuses_before_staging(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the state folder should be\n")
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\necho never\n")
    script.chmod(0o755)
    settings = Settings.from_env({}, state_dir=str(tmp_path / "state"))
    adapter = MockAdapter(
        settings=settings,
        store=JobStore(blocker / "jobs.db"),
        remote_workdir=str(tmp_path / "jobs"),
    )
    with pytest.raises(ConfigurationError, match="HPCBRIDGE_STATE_DIR") as caught:
        adapter.submit_job(str(script), {"time": "1"})
    assert "nothing was submitted" in str(caught.value)
    assert not (tmp_path / "jobs").exists()
    adapter.close()
