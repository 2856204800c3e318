"""``hpcbridge cost`` attributes jobs to what they were charged to (issue 35): Slurm's
account, Flux's bank; a job without one is the default's (``-``)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Optional

from hpcbridge.cli.costs import _cost_table
from hpcbridge.cli.records import Notes
from hpcbridge.engine.cost import by_account, costs, report
from hpcbridge.routing.refreshing import Listed
from hpcbridge.store.jobs import JobRecord

END = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)


def record(job_id: str, account: Optional[str], hours: float, cpus: int) -> JobRecord:
    return JobRecord(
        job_id,
        "flux",
        state="COMPLETED",
        start_time=END - timedelta(hours=hours),
        end_time=END,
        ntasks=cpus,
        account=account,
    )


def test_each_bank_has_its_subtotal_and_the_default_its_own() -> None:
    records = [record("1", "banka", 1, 2), record("2", "banka", 2, 1), record("3", None, 1, 4)]
    rows = costs(records, cpu_price=1.5, gpu_price=0.0)
    assert [row.account for row in rows] == ["banka", "banka", None]
    totals = by_account(rows)
    assert totals["banka"]["cpu_hours"] == 4.0 and totals["banka"]["cost"] == 6.0
    assert totals[""]["cpu_hours"] == 4.0
    counted = report(records, 1.5, 0.0, inside={})
    table = _cost_table(counted, [Listed(item) for item in records], Notes())
    assert table[0][2] == "ACCOUNT" and [line[2] for line in table[1:4]] == ["banka", "banka", "-"]
    assert ("SUBTOTAL", "", "-", "", "", "4.0000", "0.0000", "6.0000") in table
    assert table[-1][0] == "TOTAL" and table[-1][5] == "8.0000"
