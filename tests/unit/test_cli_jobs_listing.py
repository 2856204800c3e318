"""``hpcbridge jobs`` on a large store: the table's newest 500 and its note, ``--all``,
``--json`` of every job one entry per line (still one JSON document)."""

import json
from datetime import datetime, timedelta, timezone

import pytest

from hpcbridge.cli import main
from hpcbridge.cli.parser import TABLE_JOBS
from hpcbridge.store.jobs import JobRecord, JobStore

COUNT = TABLE_JOBS + 20


@pytest.fixture
def big_store(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCBRIDGE_STATE_DIR", str(tmp_path))
    store = JobStore(tmp_path / "jobs.db")
    now = datetime.now(timezone.utc)
    store.add_many(
        JobRecord(
            job_id=str(1000 + i),
            scheduler="mock",
            host="elsewhere",
            state="COMPLETED",
            exit_code=0,
            submit_time=now - timedelta(seconds=COUNT - i),
            end_time=now,
        )
        for i in range(COUNT)
    )
    return store


def run(capsys, *argv):
    try:
        code = main(["jobs", *argv])
    except SystemExit as ended:  # argparse's bad usage
        code = ended.code
    out, err = capsys.readouterr()
    return code, out, err


def test_the_table_shows_the_newest_and_says_how_many_more(big_store, capsys):
    code, out, err = run(capsys)
    rows = out.splitlines()[1:]
    assert code == 0 and len(rows) == TABLE_JOBS
    assert rows[-1].split()[0] == str(1000 + COUNT - 1)  # the newest last, as ever
    assert rows[0].split()[0] == str(1000 + COUNT - TABLE_JOBS)
    assert f"the newest {TABLE_JOBS} of {COUNT} jobs" in err and "--all" in err


def test_all_and_limit_and_json_list_what_they_say(big_store, capsys):
    code, out, err = run(capsys, "--all")
    assert code == 0 and len(out.splitlines()) == COUNT + 1 and not err
    code, out, err = run(capsys, "--limit", "7")
    assert len(out.splitlines()) == 8 and not err
    code, out, _ = run(capsys, "--json")
    entries = json.loads(out)
    assert [e["job_id"] for e in entries] == [str(1000 + i) for i in range(COUNT)]
    assert len(out.splitlines()) == COUNT + 2  # "[", one line per job, "]"


def test_limit_and_all_together_is_bad_usage(big_store, capsys):
    code, _, err = run(capsys, "--all", "--limit", "3")
    assert code == 2 and "not allowed with" in err
