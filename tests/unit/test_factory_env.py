"""``get_scheduler_adapter(env=...)`` reads its settings from ``env`` alone."""

import pytest

from hpcbridge import MockAdapter, get_scheduler_adapter


@pytest.fixture
def misleading_process_env(monkeypatch, tmp_path):
    """This process's environment points everywhere but where the tests expect."""
    monkeypatch.setenv("HPCBRIDGE_SCHEDULER", "slurm")
    monkeypatch.setenv("HPCBRIDGE_STATE_DIR", "/nonexistent-x")
    monkeypatch.setenv("HPCBRIDGE_DB", "/nonexistent-x/jobs.db")
    monkeypatch.setenv("FLUX_URI", "local:///bogus")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "process-xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "process-home"))


def test_given_env_picks_the_mock_and_its_state_dir(misleading_process_env, tmp_path):
    state = tmp_path / "given-state"
    adapter = get_scheduler_adapter(env={"HPCBRIDGE_STATE_DIR": str(state)})
    try:
        assert isinstance(adapter, MockAdapter)
        assert adapter.settings.state_path == state
        assert adapter.store.path == state / "jobs.db"
        assert adapter.remote_workdir.startswith(str(state))
        assert adapter.settings.enclosing_flux_uri is None
    finally:
        adapter.close()
    assert not (tmp_path / "process-xdg").exists()


def test_given_env_without_state_dir_uses_its_own_home(misleading_process_env, tmp_path):
    home = tmp_path / "given-home"
    adapter = get_scheduler_adapter(env={"HOME": str(home)})
    try:
        assert adapter.settings.state_path == home / ".local" / "state" / "hpcbridge"
    finally:
        adapter.close()


def test_flux_adapter_does_not_see_this_process_flux_uri(misleading_process_env, tmp_path):
    env = {
        "HPCBRIDGE_STATE_DIR": str(tmp_path / "given-state"),
        "HPCBRIDGE_SCHEDULER": "flux",
        "HPCBRIDGE_FLUX_DRIVER": "cli",  # no bindings probed, no broker touched
    }
    adapter = get_scheduler_adapter(env=env)
    try:
        assert adapter.scheduler_name == "flux"
        assert adapter.settings.enclosing_flux_uri is None
        assert adapter.settings.flux_uri is None
    finally:
        adapter.close()
