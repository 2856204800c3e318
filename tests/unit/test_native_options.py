"""Options in a scheduler's own words (``native``, issue 34): their form, the settings
and the command that give them, sbatch's names read from its own ``--help``
(recorded from 22.05 and 25.11), what each release lacks, what hpcbridge owns, and
what a Flux option sets as Flux's own dry run shows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

from hpcbridge import ResourceError, Resources
from hpcbridge.cli.parser import build_parser
from hpcbridge.cli.submit import resources_from
from hpcbridge.errors import ConfigurationError
from hpcbridge.schedulers.flux import commands as flux_commands
from hpcbridge.schedulers.flux import options as flux_options
from hpcbridge.schedulers.flux.commands import submit_argv
from hpcbridge.schedulers.flux.instance import POLICY_0_26
from hpcbridge.schedulers.flux.request import SubmitRequest
from hpcbridge.schedulers.native_options import NONE, OPTIONAL, REQUIRED, option_names
from hpcbridge.schedulers.slurm import commands, options
from hpcbridge.settings.config import Settings

HELP = Path(__file__).resolve().parents[1] / "data" / "slurm" / "help"


def sbatch_names(release: str) -> Dict[str, str]:
    return option_names((HELP / f"sbatch-help-{release}.txt").read_text())


def slurm(*options: str) -> Resources:
    return Resources.from_mapping({"native": {"slurm": list(options)}})


# -- the form -----------------------------------------------------------------


def test_a_value_after_its_option_is_attached_as_a_shell_would_split_it() -> None:
    given = ["--licenses", "a:1", "-L", "b", "--hold", "-o cpu=1", "--nice 3", "-Hk"]
    assert slurm(*given).native_options("slurm") == (
        "--licenses=a:1",
        "-Lb",
        "--hold",
        "-ocpu=1",
        "--nice=3",
        "-Hk",
    )


@pytest.mark.parametrize(
    "value, said",
    [
        ({"slrum": ["--hold"]}, "no scheduler 'slrum': did you mean 'slurm'"),
        ({"slurm": "--hold"}, "expected a list of options"),
        ({"slurm": ["hold"]}, "'hold' is not an option"),
        ({"slurm": [3]}, "3 is not text"),
        ({"slurm": ["--comment=a\nb"]}, "a NUL or a newline"),
        ("--hold", "expected {'slurm': \\[...\\], 'flux': \\[...\\]}"),
    ],
)
def test_a_malformed_native_value_names_the_key_and_the_form(value: Any, said: str) -> None:
    with pytest.raises(ResourceError, match=said) as caught:
        Resources.from_mapping({"native": value})
    assert caught.value.key == "native"


def test_the_settings_options_come_first_and_the_requests_after() -> None:
    settings = Settings.from_env(
        env={"HPCBRIDGE_SLURM_OPTIONS": "--hold --wckey='a b'", "HPCBRIDGE_FLUX_OPTIONS": "-o x=1"}
    )
    assert settings.sources["resource:native"] == (
        "HPCBRIDGE_SLURM_OPTIONS and HPCBRIDGE_FLUX_OPTIONS"
    )
    resources = Resources.from_mapping(
        {"native": {"slurm": ["--nice=2"]}}, settings.resource_defaults
    )
    assert resources.native_options("slurm") == ("--hold", "--wckey=a b", "--nice=2")
    assert resources.native_options("flux") == ("-ox=1",)
    assert resources.native_options("mock") == ()
    again = Resources.from_mapping(resources.as_request())
    assert again == resources


def test_a_setting_quoted_wrong_says_how_to_quote() -> None:
    with pytest.raises(ConfigurationError, match="HPCBRIDGE_SLURM_OPTIONS.*quote as a shell"):
        Settings.from_env(env={"HPCBRIDGE_SLURM_OPTIONS": "--comment='open"})


def test_the_command_gives_each_schedulers_options() -> None:
    args = build_parser().parse_args(
        ["submit", "--slurm-option=--hold", "--slurm-option=-Lx:1", "--flux-option=-ox=1", "a.sh"]
    )
    assert resources_from(args)["native"] == {"slurm": ["--hold", "-Lx:1"], "flux": ["-ox=1"]}
    plain = build_parser().parse_args(["submit", "a.sh"])
    assert "native" not in resources_from(plain)


# -- sbatch: the release's own names --------------------------------------------


@pytest.mark.parametrize("release", ["22.05", "25.11"])
def test_sbatch_names_and_what_each_takes_come_from_its_help(release: str) -> None:
    names = sbatch_names(release)
    assert names["--licenses"] == names["-L"] == REQUIRED
    assert names["--hold"] == names["-H"] == NONE
    assert names["--export"] == OPTIONAL
    assert len(names) > 120


def test_an_option_of_a_newer_release_is_refused_by_the_older_one() -> None:
    option = slurm("--tres-per-task=cpu=2")
    options.check_native(option, sbatch_names("25.11"), "new")
    with pytest.raises(ResourceError, match="sbatch on old has no option --tres-per-task"):
        options.check_native(option, sbatch_names("22.05"), "old")


@pytest.mark.parametrize(
    "option, said",
    [
        ("-ox.out", "'-ox.out' sets what hpcbridge sets: give the output key"),
        ("--out=x", "--out stands for --output"),
        ("--array=0-3", "submit many with submit_many"),
        ("-d", "sets what hpcbridge sets: give the parents with depends_on"),
        ("--chdir=/x", "remote_dir"),
        ("--export=NONE", "give variables with environment"),
        ("-p", "the partition key says it"),
        ("--no-requeue", "the requeue key says it"),
        ("--cont=x", "ambiguous in sbatch on vm: it may be --container, --contiguous"),
        ("--nicce=1", "has no option --nicce; did you mean --nice"),
        ("--licenses", "'--licenses' takes a value: attach it \\(--licenses=VALUE\\)"),
        ("-L", "attach it \\(-LVALUE\\)"),
        ("--hold=yes", "--hold takes no value"),
    ],
)
def test_sbatch_refuses_what_hpcbridge_owns_or_the_release_lacks(option: str, said: str) -> None:
    with pytest.raises(ResourceError, match=said):
        options.check_native(slurm(option), sbatch_names("22.05"), "vm")


def test_a_shortened_name_is_taken_as_sbatch_takes_it() -> None:
    options.check_native(slurm("--lic=a:1", "--nic=3", "-Hk"), sbatch_names("22.05"), "vm")


def test_without_the_release_list_only_what_hpcbridge_owns_is_judged() -> None:
    options.check_native(slurm("--anything=1"), None, "vm")
    with pytest.raises(ResourceError, match="--outp stands for --output"):
        options.check_native(slurm("--outp=x"), None, "vm")


def test_sbatch_gets_the_slurm_options_and_only_them() -> None:
    resources = Resources.from_mapping(
        {"time": "5", "native": {"slurm": ["--hold", "--nice=3"], "flux": ["-ox=1"]}}
    )
    spec = commands.SubmitSpec("/j/w.sh", "/j", "/j/o", "n", resources)
    argv = commands.sbatch_argv(spec)
    assert argv[argv.index("--time=0:05:00") + 1 : argv.index("--job-name=n")] == [
        "--hold",
        "--nice=3",
    ]
    assert "-ox=1" not in argv


# -- Flux: what an option sets, as Flux's dry run shows it -------------------------


def jobspec(**attributes: Any) -> str:
    system = {"duration": 0, "cwd": "/here", "environment": {"A": "1"}, **attributes}
    return json.dumps(
        {
            "resources": [{"type": "slot", "count": 1}],
            "tasks": [{"command": ["true"]}],
            "attributes": {"system": system},
            "version": 1,
        }
    )


def test_what_a_flux_option_sets_is_taken_leaf_by_leaf() -> None:
    given = jobspec(shell={"options": {"cpu-affinity": "off", "rlimit": {"core": 0}}})
    bare = jobspec(shell={"options": {"rlimit": {"core": 0}}})
    assert flux_options.option_attributes("-ocpu-affinity=off", bare, given) == (
        ("system.shell.options.cpu-affinity", "off"),
    )


@pytest.mark.parametrize(
    "changed, said",
    [
        ({"duration": 60}, "sets system.duration, which hpcbridge sets: use the time key"),
        ({"environment": {"A": "2"}}, "sets system.environment"),
        ({}, "changes nothing in the jobspec"),
    ],
)
def test_a_flux_option_hpcbridge_cannot_pass_on_is_refused(
    changed: Dict[str, Any], said: str
) -> None:
    with pytest.raises(ResourceError, match=said):
        flux_options.option_attributes("--x", jobspec(), jobspec(**changed))


def test_a_flux_option_that_changes_the_resources_names_the_keys() -> None:
    bare = json.loads(jobspec())
    given = dict(bare, resources=[{"type": "node", "count": 2}])
    with pytest.raises(ResourceError, match="changes the job's resources.*nodes, ntasks"):
        flux_options.option_attributes("-N2", json.dumps(bare), json.dumps(given))


@pytest.mark.parametrize(
    "option, said",
    [
        ("--output=x", "give the output key"),
        ("--out=x", "--out stands for --output"),
        ("--cwd=/x", "remote_dir"),
        ("-N2", "the nodes key says it"),
        ("--bank=a", "the account key says it"),
        ("--dependency=afterok:1", "depends_on"),
    ],
)
def test_flux_refuses_by_name_what_hpcbridge_owns(option: str, said: str) -> None:
    with pytest.raises(ResourceError, match=said):
        flux_options.check_names([option])


def test_the_flux_command_sets_each_leaf_as_json() -> None:
    request = SubmitRequest(
        "/j/w.sh",
        "n",
        "/j/o",
        "/j",
        attributes=(("system.shell.options.cpu-affinity", "off"), ("user.n", [1, 2])),
    )
    argv = submit_argv("flux", POLICY_0_26, request)
    assert '--setattr=system.shell.options.cpu-affinity="off"' in argv
    assert "--setattr=user.n=[1, 2]" in argv


def test_the_dry_run_is_the_kinds_own_command() -> None:
    assert flux_commands.dry_run_argv("flux", ["mini", "batch"], True, ["-ox=1"]) == [
        "flux",
        "mini",
        "batch",
        "--dry-run",
        "-n1",
        "-ox=1",
        "--wrap",
        "true",
    ]
    assert flux_commands.dry_run_argv("flux", ["submit"], False, []) == [
        "flux",
        "submit",
        "--dry-run",
        "true",
    ]
