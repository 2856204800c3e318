"""Bad input to the command: exit 2 (or 3 for a script that is not one), one line naming
what the user set - the variable, the flag, the file - and nothing staged or submitted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcbridge.cli import main


def _error(capsys: pytest.CaptureFixture) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert lines[-1].startswith("hpcbridge") and "error" in lines[-1], captured.err
    return lines[-1]


def _nothing_staged(state_dir: Path) -> bool:
    return not (state_dir / "jobs").exists() and not (state_dir / "mock" / "jobs").exists()


def test_a_bad_default_names_its_variable(state_dir, make_script, capsys, monkeypatch):
    monkeypatch.setenv("HPCBRIDGE_TIME", "abc")
    assert main(["submit", make_script("true")]) == 2
    assert "HPCBRIDGE_TIME='abc'" in _error(capsys)
    # a flag given instead wins: the variable is not read then
    assert main(["submit", make_script("true"), "--time", "5", "--dry-run"]) == 0
    assert _nothing_staged(state_dir)


def test_a_bad_flag_value_names_the_flag(state_dir, make_script, capsys):
    assert main(["submit", make_script("true"), "--time", "abc"]) == 2
    assert "resource 'time' (set by --time abc)" in _error(capsys)
    assert main(["submit-many", make_script("true"), "--cpus-per-task", "0"]) == 2
    assert "(set by --cpus-per-task 0)" in _error(capsys)
    assert _nothing_staged(state_dir)


def test_a_directory_is_not_a_script(state_dir, tmp_path, capsys):
    assert main(["submit", str(tmp_path)]) == 3
    assert f"{tmp_path} is a directory, not a script" in _error(capsys)


@pytest.mark.parametrize("content", [None, "", "# only a comment\n\n"])
def test_a_missing_or_empty_args_file_is_bad_usage(
    state_dir, make_script, tmp_path, capsys, content
):
    args_file = tmp_path / "params.txt"
    if content is not None:
        args_file.write_text(content)
    assert main(["submit-many", make_script("true"), "--args-file", str(args_file)]) == 2
    line = _error(capsys)
    assert f"--args-file {args_file}" in line
    assert ("no such file" if content is None else "no job lines") in line
    assert _nothing_staged(state_dir)


def test_an_args_file_line_that_does_not_parse_is_named_by_its_number(
    state_dir, make_script, capsys, tmp_path
):
    args_file = tmp_path / "params.txt"
    args_file.write_text("# sweep\n--lr 0.1\n\n--name 'unclosed\n--lr 0.3\n")
    assert main(["submit-many", make_script("true"), "--args-file", str(args_file)]) == 2
    line = _error(capsys)
    assert f"--args-file {args_file}:4: No closing quotation" in line
    assert _nothing_staged(state_dir)


@pytest.mark.parametrize("scheduler", ["mock", "slurm", "flux"])
def test_a_dry_run_of_a_missing_script_fails_as_the_submission_would(
    state_dir, capsys, tmp_path, scheduler
):
    missing = tmp_path / "nosuch.sh"
    assert main(["submit", str(missing), "--scheduler", scheduler, "--dry-run"]) == 3
    assert f"script not found: {missing}" in _error(capsys)
    assert main(["submit-many", str(missing), "--scheduler", scheduler, "--dry-run"]) == 3
    assert f"script not found: {missing}" in _error(capsys)
    assert _nothing_staged(state_dir)


def test_an_unreadable_script_is_named_not_the_folder(state_dir, make_script, capsys, monkeypatch):
    script = make_script("true")
    real_access = os.access
    # root reads every file: the test makes this one unreadable as another user finds it
    monkeypatch.setattr(
        os, "access", lambda path, mode: False if str(path) == script else real_access(path, mode)
    )
    for extra in ([], ["--dry-run"]):
        assert main(["submit", script, *extra]) == 3
        line = _error(capsys)
        assert f"cannot read the script {script}" in line and "chmod u+r" in line
        assert "folder is writable" not in line
    assert _nothing_staged(state_dir)


@pytest.mark.parametrize("limit", ["0", "-1", "x"])
def test_jobs_limit_must_be_one_or_more(state_dir, capsys, limit):
    with pytest.raises(SystemExit) as exited:
        main(["jobs", "--limit", limit])
    assert exited.value.code == 2
    assert "--limit" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "flag", "value"),
    [
        ("wait", "--timeout", "-1"),
        ("wait", "--poll-interval", "0"),
        ("wait", "--poll-interval", "-2"),
        ("submit", "--timeout", "-5"),
        ("submit", "--poll-interval", "x"),
    ],
)
def test_seconds_under_zero_are_refused_before_anything_runs(
    state_dir, make_script, capsys, command, flag, value
):
    argv = ["wait", "1"] if command == "wait" else ["submit", make_script("true"), "--wait"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, flag, value])
    assert exited.value.code == 2
    assert flag in capsys.readouterr().err
    assert _nothing_staged(state_dir)


def test_usage_marks_only_the_script_required(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["submit"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "the following arguments are required: SCRIPT\n" in err
    assert "SCRIPT [ARG ...]" in err


def test_text_that_is_no_slurm_id_is_not_found_not_an_unreachable_scheduler(state_dir, capsys):
    # squeue would fail on it ("Invalid job id"), which looked like a controller down (exit 7)
    assert main(["status", "abc", "--scheduler", "slurm"]) == 4
    assert "'abc' is not a Slurm job id" in _error(capsys)
    assert main(["submit", __file__, "--scheduler", "slurm", "--after", "12.x", "--dry-run"]) == 3
    assert "parent job '12.x' cannot be found" in _error(capsys)
