"""``hpcbridge status|wait|logs|cancel ID`` find a recorded job whatever form its id takes,
and follow the one rule of ``routing/ids.py`` for which record an id means."""

import json
import os

import pytest

from hpcbridge import JobState, JobStatus, factory
from hpcbridge.cli import main
from hpcbridge.engine.observation import Observation
from hpcbridge.routing.ids import Narrowing, recorded_forms, records_of
from hpcbridge.schedulers.flux.ids import canonical_job_id
from hpcbridge.store.jobs import JobRecord, JobStore

FLUX_ID = "\u0192cAyxmV"  # ƒcAyxmV
FLUX_DECIMAL = "23085449216"
RECORDED_URI = "local:///tmp/recorded-broker/local-0"


class FakeAdapter:
    """Stands for whichever adapter the command builds; says which one it was."""

    #: what every job is, live
    live_state = JobState.COMPLETED

    def __init__(self, settings):
        self.settings = settings
        self.scheduler_name = settings.scheduler
        self.host_label = os.uname().nodename
        self.store = JobStore(settings.database_path)
        self.cancelled = []
        self.asked = []

    def normalize_job_id(self, job_id):
        if self.scheduler_name == "flux":
            return canonical_job_id(job_id)
        return str(job_id).strip()

    def _status(self, job_id):
        return JobStatus(job_id, self.live_state, exit_code=0, reason=self.scheduler_name)

    def get_job_statuses(self, job_ids):
        self.asked.extend(job_ids)
        return {self.normalize_job_id(j): self._status(self.normalize_job_id(j)) for j in job_ids}

    def observe(self, job_ids):
        return {
            job_id: Observation(status) for job_id, status in self.get_job_statuses(job_ids).items()
        }

    def get_job_status(self, job_id):
        return self._status(self.normalize_job_id(job_id))

    def wait_for(self, job_ids, plan):
        return self.get_job_statuses(job_ids)

    def get_job_logs(self, job_id):
        return f"logs of {job_id} from {self.scheduler_name}\n"

    def cancel_jobs(self, job_ids):
        self.cancelled.extend(job_ids)

    def close(self):
        pass


@pytest.fixture
def built(state_dir, monkeypatch):
    """The adapters the command builds, in order."""
    adapters = []

    def build(settings, executor=None, store=None):
        adapters.append(FakeAdapter(settings))
        return adapters[-1]

    monkeypatch.setattr(factory, "adapter_from_settings", build)
    store = JobStore(state_dir / "jobs.db")
    store.add(JobRecord(job_id="77", scheduler="slurm", host=os.uname().nodename))
    store.add(
        JobRecord(job_id=FLUX_ID, scheduler="flux", host=os.uname().nodename, flux_uri=RECORDED_URI)
    )
    store.close()
    return adapters


@pytest.mark.parametrize("typed", [FLUX_ID, FLUX_DECIMAL, "fcAyxmV", " fcAyxmV "])
def test_status_follows_a_flux_record_in_any_form(built, capsys, typed):
    assert main(["status", typed, "--json"]) == 0
    [adapter] = built
    assert adapter.settings.scheduler == "flux"
    assert adapter.settings.flux_uri == RECORDED_URI
    answer = json.loads(capsys.readouterr().out)
    assert answer["job_id"] == FLUX_ID and answer["reason"] == "flux"


def test_wait_logs_cancel_follow_the_decimal_form(built, capsys, monkeypatch):
    assert main(["wait", FLUX_DECIMAL, "--poll-interval", "0.01"]) == 0
    assert main(["logs", "fcAyxmV"]) == 0
    assert f"logs of {FLUX_ID} from flux" in capsys.readouterr().out
    monkeypatch.setattr(FakeAdapter, "live_state", JobState.RUNNING)
    assert main(["cancel", FLUX_DECIMAL]) == 0
    assert [adapter.settings.scheduler for adapter in built] == ["flux"] * 3
    assert built[-1].cancelled == [FLUX_ID]


def test_slurm_record_and_unrecorded_ids(built, capsys):
    assert main(["status", "77"]) == 0
    assert main(["status", "424242"]) == 0  # no record: the configured scheduler
    assert [adapter.settings.scheduler for adapter in built] == ["slurm", "mock"]
    assert built[0].settings.flux_uri is None


def test_ids_of_two_schedulers_are_asked_each_of_its_own(built, capsys):
    assert main(["status", "77", FLUX_DECIMAL, "--json"]) == 0
    assert [adapter.settings.scheduler for adapter in built] == ["slurm", "flux"]
    answers = json.loads(capsys.readouterr().out)
    assert [(a["job_id"], a["reason"]) for a in answers] == [("77", "slurm"), (FLUX_ID, "flux")]


def test_an_explicit_scheduler_narrows_the_lookup(built, capsys, monkeypatch):
    # --scheduler slurm: the Flux record of FLUX_ID does not count; Slurm is asked
    assert main(["status", "77", FLUX_DECIMAL, "--scheduler", "slurm"]) == 0
    assert [adapter.settings.scheduler for adapter in built] == ["slurm", "slurm"]
    assert built[1].asked == [FLUX_DECIMAL]
    monkeypatch.setenv("HPCBRIDGE_SCHEDULER", "mock")  # a variable narrows too
    built.clear()
    assert main(["status", "77"]) == 0
    assert [adapter.settings.scheduler for adapter in built] == ["mock"]


def test_an_id_recorded_for_two_schedulers_is_an_error_naming_each(built, capsys, state_dir):
    store = JobStore(state_dir / "jobs.db")
    store.add(JobRecord(job_id="77", scheduler="mock", host=os.uname().nodename))
    store.close()
    assert main(["status", "77"]) == 2
    err = capsys.readouterr().err
    assert "job 77 is recorded more than once" in err, err
    assert "hpcbridge status 77 --scheduler mock" in err
    assert "hpcbridge status 77 --scheduler slurm" in err
    assert built == []  # nothing asked
    assert main(["status", "77", "--scheduler", "mock"]) == 0
    assert built[-1].settings.scheduler == "mock"


def test_several_ids_answer_each_even_when_one_is_recorded_twice(built, capsys, state_dir):
    store = JobStore(state_dir / "jobs.db")
    store.add(JobRecord(job_id="77", scheduler="mock", host=os.uname().nodename))
    store.close()
    assert main(["status", "77", FLUX_DECIMAL, "--json"]) == 2
    captured = capsys.readouterr()
    answers = json.loads(captured.out)
    assert [a["job_id"] for a in answers] == ["77", FLUX_ID]
    assert "recorded more than once" in answers[0]["error"]
    assert answers[1]["reason"] == "flux" and "error" not in answers[1]
    assert captured.err.count("hpcbridge: error:") == 1


def test_the_same_id_on_two_hosts_names_the_host(built, capsys, state_dir):
    store = JobStore(state_dir / "jobs.db")
    store.add(JobRecord(job_id="77", scheduler="slurm", host="me@login1:22", transport="ssh"))
    store.close()
    assert main(["cancel", "77"]) == 2
    err = capsys.readouterr().err
    assert f"hpcbridge cancel 77 --scheduler slurm --host {os.uname().nodename}" in err
    assert "hpcbridge cancel 77 --scheduler slurm --host me@login1:22" in err
    assert main(["status", "77", "--host", os.uname().nodename]) == 0


def test_an_id_left_out_by_the_narrowing_says_where_it_is_recorded(built, capsys, monkeypatch):
    monkeypatch.setattr(FakeAdapter, "live_state", JobState.UNKNOWN)
    assert main(["cancel", "77", "--scheduler", "flux"]) == 4
    err = capsys.readouterr().err
    assert "no job ƒ2L" in err  # 77 as a Flux id
    assert "(recorded elsewhere: hpcbridge cancel 77 --scheduler slurm)" in err


def test_an_id_found_where_the_narrowing_points_says_its_record_is_elsewhere(built, capsys):
    # the chosen scheduler knows the id - maybe someone else's job: the user is told
    main(["status", "77", "--scheduler", "flux"])
    err = capsys.readouterr().err
    assert "job 77 is not recorded on flux here; asking flux for it" in err
    assert "hpcbridge status 77 --scheduler slurm" in err


def test_recorded_forms():
    assert recorded_forms(FLUX_DECIMAL)["flux"] == FLUX_ID
    assert recorded_forms(FLUX_DECIMAL)["slurm"] == FLUX_DECIMAL
    assert recorded_forms("123;cluster")["slurm"] == "123"
    assert "flux" not in recorded_forms("123_4")  # an array task is no Flux id
    assert recorded_forms("123_4")["mock"] == "123_4"


def test_records_of_every_form_and_the_narrowing(tmp_path):
    store = JobStore(tmp_path / "jobs.db")
    store.add(JobRecord(job_id=FLUX_ID, scheduler="flux", host="a"))
    store.add(JobRecord(job_id=FLUX_DECIMAL, scheduler="slurm", host="b"))
    found = records_of(store, [FLUX_DECIMAL, "fcAyxmV", "5"])
    assert [r.scheduler for r in found[FLUX_DECIMAL]] == ["slurm", "flux"]  # newest first
    assert [r.scheduler for r in found["fcAyxmV"]] == ["flux"]
    assert found["5"] == []
    narrowed = records_of(store, [FLUX_DECIMAL], Narrowing(scheduler="flux"))
    assert [r.job_id for r in narrowed[FLUX_DECIMAL]] == [FLUX_ID]
    assert records_of(store, [FLUX_DECIMAL], Narrowing(host="b"))[FLUX_DECIMAL][0].host == "b"


def test_an_unrecorded_id_the_scheduler_does_not_know_exits_4(built, capsys, monkeypatch):
    monkeypatch.setattr(FakeAdapter, "live_state", JobState.UNKNOWN)
    for command in (["status", "424242"], ["cancel", "424242"], ["wait", "424242"]):
        assert main(command) == 4
        assert capsys.readouterr().err.startswith("hpcbridge: error: no job 424242")
    assert all(adapter.cancelled == [] for adapter in built)
    assert main(["status", "77"]) == 0  # a recorded job the scheduler cannot see: UNKNOWN, 0
    assert "UNKNOWN" in capsys.readouterr().out


def test_cancel_of_a_recorded_ended_job_asks_nothing(built, capsys, state_dir):
    store = JobStore(state_dir / "jobs.db")
    store.add(JobRecord(job_id="78", scheduler="slurm", host=os.uname().nodename, state="TIMEOUT"))
    store.close()
    assert main(["cancel", "78"]) == 0
    assert capsys.readouterr().out == "78 already ended TIMEOUT: nothing to cancel\n"
    assert built[-1].asked == [] and built[-1].cancelled == []


def test_host_names_a_record_by_its_label_or_by_the_ssh_host_as_given():
    record = JobRecord(
        job_id="5",
        scheduler="slurm",
        transport="ssh",
        host="me@10.0.0.1:22",
        reach='{"ssh_host": "cluster"}',
    )
    assert Narrowing(host="me@10.0.0.1:22").keeps(record)
    assert Narrowing(host="cluster").keeps(record)
    assert not Narrowing(host="other").keeps(record)
    assert not Narrowing(host="cluster").keeps(JobRecord(job_id="5", scheduler="slurm"))
