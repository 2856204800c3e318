"""The sacctmgr commands and parsers of a user's cap on queued jobs (``slurm.commands``),
on output recorded from the Slurm 22.05 test cluster."""

from hpcbridge.schedulers.slurm import commands

#: sacctmgr --noheader --parsable2 show assoc where user=root format=... (root in two accounts)
ASSOC = "hpcbridge|hpcb|50||normal|fast,normal\nhpcbridge|root|50|||normal\nother|hpcb|7|||\n"
QOS = "normal|||\nfast|20|100\n"


def test_the_condition_is_separate_words() -> None:
    argv = commands.assoc_argv("root")
    assert argv[argv.index("where") + 1] == "user=root"  # one word: "Unknown condition"
    assert all(" " not in word for word in argv)


def test_the_caps_of_this_cluster_and_the_default_qos() -> None:
    caps, qos = commands.parse_assoc(ASSOC, "hpcbridge")
    assert caps == [50, 50] and qos == ["normal", "normal"]
    assert min(caps + commands.parse_qos(QOS, qos), default=None) == 50


def test_a_qos_cap_that_binds_first_and_no_cap_at_all() -> None:
    assert commands.parse_qos(QOS, ["fast"]) == [20, 100]
    caps, _ = commands.parse_assoc("hpcbridge|hpcb||||\n", "hpcbridge")
    assert min(caps, default=None) is None
    assert commands.parse_assoc(ASSOC, None)[0] == [50, 50, 7]  # cluster unknown: every row


def test_the_caps_of_one_account_only_when_it_is_given() -> None:
    caps, qos = commands.parse_assoc(ASSOC, "hpcbridge", "root")
    assert caps == [50] and qos == ["normal"]
    assert commands.parse_assoc(ASSOC, "hpcbridge", "nosuch") == ([], [])
