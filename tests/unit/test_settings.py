import pytest

from hpcbridge import ConfigurationError, Settings


def settings(**env):
    return Settings.from_env(env)


def test_default_is_mock_local():
    current = settings()
    assert (current.scheduler, current.transport) == ("mock", "local")


def test_legacy_slurm_mode():
    assert settings(EXAMLOPS_SLURM_MODE="slurm").scheduler == "slurm"


def test_examlops_hpc_scheduler_wins_over_slurm_mode():
    assert settings(EXAMLOPS_SLURM_MODE="slurm", EXAMLOPS_HPC_SCHEDULER="flux").scheduler == "flux"


def test_hpcbridge_wins_over_both():
    current = settings(
        EXAMLOPS_SLURM_MODE="slurm", EXAMLOPS_HPC_SCHEDULER="flux", HPCBRIDGE_SCHEDULER="mock"
    )
    assert current.scheduler == "mock"
    assert current.sources["scheduler"] == "HPCBRIDGE_SCHEDULER"


@pytest.mark.parametrize(
    "name", ["SSH_HOST", "SSH_USER", "REMOTE_WORKDIR", "REMOTE_REPO", "FLUX_URI"]
)
def test_three_families(name):
    attribute = {
        "REMOTE_WORKDIR": "remote_workdir",
        "REMOTE_REPO": "remote_repo",
        "FLUX_URI": "flux_uri",
    }.get(name, name.lower())
    assert getattr(settings(**{f"EXAMLOPS_SLURM_{name}": "c"}), attribute) == "c"
    assert (
        getattr(settings(**{f"EXAMLOPS_SLURM_{name}": "c", f"EXAMLOPS_HPC_{name}": "b"}), attribute)
        == "b"
    )
    assert (
        getattr(
            settings(
                **{
                    f"EXAMLOPS_SLURM_{name}": "c",
                    f"EXAMLOPS_HPC_{name}": "b",
                    f"HPCBRIDGE_{name}": "a",
                }
            ),
            attribute,
        )
        == "a"
    )


def test_resource_defaults_from_all_families():
    current = settings(
        EXAMLOPS_SLURM_PARTITION="old",
        EXAMLOPS_HPC_GPUS="0",
        HPCBRIDGE_TIME="1:00:00",
        EXAMLOPS_HPC_PARTITION="newer",
    )
    assert current.resource_defaults == {"partition": "newer", "gpus": "0", "time": "1:00:00"}


def test_ssh_settings():
    current = settings(
        HPCBRIDGE_TRANSPORT="ssh",
        EXAMLOPS_HPC_SSH_HOST="login1",
        HPCBRIDGE_SSH_PORT="2222",
        HPCBRIDGE_SSH_KEY="/k",
    )
    assert (current.transport, current.ssh_host, current.ssh_port, current.ssh_key) == (
        "ssh",
        "login1",
        2222,
        "/k",
    )


def test_costs_legacy_names():
    current = settings(CPU_COST_PER_HOUR="0.5", HPCBRIDGE_GPU_COST_PER_HOUR="2")
    assert (current.cpu_cost_per_hour, current.gpu_cost_per_hour) == (0.5, 2.0)
    assert (
        settings(CPU_COST_PER_HOUR="0.5", HPCBRIDGE_CPU_COST_PER_HOUR="0.7").cpu_cost_per_hour
        == 0.7
    )


@pytest.mark.parametrize(
    "env, variable",
    [
        ({"HPCBRIDGE_SCHEDULER": "pbs"}, "HPCBRIDGE_SCHEDULER"),
        ({"EXAMLOPS_SLURM_MODE": "lsf"}, "EXAMLOPS_SLURM_MODE"),
        ({"HPCBRIDGE_TRANSPORT": "carrier-pigeon"}, "HPCBRIDGE_TRANSPORT"),
        ({"HPCBRIDGE_SSH_PORT": "twenty-two"}, "HPCBRIDGE_SSH_PORT"),
        ({"EXAMLOPS_HPC_SSH_PORT": "99999"}, "EXAMLOPS_HPC_SSH_PORT"),
        ({"HPCBRIDGE_CPU_COST_PER_HOUR": "cheap"}, "HPCBRIDGE_CPU_COST_PER_HOUR"),
        ({"HPCBRIDGE_SSH_LOGIN_SHELL": "maybe"}, "HPCBRIDGE_SSH_LOGIN_SHELL"),
    ],
)
def test_bad_values_name_the_variable(env, variable):
    with pytest.raises(ConfigurationError, match=variable):
        Settings.from_env(env)


def test_ssh_needs_a_host():
    with pytest.raises(ConfigurationError, match="HPCBRIDGE_SSH_HOST"):
        settings(HPCBRIDGE_TRANSPORT="ssh")


def test_overrides_win():
    assert Settings.from_env({"HPCBRIDGE_SCHEDULER": "slurm"}, scheduler="mock").scheduler == "mock"
    with pytest.raises(ConfigurationError, match="unknown setting"):
        Settings.from_env({}, colour="blue")


def test_database_default_under_xdg_state(tmp_path):
    current = Settings.from_env({"XDG_STATE_HOME": str(tmp_path)})
    assert current.database_path == tmp_path / "hpcbridge" / "jobs.db"
    assert Settings.from_env({"HPCBRIDGE_DB": "/x/y.db"}).database_path.as_posix() == "/x/y.db"


def test_command_env():
    current = settings(HPCBRIDGE_COMMAND_ENV="SLURM_CONF=/etc/b.conf GREETING='hello there'")
    assert current.command_env == {"SLURM_CONF": "/etc/b.conf", "GREETING": "hello there"}
    with pytest.raises(ConfigurationError, match="HPCBRIDGE_COMMAND_ENV"):
        settings(HPCBRIDGE_COMMAND_ENV="not-an-assignment")


def test_command_env_reaches_local_commands():
    from hpcbridge.factory import build_executor

    executor = build_executor(Settings.from_env({"HPCBRIDGE_COMMAND_ENV": "HPCB_PROBE=42"}))
    assert executor.run(["sh", "-c", "echo $HPCB_PROBE"]).stdout.strip() == "42"


def test_state_home_and_enclosing_flux_uri_from_the_given_env(tmp_path, monkeypatch):
    monkeypatch.setenv("FLUX_URI", "local:///process-broker")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "process-xdg"))
    current = Settings.from_env({"HOME": str(tmp_path / "home")})
    assert current.state_path == tmp_path / "home" / ".local" / "state" / "hpcbridge"
    assert current.enclosing_flux_uri is None
    inside = Settings.from_env({"FLUX_URI": " local:///run/flux/local "})
    assert inside.enclosing_flux_uri == "local:///run/flux/local"
    assert inside.flux_uri is None  # the enclosing instance is not a chosen one


@pytest.mark.parametrize("name", ["HPCBRIDGE_CPU_COST_PER_HOUR", "HPCBRIDGE_GPU_COST_PER_HOUR"])
def test_a_negative_cost_is_refused_naming_its_variable(name):
    with pytest.raises(ConfigurationError, match=f"{name}=-1.0: a cost per hour is 0 or more"):
        Settings.from_env({name: "-1"})
    assert Settings.from_env({name: "0"}).validate() is None


def test_a_command_timeout_of_zero_or_less_is_refused():
    with pytest.raises(ConfigurationError, match="HPCBRIDGE_COMMAND_TIMEOUT='-1'"):
        Settings.from_env({"HPCBRIDGE_COMMAND_TIMEOUT": "-1"})
