"""Flux job ids: every encoding Flux prints maps to one canonical F58 form."""

from __future__ import annotations

import pytest

from hpcbridge.schedulers.flux.ids import (
    InvalidJobIdError,
    canonical_job_id,
    decimal_job_id,
    decode_f58,
    encode_f58,
    is_job_id,
    parse_job_id,
)

# Pairs printed by a real 0.88 (`flux jobs -o '{id.f58} {id.dec} {id.hex} {id.dothex}'`).
KNOWN = [
    ("ƒCFKYzj", 7381975040),
    ("ƒGN1ZNF", 10083106816),
    ("ƒ2TNt8FH", 55381590016),
    ("ƒC1yfTd", 7230980096),
]


@pytest.mark.parametrize(("f58", "number"), KNOWN)
def test_f58_round_trip_matches_flux(f58: str, number: int) -> None:
    assert encode_f58(number) == f58
    assert decode_f58(f58) == number
    assert canonical_job_id(number) == f58


@pytest.mark.parametrize(
    "spelling",
    [
        "ƒC1yfTd",
        "fC1yfTd",  # C locale (e.g. over SSH): ASCII prefix
        "7230980096",
        "0x1af000000",
        "0x1AF000000",
        "0000.0001.af00.0000",
        "job.0000.0001.af00.0000",
        " ƒC1yfTd\n",
        7230980096,
    ],
)
def test_every_encoding_gives_the_canonical_form(spelling: object) -> None:
    assert canonical_job_id(spelling) == "ƒC1yfTd"
    assert decimal_job_id(spelling) == "7230980096"


def test_int_subclass_like_flux_jobid() -> None:
    class JobID(int):
        pass

    assert canonical_job_id(JobID(7381975040)) == "ƒCFKYzj"


def test_zero_and_max() -> None:
    assert encode_f58(0) == "ƒ1"
    assert parse_job_id(encode_f58(2**64 - 1)) == 2**64 - 1


@pytest.mark.parametrize(
    "bad", ["", "ƒNOPE0", "ƒ", "abc", "12a", "0xzz", str(2**64), True, "ƒl", "-5"]
)
def test_rejects_what_is_not_a_job_id(bad: object) -> None:
    with pytest.raises(InvalidJobIdError):
        parse_job_id(bad)
    assert not is_job_id(bad)


def test_ascii_prefix_output_is_an_option() -> None:
    assert encode_f58(7381975040, prefix="f") == "fCFKYzj"
