"""Property tests of Slurm's pure builders and parsers (slurm/ids.py, status.py, queries.py,
commands.py):
ids and array specs round trip; squeue, sacct, sbatch, scontrol and sacctmgr output of any
text gives a parsed value (or the documented ValueError), never another exception."""

from __future__ import annotations

import shlex
from datetime import datetime, timezone

from hypothesis import example, given, settings
from hypothesis import strategies as st

from hpcbridge.errors import JobSubmissionError
from hpcbridge.model import JobState, JobStatus
from hpcbridge.schedulers.slurm import cluster as slurm_cluster
from hpcbridge.schedulers.slurm import commands, ids, queries, status

SETTINGS = settings(max_examples=60, deadline=None)

#: text a real squeue/sacct row is made of, plus what only a broken or odd one holds
_CELL_CHARS = st.sampled_from(list("0123456789_[]-%:,;|() \tABCDEFGHINOPRSTUabc+.²٣\x00"))
_CELL = st.text(_CELL_CHARS, max_size=12)
_ANY_TEXT = st.one_of(st.text(max_size=80), st.lists(_CELL, max_size=10).map("|".join))
_ANY_OUTPUT = st.lists(_ANY_TEXT, max_size=6).map("\n".join)
_ids = st.integers(min_value=1, max_value=10**9)


# -- ids and array specs -------------------------------------------------------------


@SETTINGS
@given(_ids, st.one_of(st.none(), st.integers(0, 10**6)), st.sampled_from(["", ";cluster"]))
def test_job_id_round_trips(base: int, task: object, cluster: str) -> None:
    typed = f"{base}" if task is None else f"{base}_{task}"
    assert ids.job_id_of(f" {typed}{cluster} ") == typed
    assert ids.split_job_id(typed) == (str(base), task)
    assert ids.expand_job_id(typed + cluster) == [typed]


@SETTINGS
@given(st.text(max_size=30))
@example("²")
def test_job_id_of_any_text_is_an_id_or_a_value_error(text: str) -> None:
    try:
        job_id = ids.job_id_of(text)
    except ValueError:
        return
    base, task = ids.split_job_id(job_id)
    assert int(base) >= 0 and (task is None or task >= 0)


#: (first, last, step) items of an array spec
_items = st.lists(
    st.tuples(st.integers(0, 2000), st.integers(0, 50), st.integers(1, 7)), min_size=1, max_size=6
)


@SETTINGS
@given(_items, st.one_of(st.none(), st.integers(1, 20)), st.booleans())
def test_array_spec_round_trips(items: list, throttle: object, bracketed: bool) -> None:
    words: list = []
    expected: list = []
    for first, length, step in items:
        last = first + length
        words.append(f"{first}-{last}:{step}" if length else f"{first}")
        expected.extend(range(first, last + 1, step) if length else [first])
    spec = ",".join(words) + (f"%{throttle}" if throttle else "")
    spec = f"[{spec}]" if bracketed else spec
    assert ids.expand_array_spec(spec) == expected
    assert ids.expand_job_id(f"77_[{spec.strip('[]')}]") == [f"77_{i}" for i in expected]


@SETTINGS
@given(st.text(max_size=40))
def test_array_spec_of_any_text_is_a_list_of_indices(spec: str) -> None:
    indices = ids.expand_array_spec(spec)
    assert all(isinstance(index, int) and index >= 0 for index in indices)


@SETTINGS
@given(
    st.lists(
        st.tuples(_ids, st.one_of(st.none(), st.integers(0, 100))).map(
            lambda pair: f"{pair[0]}" if pair[1] is None else f"{pair[0]}_{pair[1]}"
        ),
        max_size=30,
    ),
    st.integers(1, 10),
)
def test_job_list_names_every_id_once(job_ids: list, collapse_over: int) -> None:
    listed = ids.job_list(job_ids, collapse_over)
    assert len(listed) == len(set(listed))
    for job_id in job_ids:
        base, _ = ids.split_job_id(job_id)
        assert job_id in listed or base in listed


# -- states, exit codes, times -------------------------------------------------------


@SETTINGS
@given(st.text(max_size=20))
@example("²")
@example("1²")
def test_exit_code_parsers_give_a_code_or_none(text: str) -> None:
    for parse in (status.parse_exit_code, status.parse_wait_status):
        code = parse(text)
        assert code is None or 0 <= code


@SETTINGS
@given(st.text(max_size=40))
def test_parse_time_gives_an_aware_time_or_none(text: str) -> None:
    moment = status.parse_time(text, timezone.utc)
    assert moment is None or moment.tzinfo is not None


# -- squeue and sacct output ---------------------------------------------------------


@SETTINGS
@given(_ANY_OUTPUT)
@example("1_[²]|1|PENDING|None|N/A|N/A|0|")
@example("5|5|COMPLETED|None|2026-01-01T00:00:00|2026-01-01T00:01:00|²|")
def test_squeue_output_of_any_text_parses(text: str) -> None:
    found = status.parse_squeue(text, zone=timezone.utc)
    assert all(isinstance(one, JobStatus) for one in found.values())
    assert isinstance(queries.parse_squeue_states(text), dict)


@SETTINGS
@given(_ANY_OUTPUT, st.lists(st.sampled_from(["1", "1_0", "1_2", "12_3"]), max_size=3))
@example("7|7|FAILED|²|Unknown|Unknown|", ["7_1"])
def test_sacct_output_of_any_text_parses(text: str, wanted: list) -> None:
    found = status.parse_sacct(text, zone=timezone.utc, wanted=wanted)
    assert all(isinstance(one, JobStatus) for one in found.values())


_STATE_WORDS = st.sampled_from(sorted(status.STATE_MAP) + sorted(status.COMPACT_STATES))


@SETTINGS
@given(
    st.lists(st.tuples(_ids, st.one_of(st.none(), st.integers(0, 50)), _STATE_WORDS), max_size=8),
    st.integers(0, 255),
)
def test_squeue_rows_round_trip(rows: list, code: int) -> None:
    """Rows built as squeue_argv's --Format prints them come back by id, with their state."""
    lines, expected = [], {}
    for base, task, word in rows:
        job_id = f"{base}" if task is None else f"{base}_{task}"
        cells = [job_id, str(base), word, "None", "N/A", "N/A", str(code << 8)]
        lines.append("|".join(cells) + "|")
        expected[job_id] = status.map_state(word)
    found = status.parse_squeue("\n".join(lines), zone=timezone.utc)
    for job_id, state in expected.items():
        assert found[job_id].state is state
        if state.is_terminal and state is not JobState.CANCELLED:
            assert found[job_id].exit_code == code


@SETTINGS
@given(_ANY_OUTPUT, st.text(max_size=10))
def test_key_rows_of_any_text_give_an_id_or_none(text: str, key: str) -> None:
    found = queries.parse_key_rows(text, key)
    assert found is None or isinstance(found, str)


# -- sbatch, scontrol, sacctmgr ------------------------------------------------------


@SETTINGS
@given(_ids, st.one_of(st.none(), st.integers(0, 100)), st.sampled_from(["", ";c1"]), st.booleans())
def test_sbatch_id_round_trips(base: int, task: object, cluster: str, parsable: bool) -> None:
    job_id = f"{base}" if task is None else f"{base}_{task}"
    if parsable:
        stdout = f"sbatch: warning: something\n{job_id}{cluster}\n"
    else:
        job_id = str(base)
        stdout = f"Submitted batch job {base}\n"
    assert commands.parse_sbatch_id(stdout) == job_id


@SETTINGS
@given(_ANY_OUTPUT)
def test_sbatch_output_of_any_text_is_an_id_or_a_value_error(text: str) -> None:
    try:
        job_id = commands.parse_sbatch_id(text)
    except ValueError:
        return
    assert ids.job_id_of(job_id) == job_id


@SETTINGS
@given(_ANY_OUTPUT)
def test_scontrol_output_of_any_text_parses(text: str) -> None:
    record = slurm_cluster.parse_scontrol_record(text)
    config = slurm_cluster.parse_scontrol_config(text)
    assert isinstance(record, dict) and isinstance(config, dict)
    assert slurm_cluster.max_array_size(config) >= 0
    output = slurm_cluster.output_of_record(record)
    assert output is None or isinstance(output, str)


@SETTINGS
@given(
    st.dictionaries(
        st.from_regex(r"[A-Z][A-Za-z]{0,8}", fullmatch=True),
        st.from_regex(r"[!-~]{0,10}", fullmatch=True),
        max_size=6,
    )
)
def test_scontrol_record_round_trips(fields: dict) -> None:
    text = " ".join(f"{name}={value}" for name, value in fields.items())
    assert slurm_cluster.parse_scontrol_record(text) == fields


@SETTINGS
@given(_ANY_OUTPUT, st.one_of(st.none(), st.just("c1")), st.one_of(st.none(), st.just("a")))
@example("c1|a|²|5|normal|normal", "c1", None)
def test_sacctmgr_output_of_any_text_parses(text: str, cluster: object, account: object) -> None:
    caps, qos_names = slurm_cluster.parse_assoc(text, cluster, account)  # type: ignore[arg-type]
    assert all(isinstance(cap, int) for cap in caps)
    assert all(isinstance(cap, int) for cap in slurm_cluster.parse_qos(text, qos_names))


@SETTINGS
@given(st.lists(st.integers(0, 99), min_size=2, max_size=3))
def test_version_round_trips(parts: list) -> None:
    version = tuple(parts)
    assert slurm_cluster.parse_version(f"slurm {slurm_cluster.format_version(version)}") == version


@SETTINGS
@given(st.text(max_size=30))
def test_version_of_any_text_is_numbers_or_none(text: str) -> None:
    version = slurm_cluster.parse_version(text)
    assert version is None or all(isinstance(part, int) for part in version)


@SETTINGS
@given(st.integers(-1, 255), _ANY_OUTPUT, _ANY_OUTPUT)
@example(0, "", "")
@example(1, "", "sbatch: error: Socket timed out on send/recv operation")
@example(1, "", "sbatch: error: Batch job submission failed: MaxSubmitJobsPerUser")
def test_any_sbatch_answer_is_an_id_or_a_submission_error(
    code: int, stdout: str, stderr: str
) -> None:
    argv = ["sbatch", "w.sh"]
    try:
        job_id = commands.parse_sbatch_output(argv, code, stdout, stderr, "here")
    except commands.NeverReached as exc:
        assert isinstance(exc.error, JobSubmissionError) and code != 0
        return
    except JobSubmissionError as exc:
        assert exc.argv == argv
        return
    assert code == 0 and ids.job_id_of(job_id) == job_id


_patterns = st.text(st.sampled_from(list("%jAaxN/._-")), max_size=12)


@SETTINGS
@given(_patterns, _ids, st.integers(0, 1000), _patterns.filter(lambda n: "%" not in n))
def test_output_patterns_expand_as_sbatch_does(
    pattern: str, base: int, task: int, name: str
) -> None:
    """Each %j %A %a %x %% is replaced once, from left to right; a task's %j is %A_%a."""
    expanded = commands.output_for_task(
        commands.array_output(pattern), f"{base}_{task}", str(base), str(task), name
    )
    by_hand, at = "", 0
    while at < len(pattern):
        two = pattern[at : at + 2]
        value = {"%j": f"{base}_{task}", "%A": str(base), "%a": str(task), "%x": name, "%%": "%"}
        if two in value:
            by_hand, at = by_hand + value[two], at + 2
        else:
            by_hand, at = by_hand + pattern[at], at + 1
    assert expanded == by_hand


@SETTINGS
@given(_ANY_OUTPUT)
def test_any_slurm_message_is_classified(text: str) -> None:
    message = commands.scheduler_message(text)
    for judge in (
        commands.transient,
        commands.never_reached,
        commands.submission_uncertain,
        commands.arrays_refused,
        commands.is_invalid_job_id,
        commands.job_already_ended,
        queries.accounting_disabled,
    ):
        assert judge(message) in (True, False)
    assert issubclass(commands.refusal_error(message), JobSubmissionError)


@SETTINGS
@given(
    st.datetimes(min_value=datetime(1971, 1, 2), max_value=datetime(2200, 1, 1)).map(
        lambda d: d.replace(microsecond=0)
    )
)
def test_slurm_times_round_trip(moment: datetime) -> None:
    """Slurm prints zoneless local times (``2026-12-05T10:00:00``): read in the zone given."""
    assert status.parse_time(moment.isoformat(), timezone.utc) == moment.replace(
        tzinfo=timezone.utc
    )


@SETTINGS
@given(
    st.lists(
        st.text(
            st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=8
        ),
        max_size=5,
    )
)
def test_described_argv_round_trips_through_a_shell_split(argv: list) -> None:
    assert shlex.split(commands.describe_argv(argv)) == argv
