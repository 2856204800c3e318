"""``hpcbridge submit --dry-run --scheduler flux``: ``--no-nested`` shows a ``flux
submit`` line, ``--nested`` a ``flux batch`` line, with the same resource flags."""

from pathlib import Path
from typing import List

import pytest

from hpcbridge.cli import main


def _dry_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> List[str]:
    script = tmp_path / "x.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    code = main(
        ["submit", str(script), "--dry-run", "--scheduler", "flux", "-n", "2", "-t", "1h", *flags]
    )
    assert code == 0
    return capsys.readouterr().out.splitlines()[0].split()


def test_no_nested_is_flux_submit_nested_is_flux_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPCBRIDGE_STATE_DIR", str(tmp_path / "state"))
    # no broker anywhere: the dry run shows what the newest adapter would run
    monkeypatch.setenv("HPCBRIDGE_FLUX_COMMAND", str(tmp_path / "no-flux-here"))
    monkeypatch.delenv("FLUX_URI", raising=False)
    monkeypatch.delenv("HPCBRIDGE_FLUX_URI", raising=False)
    plain = _dry_run(tmp_path, capsys, "--no-nested")
    batch = _dry_run(tmp_path, capsys, "--nested")
    assert plain[1] == "submit" and batch[1] == "batch"

    def flags(argv: List[str]) -> List[str]:
        return [word for word in argv if word.startswith("-") and not word.startswith("--env=")]

    assert flags(plain) == flags(batch)
    assert "-n2" in plain and "-t3600s" in plain
    # the system instance: batch jobs by default
    assert _dry_run(tmp_path, capsys)[1] == "batch"
