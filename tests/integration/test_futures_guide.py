"""The futures guide (docs/guides/futures.md) runs as written, on the mock scheduler, in
the own lane's mock modules (``test_guides`` leaves it to this module: ``RUN_ELSEWHERE``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration import test_guides as guides

GUIDE = guides.DOCS / "guides" / "futures.md"


def test_futures_guide_runs(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    assert guides.RUN_ELSEWHERE[GUIDE.name].endswith(Path(__file__).name)
    guides.test_guide(GUIDE, "mock", request, tmp_path)
