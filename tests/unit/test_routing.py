"""The router as a library: which adapter each id leads to, with its notices handed to
``notify`` (nothing printed) and a ``settle`` hook whose records are read again."""

from __future__ import annotations

import os
from typing import Any, List

import pytest

from hpcbridge import factory
from hpcbridge.errors import ConfigurationError
from hpcbridge.model import JobState, JobStatus
from hpcbridge.routing.ids import Narrowing, Router
from hpcbridge.settings.config import Settings
from hpcbridge.store.jobs import JobRecord, JobStore

HOST = os.uname().nodename


class Reached:
    """Stands for the adapter the router builds: which settings it was built with."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.scheduler_name = settings.scheduler
        self.host_label = HOST

    def normalize_job_id(self, job_id: str) -> str:
        return job_id.strip()

    def close(self) -> None:
        pass


@pytest.fixture
def built(state_dir: Any, monkeypatch: pytest.MonkeyPatch) -> List[Reached]:
    adapters: List[Reached] = []

    def build(settings: Settings, *_: Any) -> Reached:
        adapters.append(Reached(settings))
        return adapters[-1]

    monkeypatch.setattr(factory, "adapter_from_settings", build)
    return adapters


def _store(settings: Settings, *records: JobRecord) -> JobStore:
    store = JobStore(settings.database_path)
    for record in records:
        store.add(record)
    return store


def test_an_id_leads_to_its_records_place_and_notices_go_to_notify(
    built: List[Reached], capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings.from_env(scheduler="slurm")
    store = _store(settings, JobRecord(job_id="5", scheduler="mock", host=HOST))
    said: List[str] = []
    router = Router(settings, store, Narrowing.of(settings), command="wait", notify=said.append)
    targets = router.targets(["5", "6"])
    # "5" is a mock job here, but slurm was chosen: slurm is asked, and the notice says where
    assert [adapter.settings.scheduler for adapter in built] == ["slurm"]
    assert [(typed, job_id) for typed, _, job_id in targets.order] == [("5", "5"), ("6", "6")]
    assert said == [
        "job 5 is not recorded on slurm here; asking slurm for it (yours is recorded "
        "elsewhere: hpcbridge wait 5 --scheduler mock)"
    ]
    assert capsys.readouterr() == ("", "")


def test_settled_records_are_read_again(built: List[Reached]) -> None:
    settings = Settings.from_env()
    store = _store(settings, JobRecord(job_id="7", scheduler="mock", host=HOST))
    seen: List[List[str]] = []

    def settle(records: Any) -> bool:
        seen.append([record.state for record in records])
        store.update_status("mock", HOST, JobStatus("7", JobState.FAILED))
        return True

    targets = Router(settings, store, settle=settle).targets(["7"])
    assert seen == [["PENDING"]]
    [group] = targets.groups
    assert group.records["7"].state == "FAILED"  # as recorded after the settling


def test_an_id_recorded_twice_fails_alone_with_keep_going(built: List[Reached]) -> None:
    settings = Settings.from_env()
    store = _store(
        settings,
        JobRecord(job_id="9", scheduler="mock", host=HOST),
        JobRecord(job_id="9", scheduler="slurm", host=HOST),
        JobRecord(job_id="8", scheduler="mock", host=HOST),
    )
    targets = Router(settings, store, command="status").targets(["9", "8"], keep_going=True)
    assert list(targets.failed) == ["9"]
    assert isinstance(targets.failed["9"], ConfigurationError)
    assert "hpcbridge status 9 --scheduler mock" in str(targets.failed["9"])
    assert [typed for typed, _, _ in targets.order] == ["8"]
    with pytest.raises(ConfigurationError, match="recorded more than once"):
        Router(settings, store).targets(["9"])
