"""libslurm's own error lines never reach the user's stderr through the pyslurm driver.

Slurm 25.11 with pyslurm: ``hpcbridge submit --partition <none such>`` prints one line
on stderr, hpcbridge's, carrying libslurm's words (``invalid partition specified``);
libslurm's ``python: error: ...`` line is not there.  A refused array of distinct
scripts says the same, once.  (The words are checked, not the program name libslurm
prefixes them with.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterator

import pytest

from tests.support.cli import hpcbridge
from tests.support.slurm_clusters import TARGETS, cluster_for

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def cluster() -> Iterator[Dict[str, str]]:
    yield from cluster_for(TARGETS["25.11-native"])


def test_a_refusal_is_one_line_of_hpcbridge_with_libslurms_words(
    cluster: Dict[str, str], tmp_path: Path
) -> None:
    script = tmp_path / "hello.sh"
    script.write_text("#!/bin/sh\necho hello\n")
    other = tmp_path / "bye.sh"
    other.write_text("#!/bin/sh\necho bye\n")
    env = {
        **cluster,
        "HPCBRIDGE_SCHEDULER": "slurm",
        "HPCBRIDGE_SLURM_DRIVER": "native",
        "HPCBRIDGE_STATE_DIR": str(tmp_path / "state"),
        "HPCBRIDGE_REMOTE_WORKDIR": str(tmp_path / "jobs"),
    }
    for args in (
        ["submit", str(script)],
        ["submit-many", str(script), str(other)],
    ):
        result = hpcbridge(*args, "--partition", "nosuchpart", "--time", "1", env=env)
        assert result.returncode != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("hpcbridge: error: "), result.stderr
        assert "invalid partition" in lines[0].lower(), result.stderr
        assert "nosuchpart" in lines[0], result.stderr
