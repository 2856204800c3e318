"""Property tests of the files and variables a site and a user write: the site settings
file (site_config.py), the environment (config.py ``Settings.from_env``) and ``--args-file``
(cli/submit.py): written values round trip, and any text is settings or a
ConfigurationError saying what to correct, never another exception."""

from __future__ import annotations

import argparse
import os
import shlex
import tempfile

from hypothesis import example, given, settings
from hypothesis import strategies as st

from hpcbridge.cli.submit import _jobs_from
from hpcbridge.errors import ConfigurationError, ResourceError
from hpcbridge.settings.config import Settings
from hpcbridge.settings.site import SITE_KEYS, parse_site_settings

SETTINGS = settings(max_examples=60, deadline=None)

_TOML_CHARS = st.sampled_from(list("abcdefghijklmnopqrstuvwxyz_=#. \t\n0123456789-+e\"'[]²"))
_site_lines = st.tuples(
    st.sampled_from([*SITE_KEYS, "other", ""]),
    st.sampled_from([" = ", "=", " ", " == "]),
    st.one_of(
        st.sampled_from(
            ["1", "0", "0.5", "1_000", "inf", "nan", "-1", "1e3", "²", '"5"', "", "true"]
        ),
        st.text(_TOML_CHARS, max_size=6),
    ),
    st.sampled_from(["", " # note", "#"]),
).map("".join)


@SETTINGS
@given(
    st.one_of(
        st.text(max_size=60),
        st.text(_TOML_CHARS, max_size=60),
        st.lists(_site_lines, max_size=5).map("\n".join),
    )
)
@example("unknown_limit = ²")
@example("poll_interval = 1e400")
def test_any_site_file_is_settings_or_a_configuration_error(text: str) -> None:
    try:
        found = parse_site_settings(text, "/etc/hpcbridge/settings.toml")
    except ConfigurationError as exc:
        assert "/etc/hpcbridge/settings.toml" in str(exc)
        return
    for key, value in found.items():
        whole, least = SITE_KEYS[key]
        assert value >= least and (not whole or isinstance(value, int))


@SETTINGS
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "min_poll_interval": st.floats(0, 1e6),
            "poll_interval": st.floats(0.001, 1e6),
            "command_timeout": st.floats(0.001, 1e6),
            "unknown_limit": st.integers(1, 10**9),
        },
    )
)
def test_site_file_round_trips(values: dict) -> None:
    text = "\n".join(f"{key} = {value!r}  # set by the admins" for key, value in values.items())
    assert parse_site_settings(text, "f") == values


_VARIABLES = [
    "HPCBRIDGE_SCHEDULER",
    "HPCBRIDGE_TRANSPORT",
    "HPCBRIDGE_SSH_PORT",
    "HPCBRIDGE_UNKNOWN_LIMIT",
    "HPCBRIDGE_SSH_LOGIN_SHELL",
    "HPCBRIDGE_COMMAND_ENV",
    "HPCBRIDGE_COMMAND_TIMEOUT",
    "HPCBRIDGE_POLL_INTERVAL",
    "HPCBRIDGE_MIN_POLL_INTERVAL",
    "HPCBRIDGE_MAX_QUEUED",
    "HPCBRIDGE_CPU_COST_PER_HOUR",
    "HPCBRIDGE_SLURM_DRIVER",
    "HPCBRIDGE_CONTAINER_RUNTIME",
    "HPCBRIDGE_SLURM_OPTIONS",
    "HPCBRIDGE_TIME",
    "HPCBRIDGE_MEM",
    "HPCBRIDGE_NODES",
]
_env_values = st.one_of(
    st.sampled_from(
        [
            "mock",
            "slurm",
            "local",
            "ssh",
            "1",
            "0",
            "yes",
            "-1",
            "1e400",
            "nan",
            "inf",
            "²",
            "A=1 B='x",
            "--x=1",
        ]
    ),
    st.text(max_size=8),
)


@SETTINGS
@given(st.dictionaries(st.sampled_from(_VARIABLES), _env_values, max_size=4))
@example({"HPCBRIDGE_SSH_PORT": "²"})
@example({"HPCBRIDGE_COST_PER_HOUR": "nan"})
@example({"HPCBRIDGE_MAX_QUEUED": "1e400"})
def test_any_environment_is_settings_or_a_configuration_error(env: dict) -> None:
    env = {**env, "HPCBRIDGE_SITE_CONFIG": os.devnull, "HPCBRIDGE_STATE_DIR": "/tmp/unused"}
    try:
        Settings.from_env(env)
    except (ConfigurationError, ResourceError):
        pass


_arguments = st.lists(
    st.text(
        st.characters(blacklist_categories=["Cs"], blacklist_characters="\n\r\x00"), max_size=8
    ),
    min_size=1,
    max_size=4,
)


@SETTINGS
@given(st.lists(_arguments, min_size=1, max_size=4), st.sampled_from(["", "# a comment\n\n"]))
def test_args_file_round_trips(jobs: list, prelude: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "args")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(prelude + "".join(shlex.join(words) + "\n" for words in jobs))
        args = argparse.Namespace(args_file=path, scripts=["run.sh"])
        assert _jobs_from(args) == [("run.sh", words) for words in jobs]


@SETTINGS
@given(st.text(max_size=60))
def test_any_args_file_is_jobs_or_a_configuration_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "args")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as handle:
            handle.write(text)
        try:
            jobs = _jobs_from(argparse.Namespace(args_file=path, scripts=["run.sh"]))
        except ConfigurationError:
            return
        assert jobs and all(job[0] == "run.sh" for job in jobs)


@SETTINGS
@given(st.binary(max_size=40))
@example("caf\u00e9 1\n".encode("latin-1"))
def test_any_args_file_bytes_are_jobs_or_a_configuration_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "args")
        with open(path, "wb") as handle:
            handle.write(data)
        try:
            _jobs_from(argparse.Namespace(args_file=path, scripts=["run.sh"]))
        except ConfigurationError:
            pass


@SETTINGS
@given(st.binary(max_size=40))
@example("poll_interval = 5 # caf\u00e9\n".encode("latin-1"))
def test_any_site_file_bytes_are_settings_or_a_configuration_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "settings.toml")
        with open(path, "wb") as handle:
            handle.write(data)
        try:
            Settings.from_env({"HPCBRIDGE_SITE_CONFIG": path, "HPCBRIDGE_STATE_DIR": folder})
        except ConfigurationError as exc:
            assert path in str(exc)
