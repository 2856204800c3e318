"""Property tests of the wrapper's pure parts (engine/jobscript.py) and of its exit file
(engine/tracking.py ``read_exit_file``): any words and variables reach the script whole
through a real /bin/sh, staged names and chunks keep every task once, and any exit file's
text reads as a record, never an exception."""

from __future__ import annotations

import os
import subprocess
import tempfile

from hypothesis import example, given, settings
from hypothesis import strategies as st

from hpcbridge.engine.jobscript import (
    TaskSpec,
    build_wrapper,
    check_environment_names,
    plan_chunks,
    shared_name,
    staged_basenames,
)
from hpcbridge.engine.task_table import _here_document_end
from hpcbridge.engine.tracking import read_exit_file

SETTINGS = settings(max_examples=60, deadline=None)

#: what a shell word or a variable's value may hold (no NUL: no C string holds one)
_words = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=10
)
_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
    lambda name: (
        not name.startswith(("HPCB", "hpcb", "BASH", "PATH", "IFS", "PS", "ENV"))
        and name
        not in ("HOME", "PWD", "OLDPWD", "SHELL", "OPTIND", "OPTARG", "LINENO", "PPID", "_")
    )
)


@settings(max_examples=15, deadline=None)  # each runs /bin/sh
@given(st.lists(_words, max_size=4), st.dictionaries(_names, _words, max_size=3), st.integers(0, 3))
def test_arguments_and_environment_reach_the_script_whole(
    arguments: list, environment: dict, code: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "show.sh")
        with open(script, "w") as handle:
            handle.write('#!/bin/sh\nfor word in "$@"; do printf \'%s\\0\' "$word"; done\n')
            handle.write("env -0 >&2\nexit " + str(code) + "\n")
        os.chmod(script, 0o755)
        wrapper = build_wrapper(
            [TaskSpec(script, tuple(arguments), environment)], folder, folder + "/job.exit"
        )
        path = os.path.join(folder, "wrapper.sh")
        with open(path, "w") as handle:
            handle.write(wrapper)
        result = subprocess.run(
            ["/bin/sh", path], capture_output=True, env={"PATH": os.environ["PATH"]}
        )
        assert result.returncode == code
        assert result.stdout.decode().split("\0")[:-1] == arguments
        seen = dict(
            entry.split("=", 1) for entry in result.stderr.decode().split("\0") if "=" in entry
        )
        assert {name: seen.get(name) for name in environment} == environment
        with open(folder + "/job.exit") as handle:
            assert read_exit_file(handle.read()).code == code


@SETTINGS
@given(st.dictionaries(st.text(max_size=6), st.text(max_size=4), max_size=4))
@example({"²": "x"})
@example({"é": "x"})
def test_environment_names_are_identifiers_or_a_value_error(environment: dict) -> None:
    try:
        checked = check_environment_names(environment)
    except ValueError:
        return
    assert all(name.isascii() and name.isidentifier() for name in checked)


_paths = st.lists(st.from_regex(r"(/[a-z.]{1,3}){1,3}/?", fullmatch=True), min_size=1, max_size=8)


@SETTINGS
@given(_paths, _paths)
def test_staged_names_are_one_per_script(scripts: list, earlier: list) -> None:
    taken = staged_basenames(earlier)
    names = staged_basenames(scripts, taken)
    assert {script: names[script] for script in taken} == taken  # the earlier names stay
    everyone = {**taken, **names}
    assert len(set(everyone.values())) == len(everyone)  # no two scripts share a file
    assert all("/" not in name and name for name in everyone.values())


@SETTINGS
@given(_paths, st.integers(0, 5), st.one_of(st.none(), st.just("train")))
def test_chunks_keep_every_task_once_in_order(scripts: list, size: int, job_name: object) -> None:
    tasks = [TaskSpec(script, (str(index),)) for index, script in enumerate(scripts)]
    chunks = plan_chunks("/j", tasks, job_name, size, "tok")  # type: ignore[arg-type]
    assert [task for _, mine in chunks for task in mine] == tasks
    assert len({job.token for job, _ in chunks}) == len(chunks)
    for job, mine in chunks:
        assert len(mine) <= max(size, 1) and len(job.scripts) == len(job.task_names) == len(mine)
        assert job.job_name == shared_name(list(job.task_names))


@SETTINGS
@given(st.lists(st.sampled_from(["HPCB_SCRIPT_END", "HPCB_SCRIPT_END_1", "x", ""]), max_size=5))
def test_a_here_document_ends_on_no_line_of_its_text(lines: list) -> None:
    text = "\n".join(lines)
    assert _here_document_end(text) not in text.split("\n")


@SETTINGS
@given(
    st.one_of(
        st.text(max_size=30),
        st.tuples(
            st.sampled_from(["0", "1", "255", "-1", "x", "²"]),
            st.sampled_from(["", " +12.5", " +1e400", " +nan", " +-5", " +1e20", " -"]),
            st.sampled_from(["", " 1700000000", " 1e20", " nan", " inf", " -1e12"]),
        ).map("".join),
    ),
    st.one_of(st.none(), st.floats(0, 2e9)),
)
@example("0 +1e400", 1700000000.0)
@example("0 +nan", 1700000000.0)
@example("0 1e20", None)
def test_any_exit_file_reads_as_a_record(text: str, mtime: object) -> None:
    record = read_exit_file(text)
    started, ended = record.times(mtime)  # type: ignore[arg-type]
    assert record.code is None or isinstance(record.code, int)
    assert started is None or ended is None or started <= ended
