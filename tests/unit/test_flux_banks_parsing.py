"""flux-accounting's answers read (issue 35): ``flux account view-user`` as 0.60
(JSON) and 0.23 (16-wide columns whose headers run into each other) print it,
recorded with a user in two banks; the bank check and the cap built on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcbridge.errors import JobSubmissionError
from hpcbridge.schedulers.flux.instance import Association
from hpcbridge.schedulers.flux.instance_answers import active_cap, parse_account_user
from hpcbridge.schedulers.flux.planning import check_bank

DATA = Path(__file__).resolve().parents[1] / "data" / "flux"
BOTH = [
    Association("banka", "banka", 10, 4),
    Association("bankb", "banka", 7, 5),
]


@pytest.mark.parametrize("release", ["0.88", "0.49"])
def test_each_releases_view_user_reads_the_same(release: str) -> None:
    text = (DATA / f"account_view_user_{release}.txt").read_text()
    assert parse_account_user(text) == BOTH


def test_unlimited_and_inactive_rows() -> None:
    text = (
        '[{"bank": "a", "default_bank": "a", "max_active_jobs": 2147483647,'
        ' "max_running_jobs": "unlimited"}, {"bank": "b", "active": 0}]'
    )
    assert parse_account_user(text) == [Association("a", "a", None, None)]


def test_a_member_bank_and_no_accounting_pass() -> None:
    check_bank("bankb", BOTH)
    check_bank("anything", None)  # no accounting: every release ignores the bank


def test_a_strangers_bank_names_the_users_banks() -> None:
    with pytest.raises(JobSubmissionError, match="no bank 'bankc'.*banka, bankb; default banka"):
        check_bank("bankc", BOTH)
    with pytest.raises(JobSubmissionError, match="you are in none"):
        check_bank("banka", [])


def test_the_cap_is_the_banks_or_the_defaults() -> None:
    assert active_cap(BOTH, "bankb") == 7
    assert active_cap(BOTH, None) == 10
    assert active_cap(BOTH, "bankc") is None
    assert active_cap(None, None) is None
