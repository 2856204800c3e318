"""Any job status, for the property tests of its encodings (the store's columns and JSON,
the poll board's rounds)."""

from __future__ import annotations

from datetime import timedelta, timezone

from hypothesis import strategies as st

from hpcbridge.model import JobState, JobStatus

_zones = st.sampled_from([timezone.utc, timezone(timedelta(hours=-5)), timezone(timedelta(0))])
_moments = st.one_of(st.none(), st.datetimes(timezones=_zones))


def job_statuses(allow_infinity: bool = True) -> st.SearchStrategy[JobStatus]:
    """A ``JobStatus`` of any state, times in any of three zones or none, and an ``extra``
    of plain values (floats infinite only where ``allow_infinity``)."""
    plain = st.one_of(
        st.text(max_size=8),
        st.integers(-(2**53), 2**53),
        st.booleans(),
        st.floats(allow_nan=False, allow_infinity=allow_infinity),
    )
    return st.builds(
        JobStatus,
        job_id=st.text(min_size=1, max_size=12),
        state=st.sampled_from(list(JobState)),
        exit_code=st.one_of(st.none(), st.integers(-(2**31), 2**31)),
        start_time=_moments,
        end_time=_moments,
        native_state=st.text(max_size=20),
        reason=st.text(max_size=40),
        extra=st.dictionaries(st.text(max_size=8), plain, max_size=3),
        as_of=_moments,
    )
