"""The site's vocabulary (issue 34): the keys beyond the seed's table - validated once,
written as each scheduler takes them (sbatch, pyslurm, Flux), refused or dropped where
a scheduler cannot honour them, and reachable from the command and the settings."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcbridge import ResourceError, Resources
from hpcbridge.cli.parser import build_parser
from hpcbridge.engine.driver import SubmitBatch
from hpcbridge.engine.jobscript import PreparedJob
from hpcbridge.request.begins import BeginError, format_begin, parse_begin
from hpcbridge.resources import RESOURCE_KEYS, signal_forwarded
from hpcbridge.schedulers.flux import jobspec, planning
from hpcbridge.schedulers.flux import request as request_module
from hpcbridge.schedulers.flux.commands import submit_argv
from hpcbridge.schedulers.flux.instance import POLICY_0_26, POLICY_0_49, POLICY_0_88
from hpcbridge.schedulers.slurm import commands
from hpcbridge.schedulers.slurm.pyslurm_records import gres_counts, submit_description_kwargs
from hpcbridge.settings.config import Settings
from hpcbridge.settings.doctor import resource_keys_check
from hpcbridge.settings.schedulers import scheduler_entry

SITE_KEYS = (
    "gpus_per_node",
    "gpus_per_task",
    "gres",
    "mem_per_cpu",
    "exclusive",
    "reservation",
    "signal",
    "requeue",
    "begin",
    "container",
    "native",
)


def slurm_spec(**resources: Any) -> commands.SubmitSpec:
    return commands.SubmitSpec(
        wrapper_path="/j/.hpcbridge/t.sh",
        workdir="/j",
        output="/j/slurm-%j.out",
        job_name="run.sh",
        resources=Resources.from_mapping(resources),
    )


def flux_request(policy: Any = POLICY_0_49, **resources: Any) -> request_module.SubmitRequest:
    job = PreparedJob("t", "/j", "/j/.hpcbridge/w.sh", "/j/.hpcbridge/w.exit", ["/j/x.sh"], "x")
    batch = SubmitBatch(job, 1, Resources.from_mapping(resources), (), "/j/flux-{{id}}.out")
    return planning.translate(batch, None, policy)


def test_the_site_keys_follow_the_seed_table() -> None:
    assert RESOURCE_KEYS[-len(SITE_KEYS) :] == SITE_KEYS
    assert Resources().to_dict() == {}


# -- validation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("USR1", "USR1"),
        ("SIGUSR1@120", "USR1@120"),
        ("10@5", "USR1@5"),
        ("term", "TERM"),
        ("b:usr2@30", "B:USR2@30"),
    ],
)
def test_a_signal_is_written_the_one_way_slurm_reads_it(given: str, written: str) -> None:
    assert Resources.from_mapping({"signal": given}).signal == written


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("FOO@10", "unknown signal 'FOO'"),
        ("USR1@70000", "at most 65535 seconds"),
        ("R:USR1@10", "R: is not taken"),
        ("X:USR1@10", "X: is not taken"),
        (10, r"\[B:\]SIG\[@SECONDS\]"),
    ],
)
def test_a_bad_signal_names_the_key_and_the_form(value: Any, said: str) -> None:
    with pytest.raises(ResourceError, match=said) as raised:
        Resources.from_mapping({"signal": value})
    assert raised.value.key == "signal"


def test_begin_takes_a_date_a_datetime_or_now_plus_a_duration() -> None:
    at = datetime(2030, 1, 2, 3, 4, 5)
    assert Resources.from_mapping({"begin": "2030-01-02T03:04:05"}).begin == at.timestamp()
    assert Resources.from_mapping({"begin": at}).begin == at.timestamp()
    later = Resources.from_mapping({"begin": "now+1h"}).begin
    assert later is not None and 3590 < later - datetime.now().timestamp() <= 3601
    with pytest.raises(ResourceError, match="ambiguous"):
        Resources.from_mapping({"begin": 3600})
    with pytest.raises(ResourceError, match="now\\+N\\[seconds") as raised:
        Resources.from_mapping({"begin": "tomorrow-ish"})
    assert raised.value.key == "begin"


#: the moment the forms below are read at: a Saturday, 11:30:20 local time
NOW = datetime(2026, 12, 5, 11, 30, 20)


def _at(*parts: int) -> float:
    return datetime(*parts).timestamp()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        # sbatch: now+N, seconds when no unit, its unit words
        ("now", NOW.timestamp()),
        ("now+120", NOW.timestamp() + 120),
        ("now+1hour", NOW.timestamp() + 3600),
        ("now+2minutes", NOW.timestamp() + 120),
        ("now + 3 days", NOW.timestamp() + 3 * 86400),
        ("now+1week", NOW.timestamp() + 7 * 86400),
        ("NOW+30SECONDS", NOW.timestamp() + 30),
        # hpcbridge's own so far: now+ with a Flux letter
        ("now+1h", NOW.timestamp() + 3600),
        ("now+90m", NOW.timestamp() + 5400),
        # flux --begin-time: +FSD, seconds when no unit
        ("+1h", NOW.timestamp() + 3600),
        ("+90", NOW.timestamp() + 90),
        ("+1.5h", NOW.timestamp() + 5400),
        ("+2d", NOW.timestamp() + 2 * 86400),
        # a time of day: today's if later than this minute, else tomorrow's (sbatch)
        ("11:31", _at(2026, 12, 5, 11, 31)),
        ("11:30", _at(2026, 12, 6, 11, 30)),
        ("11:30:59", _at(2026, 12, 6, 11, 30, 59)),
        ("9:05:03", _at(2026, 12, 6, 9, 5, 3)),
        ("23:59", _at(2026, 12, 5, 23, 59)),
        ("noon", _at(2026, 12, 5, 12)),
        ("midnight", _at(2026, 12, 6)),
        ("tomorrow", _at(2026, 12, 6)),
        ("today", _at(2026, 12, 5)),
        ("tomorrow 08:30", _at(2026, 12, 6, 8, 30)),
        ("tomorrowT08:30", _at(2026, 12, 6, 8, 30)),
        ("noon tomorrow", _at(2026, 12, 6, 12)),
        ("today 16:00", _at(2026, 12, 5, 16)),
        # a date, perhaps a time
        ("2026-12-24", _at(2026, 12, 24)),
        ("2026-12-24T18:00", _at(2026, 12, 24, 18)),
        ("2026-12-24 18:00:30", _at(2026, 12, 24, 18, 0, 30)),
        ("2026-12-24T18:00Z", datetime(2026, 12, 24, 18, tzinfo=timezone.utc).timestamp()),
        ("2026-12-24T18:00+01:00", datetime(2026, 12, 24, 17, tzinfo=timezone.utc).timestamp()),
    ],
)
def test_begin_reads_what_sbatch_and_flux_document(text: str, moment: float) -> None:
    assert parse_begin(text, NOW) == moment


@pytest.mark.parametrize(
    "text",
    [
        "teatime",  # sbatch's words for a time of day
        "fika",
        "4pm",
        "10:00 AM",
        "120626",  # sbatch's MMDDYY
        "12/06/26",
        "now+1:30:00",  # a Slurm --time after now+: no scheduler reads it
        "now+1min",  # sbatch takes whole unit words only
        "now-5",
        "+1 fortnight",
        "in an hour",  # flux's free phrases (parsedatetime)
        "tomorrow morning",
        "25:00",
        "2026-13-01",
        "2026-02-30",
        "now+99999999999999999999weeks",
        "1000-01-01",
        "",
    ],
)
def test_begin_refuses_the_rest_naming_the_forms(text: str) -> None:
    with pytest.raises(BeginError, match="now\\+N\\[seconds.*YYYY-MM-DD"):
        parse_begin(text, NOW)
    with pytest.raises(ResourceError, match="now\\+N\\[seconds"):
        Resources.from_mapping({"begin": text or " "})


@given(st.text(max_size=40))
def test_any_text_is_a_start_time_or_a_begin_error(text: str) -> None:
    try:
        moment = parse_begin(text, NOW)
    except BeginError:
        return
    assert isinstance(moment, float) and moment >= 0
    assert format_begin(moment)  # sbatch's words for it


@given(
    st.sampled_from(["now", "NOW", "now ", "now+", "+", "now+1", "+1", ":", "-", "T", " "]),
    st.text(alphabet="0123456789:+-. Tadehikmnorsuwyz", max_size=16),
)
def test_near_misses_are_a_start_time_or_a_begin_error(head: str, tail: str) -> None:
    try:
        parse_begin(head + tail, NOW)
    except BeginError:
        pass


@given(st.integers(min_value=0, max_value=10**6))
def test_sbatchs_now_forms_and_fluxs_offsets_agree(seconds: int) -> None:
    start = NOW.timestamp()
    assert parse_begin(f"now+{seconds}", NOW) == start + seconds
    assert parse_begin(f"+{seconds}", NOW) == start + seconds
    assert parse_begin(f"now+{seconds}minutes", NOW) == parse_begin(f"+{seconds}m", NOW)
    assert parse_begin(f"now+{seconds}hours", NOW) == parse_begin(f"+{seconds}h", NOW)
    assert parse_begin(f"now+{seconds}days", NOW) == parse_begin(f"+{seconds}d", NOW)


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9999, 12, 30)))
def test_what_goes_to_sbatch_reads_back_as_the_same_moment(moment: datetime) -> None:
    """``format_begin`` (sbatch's --begin, local time) is a form ``parse_begin`` reads."""
    text = format_begin(moment.timestamp())
    assert format_begin(parse_begin(text, NOW)) == text


@given(
    st.integers(min_value=0, max_value=23),
    st.integers(min_value=0, max_value=59),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
)
def test_a_time_of_day_is_the_next_one(hour: int, minute: int, now: datetime) -> None:
    today = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    later = (hour, minute) > (now.hour, now.minute)
    expected = today if later else today + timedelta(days=1)
    assert parse_begin(f"{hour}:{minute:02d}", now) == expected.timestamp()


def test_what_a_sweep_stores_comes_back_unchanged() -> None:
    asked = Resources.from_mapping(
        {"begin": "now+2h", "signal": "usr1@30", "exclusive": "yes", "mem_per_cpu": "1.5G"}
    )
    request = asked.as_request()
    assert request["begin"] == format_begin(asked.begin or 0)
    assert Resources.from_mapping(request) == asked


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("exclusive", "maybe", "expected true or false"),
        ("requeue", 2, "expected true or false"),
        ("gres", "gpu 2", "name\\[:type\\]\\[:count\\]"),
        ("gpus_per_task", -1, "zero or more"),
        ("gpus_per_node", "two", "whole number"),
        ("mem_per_cpu", "lots", "malformed memory"),
        ("reservation", " ", "blank"),
    ],
)
def test_a_bad_value_names_its_key(key: str, value: Any, said: str) -> None:
    with pytest.raises(ResourceError, match=said) as raised:
        Resources.from_mapping({key: value})
    assert raised.value.key == key


@pytest.mark.parametrize(
    ("asked", "key", "said"),
    [
        ({"mem": "4G", "mem_per_cpu": "1G"}, "mem_per_cpu", "exclude each other"),
        ({"gres": "gpu:2", "gpus_per_node": 1}, "gpus_per_node", "GPUs asked twice"),
    ],
)
def test_keys_that_contradict_each_other_are_refused(
    asked: Mapping[str, Any], key: str, said: str
) -> None:
    with pytest.raises(ResourceError, match=said) as raised:
        Resources.from_mapping(asked)
    assert raised.value.key == key


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("gpu_per_node", "gpus_per_node"),
        ("gpus_per_slot", "gpus_per_task"),
        ("reservations", "reservation"),
        ("begin_time", "begin"),
        ("memory_per_cpu", "mem_per_cpu"),
    ],
)
def test_a_misspelt_key_names_the_nearest_one(typo: str, meant: str) -> None:
    with pytest.raises(ResourceError, match=f"did you mean '{meant}'"):
        Resources.from_mapping({typo: 1})


# -- Slurm --------------------------------------------------------------------------


def test_sbatch_gets_every_site_key() -> None:
    begin = "2030-01-02T03:04:05"
    argv = commands.sbatch_argv(
        slurm_spec(
            gpus_per_node=2,
            gpus_per_task=1,
            gres="shard:1",
            mem_per_cpu="2G",
            exclusive=True,
            reservation="maint",
            signal="USR1@90",
            requeue=False,
            begin=begin,
        )
    )
    for flag in (
        "--gpus-per-node=2",
        "--gpus-per-task=1",
        "--gres=shard:1",
        "--mem-per-cpu=2G",
        "--exclusive",
        "--reservation=maint",
        "--signal=USR1@90",
        "--no-requeue",
        f"--begin={begin}",
    ):
        assert flag in argv
    assert argv[-1] == "/j/.hpcbridge/t.sh"


def test_sbatch_leaves_out_what_was_not_asked() -> None:
    argv = commands.sbatch_argv(slurm_spec(gpus_per_node=0, exclusive=False))
    assert not [flag for flag in argv if "gpus" in flag or "exclusive" in flag or "requeue" in flag]
    assert "--requeue" in commands.sbatch_argv(slurm_spec(requeue=True))


def test_pyslurm_gets_every_site_key() -> None:
    kwargs: Dict[str, Any] = submit_description_kwargs(
        slurm_spec(
            gpus_per_node=2,
            gpus_per_task=1,
            gres="shard",
            mem_per_cpu="2G",
            exclusive=True,
            reservation="maint",
            signal="USR1@90",
            requeue=True,
            begin="2030-01-02T03:04:05",
        )
    )
    assert kwargs["gpus_per_task"] == 1
    assert kwargs["gres_per_node"] == {"shard": 1, "gpu": 2}
    assert kwargs["memory_per_cpu"] == "2G"
    assert kwargs["resource_sharing"] == "exclusive"
    assert kwargs["reservations"] == ["maint"]
    assert kwargs["signal"] == {"signal": 10, "time": 90}
    assert kwargs["is_requeueable"] is True
    assert kwargs["begin_time"] == int(datetime(2030, 1, 2, 3, 4, 5).timestamp())


def test_gres_counts_are_pyslurms_form() -> None:
    assert gres_counts("gpu:a100:2,shard", None) == {"gpu:a100": 2, "shard": 1}
    assert gres_counts(None, None) is None


# -- Flux ---------------------------------------------------------------------------


@pytest.mark.parametrize("key, value", [("gres", "gpu:1"), ("reservation", "maint")])
def test_flux_refuses_what_it_has_no_notion_of(key: str, value: str) -> None:
    with pytest.raises(ResourceError, match="nothing was submitted") as raised:
        flux_request(**{key: value})
    assert raised.value.key == key


@pytest.mark.parametrize(
    "asked, per_slot",
    [
        ({"nodes": 1, "gpus_per_node": 2}, 2),
        ({"nodes": 2, "ntasks": 4, "gpus_per_node": 2}, 1),
        ({"nodes": 2, "ntasks": 4, "gpus_per_node": 2, "gpus_per_task": 1}, 1),
    ],
)
def test_flux_shares_a_nodes_gpus_among_its_slots(asked: Dict[str, int], per_slot: int) -> None:
    assert flux_request(POLICY_0_88, **asked).gpus_per_slot == per_slot


@pytest.mark.parametrize(
    "asked, said",
    [
        ({"gpus_per_node": 2}, "give nodes too"),
        ({"nodes": 2, "ntasks": 3, "gpus_per_node": 2}, "no whole number per slot"),
        ({"nodes": 1, "ntasks": 4, "gpus_per_node": 2}, "no whole number per slot"),
        (
            {"nodes": 1, "gpus_per_node": 2, "gpus": 1},
            "gpus=1, gpus_per_node=2 .per slot. disagree",
        ),
    ],
)
def test_flux_refuses_gpus_per_node_it_cannot_share_evenly(
    asked: Dict[str, int], said: str
) -> None:
    with pytest.raises(ResourceError, match=said):
        flux_request(POLICY_0_88, **asked)


def test_flux_gets_exclusive_begin_and_signal_where_the_release_has_them() -> None:
    begin = "2027-01-02T03:04:05"
    asked = {"nodes": 1, "exclusive": True, "begin": begin, "signal": "USR2@90", "time": "5"}
    newest = flux_request(POLICY_0_88, **asked)
    epoch = datetime.fromisoformat(begin).timestamp()
    assert newest.exclusive and newest.begin == epoch and newest.signal == (12, 90.0)
    argv = submit_argv("flux", POLICY_0_88, newest)
    assert "--exclusive" in argv and f"--dependency=begin-time:{epoch}" in argv
    assert "--setattr=system.shell.options.signal.signum=12" in argv
    assert "--setattr=system.shell.options.signal.timeleft=90.0" in argv
    params = jobspec.jobspec_params(newest)
    assert params["exclusive"] and params["begin"] == epoch and params["signal"] == [12, 90.0]
    # 0.49's shell ignores the signal option: dropped, said; nothing else is.
    older = flux_request(POLICY_0_49, **asked)
    assert older.exclusive and older.begin == epoch and older.signal is None
    oldest = flux_request(POLICY_0_26, **asked)
    assert not oldest.exclusive and oldest.begin is None and oldest.signal is None


def test_flux_takes_a_signal_without_seconds_as_sixty_before_the_limit() -> None:
    assert flux_request(POLICY_0_88, signal="USR1", time="5").signal == (10, 60.0)


def test_flux_exclusive_needs_nodes() -> None:
    with pytest.raises(ResourceError, match="give nodes too") as raised:
        flux_request(POLICY_0_88, exclusive=True)
    assert raised.value.key == "exclusive"


def test_flux_says_once_what_a_release_drops(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hpcbridge"):
        flux_request(POLICY_0_26, begin="2027-03-04T05:06:07")
        flux_request(POLICY_0_26, begin="2027-03-04T05:06:07")
    assert caplog.text.count("has no begin") == 1


def test_flux_drops_memory_per_cpu_and_requeue_saying_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hpcbridge"):
        made = flux_request(mem_per_cpu="1G", requeue=True, exclusive=False)
    assert made.gpus_per_slot == 0
    said = caplog.text
    assert "mem_per_cpu=1024M dropped" in said or "mem_per_cpu=1G dropped" in said
    assert "requeue=True dropped" in said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hpcbridge"):
        flux_request(requeue=False)  # what Flux does anyway: nothing to say
    assert "requeue" not in caplog.text


@pytest.mark.parametrize("policy", [POLICY_0_26, POLICY_0_49])
def test_flux_gpus_per_task_is_its_gpus_per_slot(policy: Any) -> None:
    assert flux_request(policy, gpus_per_task=2, ntasks=2).gpus_per_slot == 2
    assert flux_request(policy, gpus=2, gpus_per_task=2).gpus_per_slot == 2
    with pytest.raises(ResourceError, match="disagree"):
        flux_request(policy, gpus=1, gpus_per_task=2)


# -- the command and the settings -----------------------------------------------------


def test_the_command_takes_every_site_key() -> None:
    args = build_parser().parse_args(
        [
            "submit",
            "x.sh",
            "--gpus-per-node",
            "2",
            "--gpus-per-task",
            "1",
            "--gres",
            "shard:1",
            "--mem-per-cpu",
            "1G",
            "--exclusive",
            "--reservation",
            "maint",
            "--signal",
            "USR1@60",
            "--no-requeue",
            "--begin",
            "now+1h",
        ]
    )
    asked = {key: getattr(args, key) for key in SITE_KEYS if key != "native"}
    assert asked["exclusive"] is True and asked["requeue"] is False
    resources = Resources.from_mapping(asked)
    assert resources.gpus_per_node == 2 and resources.signal == "USR1@60"
    assert build_parser().parse_args(["submit", "x.sh", "--requeue"]).requeue is True
    assert build_parser().parse_args(["submit", "x.sh"]).exclusive is None


def test_the_settings_give_defaults_for_the_site_keys() -> None:
    settings = Settings.from_env(
        env={"HPCBRIDGE_EXCLUSIVE": "yes", "HPCBRIDGE_SIGNAL": "USR1@30", "HPCBRIDGE_REQUEUE": "0"}
    )
    resources = Resources.from_mapping({}, settings.resource_defaults)
    assert (resources.exclusive, resources.signal, resources.requeue) == (True, "USR1@30", False)
    with pytest.raises(ResourceError, match="HPCBRIDGE_GRES"):
        Resources.from_mapping(
            {},
            Settings.from_env(env={"HPCBRIDGE_GRES": "gpu 1"}).resource_defaults,
            {"gres": "HPCBRIDGE_GRES"},
        )


def test_doctor_says_which_keys_each_scheduler_sends_drops_and_refuses() -> None:
    slurm = resource_keys_check(scheduler_entry("slurm"))
    flux = resource_keys_check(scheduler_entry("flux"))
    assert slurm is not None and flux is not None
    assert "refuses" not in slurm.detail and "drops" not in slurm.detail
    assert "signal" in slurm.detail
    assert "drops requeue (Flux does not requeue jobs)" in flux.detail
    assert "refuses gres (Flux has no generic resources" in flux.detail
    assert "gpus_per_task" in flux.detail.split(";")[0]
    assert "mem_per_cpu" not in flux.detail.split(";")[0]


def test_b_signals_the_script_through_the_wrapper_on_slurm_and_is_refused_by_flux() -> None:
    assert slurm_spec(signal="B:USR1@60", time="5").resources.signal == "B:USR1@60"
    assert "--signal=B:USR1@60" in commands.sbatch_argv(slurm_spec(signal="B:USR1@60"))
    kwargs = submit_description_kwargs(slurm_spec(signal="B:USR1@60"))
    assert kwargs["signal"] == {"signal": 10, "time": 60, "batch_only": True}
    assert signal_forwarded("B:USR1@60") == "USR1" and signal_forwarded("USR1@60") is None
    with pytest.raises(ResourceError, match="without B:"):
        flux_request(POLICY_0_88, signal="B:USR1@60", time="5")
