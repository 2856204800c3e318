"""``wait NAME`` of a resumed sweep shows its feeding when stderr is no terminal too - a
line of its own now and then - and its counts say what "not completed" means (issue 46,
item 8)."""

from __future__ import annotations

import pytest

from hpcbridge.cli.sweeps import SweepProgress

COUNTS = {"total": 10, "unsent": 4, "queued": 3, "completed": 2, "failed": 1}


def test_piped_a_line_at_once_then_one_per_interval(capsys: pytest.CaptureFixture) -> None:
    progress = SweepProgress("s1", every=3600.0)
    assert not progress.terminal  # pytest's stderr is no terminal
    progress(COUNTS)
    progress(COUNTS)  # within the interval: nothing more
    progress.finish()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("hpcbridge: sweep s1: 6/10 sent, 3 queued, 2 completed, ")
    assert "1 failed, cancelled or timed out" in lines[0]


def test_piped_every_call_past_the_interval(capsys: pytest.CaptureFixture) -> None:
    progress = SweepProgress("s2", every=0.0)
    progress(COUNTS)
    progress({**COUNTS, "unsent": 0, "completed": 6})
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(": ", 2)[2].split(",")[0] for line in lines] == ["6/10 sent", "10/10 sent"]
