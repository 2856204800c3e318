"""The sacctmgr commands and parsers of a user's cap on queued jobs (``slurm.commands``),
on output recorded from the Slurm 22.05 test cluster, and on any text at all."""

from typing import List

from hypothesis import given
from hypothesis import strategies as st

from hpcbridge.schedulers.slurm import cluster as slurm_cluster

#: sacctmgr --noheader --parsable2 show assoc where user=root format=... (root in two accounts)
ASSOC = "hpcbridge|hpcb|50||normal|fast,normal\nhpcbridge|root|50|||normal\nother|hpcb|7|||\n"
QOS = "normal|||\nfast|20|100\n"


def test_the_condition_is_separate_words() -> None:
    argv = slurm_cluster.assoc_argv("root")
    assert argv[argv.index("where") + 1] == "user=root"  # one word: "Unknown condition"
    assert all(" " not in word for word in argv)


def test_the_caps_of_this_cluster_and_the_default_qos() -> None:
    caps, qos = slurm_cluster.parse_assoc(ASSOC, "hpcbridge")
    assert caps == [50, 50] and qos == ["normal", "normal"]
    assert min(caps + slurm_cluster.parse_qos(QOS, qos), default=None) == 50


def test_a_qos_cap_that_binds_first_and_no_cap_at_all() -> None:
    assert slurm_cluster.parse_qos(QOS, ["fast"]) == [20, 100]
    caps, _ = slurm_cluster.parse_assoc("hpcbridge|hpcb||||\n", "hpcbridge")
    assert min(caps, default=None) is None
    assert slurm_cluster.parse_assoc(ASSOC, None)[0] == [50, 50, 7]  # cluster unknown: every row


def test_the_caps_of_one_account_only_when_it_is_given() -> None:
    caps, qos = slurm_cluster.parse_assoc(ASSOC, "hpcbridge", "root")
    assert caps == [50] and qos == ["normal"]
    assert slurm_cluster.parse_assoc(ASSOC, "hpcbridge", "nosuch") == ([], [])


#: sacctmgr-like rows: fields of digits, names, separators and any other characters,
#: with what looks like a number to Python but is none to ``int`` ("²") or to Slurm
ODD = st.sampled_from(["²", "٣", "-1", " 7 ", "1e3", "N", ""])
FIELD = st.one_of(st.text(max_size=6), st.from_regex(r"[0-9]{1,4}", fullmatch=True), ODD)
ROWS = st.lists(st.lists(FIELD, max_size=8).map("|".join), max_size=6).map("\n".join)


@given(ROWS, st.one_of(st.none(), st.text(max_size=4)), st.one_of(st.none(), st.text(max_size=4)))
def test_any_text_gives_caps_and_qos_names_never_an_error(
    text: str, cluster: str, account: str
) -> None:
    caps, qos = slurm_cluster.parse_assoc(text, cluster, account)
    assert all(isinstance(cap, int) and cap >= 0 for cap in caps)
    assert all(isinstance(name, str) for name in qos)
    assert all(isinstance(cap, int) and cap >= 0 for cap in slurm_cluster.parse_qos(text, qos))


@given(st.lists(st.from_regex(r"[0-9]{1,5}", fullmatch=True), min_size=1, max_size=3))
def test_every_number_in_a_row_of_this_cluster_is_a_cap(numbers: List[str]) -> None:
    max_submit, grp_submit = numbers[0], numbers[-1]
    caps, _ = slurm_cluster.parse_assoc(f"c|a|{max_submit}|{grp_submit}|normal|\n", "c")
    assert caps == [int(max_submit), int(grp_submit)]
