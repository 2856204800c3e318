"""Property tests of Flux's pure builders and parsers (flux/status.py, command_line.py,
instance.py, jobspec.py): job ids round trip through every encoding; ``flux jobs`` output
gives facts or the ValueError/KeyError its caller reads as "cannot parse"; an eventlog,
``flux submit`` and the bulk helper's output of any text never raise another exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hpcbridge.engine.driver import SubmitBatch
from hpcbridge.engine.jobscript import PreparedJob
from hpcbridge.errors import ConfigurationError, ResourceError
from hpcbridge.model import JobState
from hpcbridge.resources import Resources, parse_duration
from hpcbridge.schedulers.flux import answers, instance, instance_answers, jobspec, planning, status
from hpcbridge.schedulers.flux import commands as flux_commands
from hpcbridge.schedulers.flux import ids as flux_ids
from hpcbridge.schedulers.flux import options as flux_options
from hpcbridge.schedulers.flux.bulk_helper import constraint_parser
from hpcbridge.schedulers.flux.jobspec import F58_PREFIX, f58

SETTINGS = settings(max_examples=60, deadline=None)

_job_ids = st.integers(min_value=0, max_value=2**64 - 1)

#: JSON values of any shape, for documents whose fields may hold anything
_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False),
        st.text(max_size=8),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_FIELDS = ["id", "state", "result", "returncode", "waitstatus", "t_submit", "t_run", "t_cleanup"]
_FIELDS += ["t_inactive", "exception", "dependencies", "annotations", "expiration", "uri", "jobs"]
_job_documents = st.dictionaries(
    st.sampled_from(_FIELDS), st.one_of(_json, _job_ids, st.just(float("inf"))), max_size=8
)


# -- job ids ---------------------------------------------------------------------------


@SETTINGS
@given(_job_ids)
def test_job_id_round_trips_through_every_encoding(value: int) -> None:
    canonical = f58(value)
    hexed = f"{value:016x}"
    forms = [value, str(value), hex(value), canonical, "f" + canonical[len(F58_PREFIX) :]]
    forms.append(".".join(hexed[at : at + 4] for at in range(0, 16, 4)))
    for form in forms:
        assert flux_ids.parse_job_id(form) == value
        assert flux_ids.canonical_job_id(form) == canonical
        assert flux_ids.decimal_job_id(form) == str(value)
    assert flux_ids.decode_f58(flux_ids.encode_f58(value)) == value


@SETTINGS
@given(st.one_of(st.text(max_size=20), st.integers(-(2**70), 2**70)))
@example("²")
@example(" ²³ ")
def test_any_text_is_a_job_id_or_an_invalid_job_id_error(text: object) -> None:
    try:
        value = flux_ids.parse_job_id(text)
    except flux_ids.InvalidJobIdError:
        assert flux_ids.is_job_id(text) is False
        return
    assert 0 <= value < 2**64 and flux_ids.is_job_id(text) is True


# -- flux jobs, eventlogs ---------------------------------------------------------------


def _parsed_or_refused(parse, text: str) -> list:  # type: ignore[no-untyped-def]
    """``flux jobs`` parsers: facts, or what cli_driver._from_listing catches."""
    try:
        return parse(text)
    except (ValueError, KeyError):
        return []


@SETTINGS
@given(st.one_of(st.text(max_size=60), _job_documents.map(json.dumps)))
@example('{"id": 1, "returncode": 1e400}')
@example('{"id": 1, "exception": "cancel"}')
@example(json.dumps({"id": 0, "t_run": float("inf")}))
@example(json.dumps({"id": 0, "t_run": -62135596801}))
@example('{"jobs": ["x"]}')
def test_flux_jobs_json_of_any_text_gives_facts_or_a_value_error(text: str) -> None:
    for facts in _parsed_or_refused(status.parse_jobs_json, text):
        assert isinstance(status.status_from_facts(facts).state, JobState)


@SETTINGS
@given(_job_documents)
@example({"id": 5, "returncode": float("inf")})
def test_flux_jobs_documents_of_any_shape_give_facts_or_a_value_error(document: dict) -> None:
    text = json.dumps({"jobs": [document]})
    for facts in _parsed_or_refused(status.parse_jobs_json, text):
        assert isinstance(status.status_from_facts(facts).state, JobState)


_FORMAT_CELL = st.one_of(
    st.sampled_from(["", "0", "0.0", "12", "1.5", "inf", "nan", "RUN", "INACTIVE", "²", "-3"]),
    st.text(max_size=5),
)


@SETTINGS
@given(
    st.lists(
        st.lists(_FORMAT_CELL, min_size=1, max_size=len(status.JOBS_FORMAT_FIELDS) + 1).map(
            "|".join
        ),
        max_size=4,
    ).map("\n".join)
)
@example("5|INACTIVE|FAILED|inf|0|1|2|3|4||")
@example("²|RUN|||||||||")
def test_flux_jobs_format_of_any_text_gives_facts_or_a_value_error(text: str) -> None:
    for facts in _parsed_or_refused(status.parse_jobs_format, text):
        assert isinstance(status.status_from_facts(facts).state, JobState)


_EVENT_NAMES = st.sampled_from(
    ["submit", "validate", "depend", "dependency-add", "priority", "alloc", "start"]
    + ["exception", "finish", "clean", "release", "free"]
)
_events = st.fixed_dictionaries(
    {"name": _EVENT_NAMES},
    optional={
        "timestamp": st.one_of(st.floats(allow_nan=False), st.text(max_size=4), st.none()),
        "context": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "severity": st.one_of(st.integers(-1, 7), st.text(max_size=3), _json),
                    "status": st.one_of(st.integers(0, 65535), st.just(1e400), _json),
                    "type": _json,
                    "note": _json,
                    "description": _json,
                },
            ),
            _json,
        ),
    },
)


@SETTINGS
@given(
    _job_ids,
    st.lists(
        st.one_of(_events.map(json.dumps), st.text(max_size=20), _json.map(json.dumps)), max_size=8
    ),
)
@example(1, ['{"name": "exception", "context": {"severity": "x"}}'])
@example(1, ['{"name": "exception", "context": {"severity": null}}'])
@example(1, ['{"name": "dependency-add", "context": [1]}'])
@example(1, ['{"name": "finish", "context": {"status": 1e400}}', '{"name": "clean"}'])
def test_eventlog_of_any_text_gives_facts(job_id: int, lines: list) -> None:
    facts = status.parse_eventlog(str(job_id), "\n".join(lines))
    assert facts.id == f58(job_id)
    assert isinstance(status.status_from_facts(facts).state, JobState)


@SETTINGS
@given(
    st.lists(
        st.sampled_from(["submit", "depend", "priority", "alloc", "start", "finish", "clean"]),
        max_size=7,
    ),
    st.integers(0, 255),
)
def test_eventlog_in_flux_order_settles_like_flux_jobs(names: list, code: int) -> None:
    """Events in the order Flux writes them: an ended job's result follows its wait status."""
    order = ["submit", "depend", "priority", "alloc", "start", "finish", "clean"]
    lines = []
    for at, name in enumerate(sorted(set(names), key=order.index)):
        context = {"status": code << 8} if name == "finish" else {}
        lines.append(json.dumps({"name": name, "timestamp": 100.0 + at, "context": context}))
    facts = status.parse_eventlog("1", "\n".join(lines))
    if "clean" in names and "finish" in names:
        assert facts.returncode == code
        assert facts.result == ("COMPLETED" if code == 0 else "FAILED")


# -- flux submit, the bulk helper, recent jobs, jobspecs -----------------------------


@SETTINGS
@given(_job_ids, st.text(max_size=30))
def test_submit_output_round_trips(value: int, noise: str) -> None:
    """The last line that is a job id is the job's: warnings may come before it."""
    assert answers.parse_submit_output(f"{noise}\n{f58(value)}\n") == f58(value)
    if not any(flux_ids.is_job_id(line) for line in noise.splitlines()):
        assert answers.parse_submit_output(f"{value}\n{noise}") == f58(value)


@SETTINGS
@given(st.text(max_size=60))
@example("²")
def test_submit_output_of_any_text_is_an_id_or_a_value_error(text: str) -> None:
    try:
        job_id = answers.parse_submit_output(text)
    except ValueError:
        return
    assert flux_ids.is_job_id(job_id)


@SETTINGS
@given(
    st.lists(
        st.one_of(
            _job_ids.map(lambda v: f"OK {v}"),
            st.text(max_size=15).map(lambda t: "ERR " + t.replace("\n", " ").replace("\r", " ")),
        ),
        max_size=6,
    )
)
def test_bulk_output_round_trips(lines: list) -> None:
    outcomes = answers.parse_bulk_output("\n".join(lines))
    assert len(outcomes) == len(lines)
    for line, (ok, text) in zip(lines, outcomes):
        assert ok == line.startswith("OK ")
        if ok:
            assert text == f58(int(line[3:]))


@SETTINGS
@given(st.text(max_size=60))
@example("OK ²")
def test_bulk_output_of_any_text_gives_outcomes_or_a_value_error(text: str) -> None:
    try:
        answers.parse_bulk_output(text)
    except ValueError:
        pass


@SETTINGS
@given(st.lists(st.tuples(_job_ids, st.floats(0, 2e9)), max_size=6), st.floats(0, 2e9))
def test_recent_jobs_round_trip(rows: list, since: float) -> None:
    text = "\n".join(f"{value} {stamp!r}" for value, stamp in rows)
    found = answers.parse_recent_jobs(text, since)
    assert set(found) == {f58(value) for value, stamp in rows if stamp >= since}


@SETTINGS
@given(st.text(max_size=60))
@example("² 1.0")
def test_recent_jobs_of_any_text_give_ids(text: str) -> None:
    assert all(flux_ids.is_job_id(job_id) for job_id in answers.parse_recent_jobs(text, 0.0))


@SETTINGS
@given(st.one_of(st.text(max_size=40), _json.map(json.dumps)))
def test_key_of_any_jobspec_text_is_a_key_none_or_a_value_error(text: str) -> None:
    try:
        key = answers.key_of_jobspec(text)
    except ValueError:
        return
    assert key is None or isinstance(key, str)


@SETTINGS
@given(st.one_of(st.text(max_size=40), _json.map(json.dumps)), _job_ids)
def test_output_path_of_any_jobspec_text_is_a_path_or_none(text: str, value: int) -> None:
    path = answers.output_path_from_jobspec(text, str(value))
    assert path is None or isinstance(path, str)


# -- resource keys as flux submit's flags, and back --------------------------------------

_names = st.from_regex(r"[A-Za-z0-9_.-]{1,10}", fullmatch=True)
_flux_requests = st.fixed_dictionaries(
    {},
    optional={
        "time": st.integers(1, 10 * 365 * 86400).map(lambda seconds: f"{seconds}s"),
        "nodes": st.integers(1, 64),
        "ntasks": st.integers(1, 512),
        "cpus_per_task": st.integers(1, 64),
        "gpus_per_task": st.integers(0, 8),
        "account": _names,
        "constraint": _names,
        "exclusive": st.booleans(),
    },
)


@SETTINGS
@given(_flux_requests, st.one_of(st.none(), _names), st.sampled_from(instance.POLICIES))
def test_resource_keys_reach_flux_as_its_flags(request: dict, queue: object, policy) -> None:  # type: ignore[no-untyped-def]
    resources = Resources.from_mapping(request)
    job = PreparedJob("t", "/j", "/j/.hpcbridge/w.sh", "/j/w.exit", ["/j/x.sh"], "train")
    batch = SubmitBatch(job, 1, resources, (), "/j/flux-{{id}}.out")
    try:
        made = planning.translate(batch, queue, policy)  # type: ignore[arg-type]
    except ResourceError:
        assert resources.exclusive and not resources.nodes
        return
    argv = flux_commands.submit_argv("flux", policy, made)
    short = {word[:2]: word[2:] for word in argv if word[:2] in ("-n", "-N", "-c", "-g", "-t")}
    long = dict(word.split("=", 1) for word in argv if word.startswith("--") and "=" in word)
    assert int(short["-n"]) == resources.slots
    assert int(short.get("-N", 0)) == (resources.nodes or 0)
    assert int(short.get("-c", 1)) == (resources.cpus_per_task or 1)
    assert int(short.get("-g", 0)) == (resources.gpus_per_task or 0)
    assert ("-t" in short and parse_duration(short["-t"])) == (resources.time or False)
    assert long.get("--queue") == queue
    banks = [word.partition("=system.bank=")[2] for word in argv if "=system.bank=" in word]
    assert banks == ([resources.account] if resources.account else [])
    assert long.get("--requires") == (resources.constraint if policy.constraints else None)
    exclusive = bool(resources.exclusive and policy.exclusive)
    assert ("--exclusive" in argv) == exclusive
    assert argv[-1] == "/j/.hpcbridge/w.sh"


# -- the instance ------------------------------------------------------------------------


@SETTINGS
@given(
    st.lists(st.integers(0, 999), min_size=1, max_size=3), st.sampled_from(["", "v", "flux-core "])
)
def test_version_round_trips(parts: list, prefix: str) -> None:
    text = ".".join(map(str, parts))
    assert instance.parse_version(prefix + text + "-12-g3d9c") == instance.parse_version(text)
    assert str(instance.parse_version(text)).split(".")[: len(parts)] == [str(p) for p in parts]


@SETTINGS
@given(st.text(max_size=40))
@example("²")
def test_version_of_any_text_is_a_version_or_a_value_error(text: str) -> None:
    try:
        instance.parse_version(text)
    except ValueError:
        return


@SETTINGS
@given(st.text(max_size=80))
def test_queue_list_of_any_text_is_queues_or_a_value_error(text: str) -> None:
    try:
        info = instance.parse_queue_list(text)
    except ValueError:
        return
    assert all(isinstance(name, str) for name in info.names)


@SETTINGS
@given(st.one_of(st.text(max_size=40), _json.map(json.dumps)))
def test_config_json_of_any_text_is_queues_or_a_value_error(text: str) -> None:
    try:
        info = instance.parse_config_json(text)
    except ValueError:
        return
    assert info.default is None or isinstance(info.default, str)


@SETTINGS
@given(st.text(max_size=80))
def test_flux_version_output_of_any_text_is_a_dict(text: str) -> None:
    assert isinstance(instance.parse_flux_version_output(text), dict)


@pytest.mark.parametrize("name", ["0.26", "0.49.0", "latest", "0.88"])
def test_policy_names(name: str) -> None:
    assert instance.policy_by_name(name) in instance.POLICIES


# -- R documents, flux-accounting, messages ------------------------------------------------

_idsets = st.lists(st.tuples(st.integers(0, 50), st.integers(0, 5)), min_size=1, max_size=3)


def _idset(ranges: list) -> str:
    return ",".join(f"{low}-{low + more}" if more else f"{low}" for low, more in ranges)


@SETTINGS
@given(st.lists(st.tuples(_idsets, _idsets), max_size=3), st.floats(0, 2e9))
def test_r_documents_round_trip(entries: list, expiration: float) -> None:
    r_lite = [
        {"rank": _idset(ranks), "children": {"core": _idset(cores)}} for ranks, cores in entries
    ]
    text = json.dumps({"version": 1, "execution": {"R_lite": r_lite, "expiration": expiration}})
    size = lambda ranges: sum(more + 1 for _, more in ranges)  # noqa: E731
    assert instance_answers.parse_cores(text) == sum(size(r) * size(c) for r, c in entries)
    assert instance_answers.parse_expiration(text) == (expiration or None)


_RESOURCE_STATES = st.sampled_from(["free", "allocated", "down"])


@SETTINGS
@given(st.lists(st.tuples(_RESOURCE_STATES, st.integers(0, 4096)), max_size=6))
def test_resource_list_round_trips(rows: list) -> None:
    """``flux resource list --format={state} {ncores}``: the cores up (free, allocated) and all."""
    text = "".join(f"{state} {cores}\n" for state, cores in rows)
    up = sum(cores for state, cores in rows if state != "down")
    assert instance_answers.parse_capacity(text) == (up, sum(cores for _, cores in rows))


@SETTINGS
@given(st.text(max_size=60))
@example("free\n")
@example("down -1\n")
def test_resource_list_of_any_text_is_a_capacity_or_a_value_error(text: str) -> None:
    try:
        up, total = instance_answers.parse_capacity(text)
    except ValueError:
        return
    assert 0 <= up <= total


@SETTINGS
@given(
    st.one_of(
        st.text(max_size=40),
        _json.map(json.dumps),
        _job_documents.map(lambda d: json.dumps({"execution": d})),
    )
)
@example('{"execution": {"R_lite": [{"rank": "a-b"}]}}')
@example('{"execution": {"R_lite": [1]}}')
@example('{"execution": {"expiration": "x"}}')
@example("[1]")
def test_any_r_document_is_a_value_or_a_value_error(text: str) -> None:
    for parse in (instance_answers.parse_cores, instance_answers.parse_expiration):
        try:
            parse(text)
        except ValueError:
            pass


@SETTINGS
@given(st.one_of(st.text(max_size=60), _json.map(json.dumps)))
@example('[{"active": 1}]')
@example("[1]")
def test_any_account_output_is_banks_or_an_error_the_caller_reads(text: str) -> None:
    try:
        banks = instance_answers.parse_account_user(text)
    except (ValueError, KeyError, TypeError):  # commands.associations: "cannot be read"
        return
    assert all(isinstance(bank.bank, str) for bank in banks)


@SETTINGS
@given(st.text(max_size=80))
def test_any_flux_output_gives_a_message_and_a_uri_or_none(text: str) -> None:
    assert isinstance(answers.scheduler_message(text), str)
    uri = instance_answers.parse_uri_output(text)
    assert uri is None or uri.strip() == uri


# -- native options: what a dry run's jobspec shows, and the policy a name picks ------------

_BARE = {
    "resources": [{"type": "slot", "count": 1}],
    "tasks": [{"command": ["true"]}],
    "attributes": {"system": {"duration": 0, "cwd": "/j", "environment": {}}},
    "version": 1,
}
_leaf_paths = st.lists(
    st.tuples(
        st.sampled_from(["system", "user"]),
        st.from_regex(r"[a-z]{1,5}(\.[a-z]{1,5}){0,2}", fullmatch=True),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda pair: pair[1].split(".")[0],
)
_leaf_values = st.one_of(
    st.integers(-5, 5), st.text(max_size=5), st.booleans(), st.lists(st.integers(0, 3), max_size=2)
)


@SETTINGS
@given(_leaf_paths, st.data())
def test_native_attributes_round_trip_through_a_jobspec(paths: list, data) -> None:  # type: ignore[no-untyped-def]
    given_spec = json.loads(json.dumps(_BARE))
    expected = {}
    for top, path in paths:
        words = [top, *("hpcb" + word for word in path.split("."))]
        value = data.draw(_leaf_values)
        node = given_spec["attributes"]
        for word in words[:-1]:
            node = node.setdefault(word, {})
        node[words[-1]] = value
        expected[".".join(words)] = value
    changed = flux_options.option_attributes(
        "--setattr=x", json.dumps(_BARE), json.dumps(given_spec)
    )
    assert dict(changed) == expected


@SETTINGS
@given(_json, _json)
@example({"attributes": {"system": {"queue": "q"}}}, {"attributes": {"system": {"queue": "r"}}})
@example({}, {"attributes": {"user": 1}})
@example({}, {"attributes": [1]})
@example([], {})
def test_any_dry_run_jobspecs_give_attributes_or_a_resource_error(bare, given_spec) -> None:  # type: ignore[no-untyped-def]
    try:
        flux_options.option_attributes("--x", json.dumps(bare), json.dumps(given_spec))
    except ResourceError:
        pass


@SETTINGS
@given(st.text(max_size=12))
@example("0.9")
@example("²")
def test_any_adapter_version_name_is_a_policy_or_a_configuration_error(name: str) -> None:
    try:
        policy = instance.policy_by_name(name)
    except ConfigurationError:
        return
    assert policy in instance.POLICIES


@SETTINGS
@given(st.text(max_size=20))
@example("\xa0")  # flux's lexer refuses it with its ConstraintSyntaxError, no ValueError
def test_any_constraint_text_is_a_constraint_or_a_value_error(text: str) -> None:
    try:
        jobspec.parse_constraint(text, constraint_parser())
    except ValueError:
        pass


@SETTINGS
@given(st.text(max_size=30))
@example("flux-batch: warning: something\n{}")
def test_any_dry_run_output_gives_attributes_or_a_resource_error(text: str) -> None:
    try:
        flux_options.option_attributes("--x", json.dumps(_BARE), text)
    except ResourceError:
        pass
