"""What a Slurm cluster says of itself and of a user's jobs beyond their states, and the
answers' parsers: scontrol (a job's record, the configuration, the version), sacctmgr (the
caps on queued jobs), sacct's charges (``hpcbridge cost``), and what ``hpcbridge doctor``
makes of them.  Pure, no I/O."""

from __future__ import annotations

import logging
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ...engine.driver import Reply
from ...errors import SchedulerUnavailableError
from ...model import Charge
from ..native_options import option_names
from .commands import scheduler_message
from .ids import normalize_job_id
from .queries import sacct_argv
from .status import map_state

log = logging.getLogger("hpcbridge.slurm")

# -- scontrol --------------------------------------------------------------------------


def parse_scontrol_record(text: str) -> Dict[str, str]:
    """``Key=Value`` pairs of a ``scontrol show`` record (one-line or not)."""
    pairs: Dict[str, str] = {}
    for match in re.finditer(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=(\S*)", text):
        pairs.setdefault(match.group(1), match.group(2))
    return pairs


def output_of_record(fields: Mapping[str, str]) -> Optional[str]:
    """A job's output file from its ``scontrol show job`` record, if it has one."""
    path = fields.get("StdOut")
    return path if path and path != "(null)" else None


def parse_scontrol_config(text: str) -> Dict[str, str]:
    """``scontrol show config``: ``Name = value`` lines."""
    values: Dict[str, str] = {}
    for line in text.splitlines():
        name, separator, value = line.partition("=")
        if separator and name.strip() and " " not in name.strip():
            values[name.strip()] = value.strip()
    return values


def max_array_size(config: Mapping[str, str], default: int = 1001) -> int:
    """``MaxArraySize``: an array may use indices 0 .. MaxArraySize-1."""
    match = re.match(r"\d+", config.get("MaxArraySize", ""))
    return int(match.group(0)) if match else default


def parse_version(text: str) -> Optional[Tuple[int, ...]]:
    """``slurm-wlm 22.05.8`` / ``slurm 23.11.1`` -> ``(22, 5, 8)``."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        return None
    return tuple(int(part) for part in match.groups() if part is not None)


def format_version(version: Tuple[int, ...]) -> str:
    """``(22, 5, 8)`` -> ``22.05.8``, Slurm's own spelling."""
    parts = [str(version[0])] + [f"{version[1]:02d}"] + [str(p) for p in version[2:]]
    return ".".join(parts)


# -- sacctmgr: the caps on a user's queued jobs ---------------------------------------
# MaxSubmitJobs and GrpSubmitJobs on the user's association, MaxSubmitJobsPerUser and
# GrpSubmitJobs on a QOS; the parent accounts' shared caps are not read.

#: sacctmgr's field names, in the order the rows are parsed
ASSOC_FIELDS = "Cluster,Account,MaxSubmit,GrpSubmit,DefaultQOS,QOS"
QOS_FIELDS = "Name,MaxSubmitPU,GrpSubmit"


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


def _numbers(*texts: str) -> List[int]:
    """The fields that are whole numbers in ASCII digits (``isdigit`` takes "²" too)."""
    return [int(text.strip()) for text in texts if _DIGITS.fullmatch(text.strip())]


_DIGITS = re.compile(r"[0-9]+")


def parse_assoc(
    text: str, cluster: Optional[str], account: Optional[str] = None
) -> Tuple[List[int], List[str]]:
    """The caps on the user's associations (of ``cluster`` when known; of ``account`` when
    given), and the QOS names their jobs run under by default ("normal" when none is set)."""
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
        caps += _numbers(max_submit, grp_submit)
        allowed = [name for name in qos.split(",") if name]
        qos_names.append(default_qos or (allowed[0] if len(allowed) == 1 else "normal"))
    return caps, qos_names


def parse_qos(text: str, names: List[str]) -> List[int]:
    """The per-user and group submit caps of the QOS in ``names``."""
    caps: List[int] = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) >= 3 and fields[0] in names:
            caps += _numbers(fields[1], fields[2])
    return caps


# -- what a job was charged (hpcbridge cost) ----------------------------------

#: sacct's columns for a job's charge, in order
CHARGE_FIELDS = ("JobID", "State", "ElapsedRaw", "CPUTimeRAW", "AllocTRES")


def sacct_charges_argv(job_ids: Sequence[str]) -> List[str]:
    """One sacct for what these jobs were charged."""
    return sacct_argv(job_ids, CHARGE_FIELDS)


def parse_tres(text: str) -> Dict[str, float]:
    """``billing=2,cpu=2,gres/gpu=1,mem=1000M,node=1`` -> the counted ones (a size such as
    ``mem=1000M`` is left out)."""
    found: Dict[str, float] = {}
    for item in text.split(","):
        name, equals, value = item.strip().partition("=")
        if not equals:
            continue
        try:
            found[name] = float(value)
        except ValueError:
            continue
    return found


def parse_sacct_charges(text: str) -> Dict[str, Charge]:
    """What each job was charged, from ``sacct_charges_argv``'s answer: CPU-seconds from
    ``CPUTimeRAW`` (the CPUs Slurm allocated x elapsed, ``--exclusive``'s whole node
    included), GPU- and billing-seconds from ``AllocTRES`` x ``ElapsedRaw`` (later rows win:
    requeues); ``final`` once sacct's own state is an end (slurmdbd hears of an end after
    squeue: till then CPUTimeRAW still grows).  A row that is not a job's (an array's
    waiting tasks, ``123_[4-9]``) or that does not parse is left out."""
    charges: Dict[str, Charge] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) < len(CHARGE_FIELDS) or "[" in fields[0]:
            continue
        try:
            job_id = normalize_job_id(fields[0])
            elapsed, cpu_seconds = float(fields[2]), float(fields[3])
        except ValueError:
            continue
        tres = parse_tres(fields[4])
        billing = tres.get("billing")
        charges[job_id] = Charge(
            cpu_seconds,
            tres.get("gres/gpu", 0.0) * elapsed,
            None if billing is None else billing * elapsed,
            final=map_state(fields[1]).is_terminal,
        )
    return charges


# -- the answers, as the drivers read them -------------------------------------------


def config_reply(reply: Reply) -> Optional[Dict[str, str]]:
    """``scontrol show config``'s answer; ``None`` (said in the log) when it failed."""
    if reply.ok:
        return parse_scontrol_config(reply.stdout)
    log.warning("scontrol show config failed: %s", scheduler_message(reply.message()))
    return None


def options_reply(reply: Reply, where: str) -> Dict[str, str]:
    """The option names ``sbatch --help`` lists (``native_options.option_names``); none
    (said in the log: sbatch itself then judges a native option) when it cannot be read."""
    names = option_names(reply.stdout) if reply.ok else {}
    if not names:
        log.warning(
            "cannot read sbatch's options on %s (%s): native options are checked "
            "against hpcbridge's own only",
            where,
            scheduler_message(reply.message()) or "no options listed",
        )
    return names


def caps_reply(
    assoc: Reply, qos: Optional[Reply], cluster: Optional[str], account: Optional[str]
) -> Optional[int]:
    """The smallest cap on the user's queued jobs from sacctmgr's associations and QOS
    (``qos``: ``None`` when not asked); ``None`` (said in the log) when none is known."""
    if not assoc.ok:
        log.info("no cap on queued jobs known: %s", scheduler_message(assoc.message()))
        return None
    caps, qos_names = parse_assoc(assoc.stdout, cluster, account)
    if qos is not None and qos.ok:
        caps += parse_qos(qos.stdout, qos_names)
    return min(caps, default=None)


def slurm_conf(
    envs: Sequence[Mapping[str, str]], process_env: Mapping[str, str], local: bool
) -> str:
    """The slurm.conf Slurm's commands read: the first ``SLURM_CONF`` of ``envs`` (the
    settings', the executor's), else - commands run here - this process's."""
    for env in envs:
        if env.get("SLURM_CONF"):
            return env["SLURM_CONF"]
    return process_env.get("SLURM_CONF", "") if local else ""


def limit_key(login: str, conf: str, account: Optional[str]) -> str:
    """What a cap on queued jobs is kept by: the login (``user@host``), the slurm.conf,
    the account."""
    return "|".join((login, conf, account or ""))


def version_reply(reply: Reply) -> Optional[str]:
    """``scontrol --version``'s answer as Slurm spells it (22.05.8); ``None`` when unknown."""
    parsed = parse_version(reply.stdout) if reply.ok else None
    return format_version(parsed) if parsed else None


def output_reply(reply: Reply) -> Optional[str]:
    """``scontrol show job``'s answer: where the job writes its output, if known."""
    return output_of_record(parse_scontrol_record(reply.stdout)) if reply.ok else None


def charges_reply(reply: Reply) -> Dict[str, Charge]:
    """sacct's charges (``parse_sacct_charges``); ``SchedulerUnavailableError`` when it failed."""
    if not reply.ok:
        message = scheduler_message(reply.message())
        raise SchedulerUnavailableError(f"sacct cannot say what jobs were charged: {message}")
    return parse_sacct_charges(reply.stdout)


def settle_time(config: Mapping[str, str]) -> float:
    """How long a key must stay absent before a lost submission is surely absent:
    slurmctld's MessageTimeout (at least 5 s), or 10 s."""
    try:
        return max(float(config.get("MessageTimeout", "10").split()[0]), 5.0)
    except ValueError:
        return 10.0
