"""libslurm's lines on fd 2 caught around a call (``slurm.pyslurm_loading``)."""

from __future__ import annotations

import os
import sys
import threading
from typing import List

import pytest

from hpcbridge.schedulers.slurm import pyslurm_loading, pyslurm_records


def test_split_keeps_libslurms_messages_and_the_rest_as_written() -> None:
    text = (
        "python: error: invalid partition specified: nosuchpart\n"
        "something else\n"
        "python3.11: debug2: a detail\n"
        "hpcbridge: fatal: gone\n"
        "no newline"
    )
    messages, rest = pyslurm_records.split(text)
    assert messages == ["invalid partition specified: nosuchpart", "a detail", "gone"]
    assert rest == "something else\nno newline"


def test_caught_takes_libslurms_lines_off_fd_2_and_passes_the_rest_on(
    capfd: pytest.CaptureFixture[str],
) -> None:
    said: List[str] = []
    with pyslurm_loading.caught(said):
        os.write(2, b"python: error: invalid partition specified: nosuchpart\n")
        os.write(2, b"not libslurm\n")
    assert said == ["invalid partition specified: nosuchpart"]
    print("after", file=sys.stderr)
    assert capfd.readouterr().err == "not libslurm\nafter\n"
    again: List[str] = []
    with pytest.raises(RuntimeError), pyslurm_loading.caught(again):
        os.write(2, b"python: error: second\n")
        raise RuntimeError("pyslurm raised")
    assert again == ["second"]  # the file emptied in between: nothing of the first call
    assert capfd.readouterr().err == ""


def test_another_threads_output_meanwhile_is_late_not_lost(
    capfd: pytest.CaptureFixture[str],
) -> None:
    inside, written = threading.Event(), threading.Event()

    def other() -> None:
        inside.wait(10)
        os.write(2, b"from another thread\n")
        written.set()

    thread = threading.Thread(target=other)
    thread.start()
    said: List[str] = []
    with pyslurm_loading.caught(said):
        inside.set()
        assert written.wait(10)
    thread.join(10)
    assert said == []
    assert capfd.readouterr().err == "from another thread\n"
