"""How many jobs this user may have queued: the ``sacctmgr`` commands and their parsers.

Slurm caps a user's queued jobs (pending and running, each array task counted)
with ``MaxSubmitJobs`` on the user's association, ``GrpSubmitJobs`` on it, and
``MaxSubmitJobsPerUser`` / ``GrpSubmitJobs`` on a QOS.  A job past the cap is
refused at submission (``AssocMaxSubmitJobLimit``...).  The smallest of the
caps found is taken: feeding below a looser cap is only slower, never refused.
The parent accounts' group caps are shared with other users and are not read:
a refusal for one of them holds the rest of a sweep back all the same
(``LimitRefusedError``).  Pure: no I/O.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

#: sacctmgr's field names, in the order the rows are parsed
ASSOC_FIELDS = "Cluster,Account,MaxSubmit,GrpSubmit,DefaultQOS,QOS"
QOS_FIELDS = "Name,MaxSubmitPU,GrpSubmit"


def user_argv() -> List[str]:
    """The login name the association is kept under (the executor's user)."""
    return ["id", "-un"]


def assoc_argv(user: str) -> List[str]:
    return [
        "sacctmgr",
        "--noheader",
        "--parsable2",
        "show",
        "assoc",
        # Separate words: sacctmgr refuses "where user=X" as one ("Unknown condition").
        "where",
        f"user={user}",
        f"format={ASSOC_FIELDS}",
    ]


def qos_argv() -> List[str]:
    return ["sacctmgr", "--noheader", "--parsable2", "show", "qos", f"format={QOS_FIELDS}"]


def _number(text: str) -> Optional[int]:
    text = text.strip()
    return int(text) if text.isdigit() else None


def parse_assoc(
    text: str, cluster: Optional[str], account: Optional[str] = None
) -> Tuple[List[int], List[str]]:
    """The caps on the user's associations (of ``cluster`` when known; of ``account``
    when given, else of every account), and the QOS names their jobs run under by
    default ("normal" when none is set)."""
    caps: List[int] = []
    qos_names: List[str] = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 6:
            continue
        row_cluster, row_account, max_submit, grp_submit, default_qos, qos = fields[:6]
        if cluster and row_cluster and row_cluster != cluster:
            continue
        if account and row_account != account:
            continue
        caps += [n for n in (_number(max_submit), _number(grp_submit)) if n is not None]
        allowed = [name for name in qos.split(",") if name]
        qos_names.append(default_qos or (allowed[0] if len(allowed) == 1 else "normal"))
    return caps, qos_names


def parse_qos(text: str, names: List[str]) -> List[int]:
    """The per-user and group submit caps of the QOS in ``names``."""
    caps: List[int] = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 3 or fields[0] not in names:
            continue
        caps += [n for n in (_number(fields[1]), _number(fields[2])) if n is not None]
    return caps


def smallest(caps: List[int]) -> Optional[int]:
    """The cap that binds first; ``None`` where none is set."""
    return min(caps) if caps else None
