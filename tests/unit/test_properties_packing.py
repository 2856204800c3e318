"""Property tests of the ``--pack`` request (``packing.request.Pack.parse``): a written
request round trips, and any text is a Pack or a ResourceError naming ``--pack``."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from hpcbridge.errors import ResourceError
from hpcbridge.packing.request import Pack
from hpcbridge.resources import format_slurm_time

SETTINGS = settings(max_examples=60, deadline=None)

_names = st.from_regex(r"[A-Za-z0-9_.-]{1,10}", fullmatch=True)


@SETTINGS
@given(
    st.integers(1, 10 * 365 * 86400),
    st.integers(1, 10**4),
    st.integers(1, 100),
    st.one_of(st.none(), _names),
    st.one_of(st.none(), _names),
    st.one_of(st.none(), _names),
)
def test_pack_text_round_trips(
    seconds: int, nodes: int, count: int, partition: object, account: object, qos: object
) -> None:
    pack = Pack(
        time=float(seconds),
        nodes=nodes,
        count=count,
        partition=partition,  # type: ignore[arg-type]
        account=account,  # type: ignore[arg-type]
        qos=qos,  # type: ignore[arg-type]
    )
    assert Pack.parse(pack.text()) == pack
    words = [f"time={format_slurm_time(seconds)}", f"nodes={nodes}", f"count={count}"]
    assert Pack.parse(" , ".join(reversed(words))).time == seconds


_PACK_CHARS = st.sampled_from(list("nodestimcuparqlk=,:-0123456789 hms²٣"))
_parts = st.tuples(
    st.sampled_from(["nodes", "time", "count", "partition", "account", "qos", "x", ""]),
    st.sampled_from(["=", "", "=="]),
    st.one_of(
        st.text(_PACK_CHARS, max_size=6), st.sampled_from(["1", "30", "1:00:00", "0", "UNLIMITED"])
    ),
).map("".join)


@SETTINGS
@given(
    st.one_of(
        st.text(max_size=30),
        st.text(_PACK_CHARS, max_size=30),
        st.lists(_parts, max_size=5).map(",".join),
    )
)
@example("time=30,nodes=²")
@example("time=30,count=٣")
def test_any_pack_text_is_a_pack_or_a_resource_error(text: str) -> None:
    try:
        pack = Pack.parse(text)
    except ResourceError as exc:
        assert "--pack" in str(exc)
        return
    assert pack.nodes >= 1 and pack.count >= 1 and 0 < pack.time < float("inf")
    assert Pack.parse(pack.text()).nodes == pack.nodes
