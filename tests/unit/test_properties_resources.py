"""Property tests of the resource request (resources.py, native_options.py) and of its
sbatch flags (slurm/commands.py): durations and requests round trip, any value of any key is
validated or refused with a ResourceError, and each key reaches sbatch as the flag that says
it.  ``begin`` has its own tests (test_resources.py)."""

from __future__ import annotations

import math
import shlex
from datetime import timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from hpcbridge.errors import ConfigurationError, ResourceError
from hpcbridge.resources import (
    RESOURCE_KEYS,
    DurationError,
    Resources,
    format_fsd,
    format_slurm_time,
    parse_duration,
)
from hpcbridge.schedulers.native_options import (
    NONE,
    OPTIONAL,
    REQUIRED,
    check_options,
    option_names,
)
from hpcbridge.schedulers.slurm import commands
from hpcbridge.schedulers.slurm import options as slurm_options
from hpcbridge.settings.variables import name_values

SETTINGS = settings(max_examples=60, deadline=None)

_DURATION_CHARS = st.sampled_from(list("0123456789.:-smhdSMHD unlimitedINF²٣+e"))


# -- durations -------------------------------------------------------------------------


@SETTINGS
@given(st.text(_DURATION_CHARS, max_size=14) | st.text(max_size=10))
@example("9" * 400 + ":0")
@example("9" * 400 + "-0")
@example("9" * 400 + "s")
@example("1e400s")
@example("1e14d")
def test_any_duration_text_is_seconds_or_a_duration_error(text: str) -> None:
    try:
        seconds = parse_duration(text)
    except DurationError:
        return
    assert seconds > 0
    if not math.isinf(seconds):
        assert parse_duration(format_slurm_time(seconds)) == math.ceil(seconds)


@SETTINGS
@given(st.floats(min_value=0.001, max_value=10 * 365 * 86400))
def test_fractional_fsd_round_trips_to_the_millisecond(seconds: float) -> None:
    assert math.isclose(parse_duration(format_fsd(seconds)), seconds, abs_tol=0.0005)


@SETTINGS
@given(st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=3650)))
def test_timedelta_is_its_seconds(delta: timedelta) -> None:
    assert parse_duration(delta) == delta.total_seconds()


# -- the request ------------------------------------------------------------------------

_any_value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(),
    st.text(max_size=12),
    st.text(st.sampled_from(list("0123456789.KMGTiBkgx :-+@_,²")), max_size=8),
    st.lists(st.text(max_size=6), max_size=3),
    st.dictionaries(
        st.sampled_from(["slurm", "flux", "x"]),
        st.lists(st.text(max_size=8), max_size=3),
        max_size=2,
    ),
    st.timedeltas(),
)
_keys = st.sampled_from([key for key in RESOURCE_KEYS if key != "begin"])


@SETTINGS
@given(st.dictionaries(_keys, _any_value, max_size=4))
@example({"mem": "0.0001K"})
@example({"time": timedelta(microseconds=1)})
@example({"mem_per_cpu": "0.5K"})
@example({"time": "9" * 400 + ":0"})
def test_any_request_is_resources_or_a_resource_error(request: dict) -> None:
    try:
        resources = Resources.from_mapping(request)
    except ResourceError:
        return
    # what was validated is taken back unchanged
    assert Resources.from_mapping(resources.as_request()) == resources
    for key in ("mem", "mem_per_cpu"):
        value = getattr(resources, key)
        if value is not None:
            commands.check_mem(value)  # a ValueError for what sbatch refuses
            assert not value.startswith("0")


_memories = st.tuples(
    st.one_of(
        st.integers(1, 10**6).map(str),
        st.decimals(min_value="0.01", max_value="4096", places=2).map(str),
    ),
    st.sampled_from(["", "K", "M", "G", "T", "k", "g", "GB", "MiB"]),
).map("".join)


@SETTINGS
@given(_memories)
def test_memory_is_normalised_once(text: str) -> None:
    try:
        mem = Resources.from_mapping({"mem": text}).mem
    except ResourceError:
        return
    assert mem is not None
    assert Resources.from_mapping({"mem": mem}).mem == mem
    commands.check_mem(mem)


# -- the request as sbatch flags, and back ------------------------------------------------

#: the sbatch flag of each key (as _resource_flags writes it); flags hold one value
_FLAGS = {
    "partition": "--partition",
    "qos": "--qos",
    "account": "--account",
    "constraint": "--constraint",
    "time": "--time",
    "nodes": "--nodes",
    "ntasks": "--ntasks",
    "cpus_per_task": "--cpus-per-task",
    "mem": "--mem",
    "gpus": "--gpus",
    "gpus_per_node": "--gpus-per-node",
    "gpus_per_task": "--gpus-per-task",
    "reservation": "--reservation",
    "signal": "--signal",
}
_words = st.from_regex(r"[A-Za-z0-9_.-]{1,10}", fullmatch=True)
_valid_requests = st.fixed_dictionaries(
    {},
    optional={
        "partition": _words,
        "qos": _words,
        "account": _words,
        "constraint": _words,
        "time": st.integers(1, 10 * 365 * 86400).map(format_slurm_time),
        "nodes": st.integers(1, 10**4),
        "ntasks": st.integers(1, 10**5),
        "cpus_per_task": st.integers(1, 512),
        "mem": st.integers(1, 10**6).map(lambda n: f"{n}M"),
        "gpus": st.integers(1, 16),
        "gpus_per_node": st.integers(1, 16),
        "gpus_per_task": st.integers(1, 16),
        "reservation": _words,
        "signal": st.tuples(
            st.sampled_from(["USR1", "USR2", "TERM", "B:USR1"]), st.integers(0, 65535)
        ).map(lambda pair: f"{pair[0]}@{pair[1]}"),
        "exclusive": st.booleans(),
        "requeue": st.booleans(),
        "native": st.lists(
            st.sampled_from(["--licenses=a:1", "--mail-type=END", "-Lb:2", "--hold"]), max_size=3
        ).map(lambda options: {"slurm": options}),
    },
)


@SETTINGS
@given(_valid_requests)
def test_each_key_reaches_sbatch_as_its_flag(request: dict) -> None:
    resources = Resources.from_mapping(request)
    spec = commands.SubmitSpec("/w/x.sh", "/w", "/w/out", "job", resources, key="k1")
    argv = commands.sbatch_argv(spec)
    assert argv[:2] == ["sbatch", "--parsable"] and argv[-1] == "/w/x.sh"
    given_flags = dict(word.split("=", 1) for word in argv[2:-1] if "=" in word)
    back = {key: given_flags[flag] for key, flag in _FLAGS.items() if flag in given_flags}
    expected = {key: value for key, value in resources.to_dict().items() if key in _FLAGS}
    assert Resources.from_mapping(back).to_dict() == expected
    assert ("--exclusive" in argv) == bool(resources.exclusive)
    assert ("--requeue" in argv, "--no-requeue" in argv) == (
        resources.requeue is True,
        resources.requeue is False,
    )
    native = list(resources.native_options("slurm"))
    # then --job-name, --output, --chdir, --comment and the wrapper
    assert argv[len(argv) - 5 - len(native) : len(argv) - 5] == native


# -- native options ------------------------------------------------------------------------


@SETTINGS
@given(st.lists(st.text(max_size=12), max_size=4))
@example(["-"])
@example(["--", "x"])
def test_any_native_list_is_options_or_a_resource_error(options: list) -> None:
    try:
        resources = Resources.from_mapping({"native": {"slurm": options}})
    except ResourceError:
        return
    attached = resources.native_options("slurm")
    assert all(option.startswith("-") for option in attached)
    # attached options are taken back as they are
    assert Resources.from_mapping({"native": {"slurm": list(attached)}}) == resources


_HELP = """Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]
  -A, --account=name          charge job to specified account
  -H, --hold                  submit job in held state
  -k, --no-kill               do not kill job on node failure
  -L, --licenses=names        required license, comma separated
      --mail-type=type        notify on state change
      --propagate[=rlimits]   propagate all [or specific list of] rlimits
  -v, --verbose               verbose mode (multiple -v's increase verbosity)
"""


def test_help_text_names_are_read() -> None:
    names = option_names(_HELP)
    assert names["--account"] == names["-A"] == names["--licenses"] == REQUIRED
    assert names["--propagate"] == OPTIONAL and names["-H"] == names["--hold"] == NONE


_option_words = st.one_of(
    st.sampled_from(
        [
            "-H",
            "-Hk",
            "-Hv",
            "-kx",
            "-La:1",
            "--lic=a",
            "--mail",
            "--pro",
            "--propagate=x",
            "-A",
            "--hold=1",
        ]
    ),
    st.text(st.sampled_from(list("-=HkLAvx:1")), min_size=1, max_size=5).map(lambda t: "-" + t),
)


@SETTINGS
@given(st.lists(_option_words, max_size=4), st.booleans())
@example(["-H-"], True)
@example(["-H="], True)
def test_any_options_are_names_or_a_resource_error(options: list, with_help: bool) -> None:
    known = option_names(_HELP) if with_help else None
    try:
        names = check_options("sbatch", options, slurm_options.OWNED_OPTIONS, known)
    except ResourceError:
        return
    assert all(name.startswith("-") for name in names)
    if known is not None:
        assert all(name in known for name in names)


@SETTINGS
@given(
    st.lists(st.text(st.sampled_from(list(" -=[]AaZz09,_")), max_size=20), max_size=6).map(
        "\n".join
    )
)
def test_any_help_text_gives_option_names(text: str) -> None:
    names = option_names(text)
    assert all(
        name.startswith("-") and kind in (REQUIRED, OPTIONAL, NONE) for name, kind in names.items()
    )


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True), st.text(max_size=8)
        ),
        max_size=4,
    )
)
def test_name_values_round_trip(pairs: list) -> None:
    words = [f"{name}={value}" for name, value in pairs]
    assert name_values(words, "--env") == dict(pairs)
    assert name_values(shlex.split(shlex.join(words)), "--env") == dict(pairs)


@SETTINGS
@given(st.lists(st.text(max_size=8), max_size=4))
@example(["²=1"])
def test_any_words_are_name_values_or_a_configuration_error(words: list) -> None:
    try:
        found = name_values(words, "--env")
    except ConfigurationError:
        return
    assert all(name.isidentifier() for name in found)
