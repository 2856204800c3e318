"""The ``hpcbridge`` command line: every subcommand and flag, as one table."""

from __future__ import annotations

import argparse
from typing import Callable

from .. import __version__
from ..model import JobState
from ..resources import RESOURCE_KEYS
from ..schedulers.native_options import NATIVE_SCHEDULERS
from ..settings.schedulers import SCHEDULERS
from .exits import EXIT_CODES_HELP

# The short flags sbatch and flux share (same meaning in both; -q is --qos to
# sbatch and --queue to flux, which is where our qos goes).
_SHORT_FLAGS = {
    "time": "-t",
    "nodes": "-N",
    "ntasks": "-n",
    "cpus_per_task": "-c",
    "partition": "-p",
    "account": "-A",
    "qos": "-q",
    "constraint": "-C",
    "job_name": "-J",
}

#: what a flag's value looks like, where its key's name does not say
_METAVARS = {"signal": "[B:]SIG[@SECONDS]", "begin": "TIME", "gres": "SPEC", "mem_per_cpu": "MEM"}

#: the jobs the table shows without --limit or --all: the newest
TABLE_JOBS = 500

_CACHED_HELP = (
    "print the states as last recorded, without asking the schedulers "
    "(by default every unfinished job is asked about first)"
)


def _seconds(text: str) -> float:
    """A number of seconds, 0 or more (``--timeout -1`` would otherwise end every wait)."""
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not number >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, got {text}")
    return number


def _interval(text: str) -> float:
    """A number of seconds above 0."""
    number = _seconds(text)
    if number == 0:
        raise argparse.ArgumentTypeError("must be above 0 seconds, got 0")
    return number


def _at_least_one(text: str) -> int:
    """A count of 1 or more (``--limit 0`` and ``-1`` would otherwise list everything)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {number}")
    return number


def _add_resource_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("resources (scheduler-neutral; see README)")
    for key in RESOURCE_KEYS:
        if key in ("output", "native"):
            continue
        flag = f"--{key.replace('_', '-')}"
        if key == "exclusive":
            group.add_argument(flag, dest=key, action="store_const", const=True)
        elif key == "requeue":
            group.add_argument(flag, dest=key, action=argparse.BooleanOptionalAction)
        else:
            flags = [_SHORT_FLAGS[key], flag] if key in _SHORT_FLAGS else [flag]
            group.add_argument(*flags, dest=key, metavar=_METAVARS.get(key, key.upper()))
    for scheduler in NATIVE_SCHEDULERS:
        group.add_argument(
            f"--{scheduler}-option",
            dest=f"{scheduler}_options",
            action="append",
            metavar="OPT",
            help=f"an option in {scheduler}'s own words, value attached "
            f"(--{scheduler}-option=--name=value; repeatable), checked before anything is "
            f"staged; applied on {scheduler} only",
        )


def _add_target_flags(parser: argparse.ArgumentParser, scheduler: bool = True) -> None:
    if scheduler:
        parser.add_argument("--scheduler", choices=SCHEDULERS)
    parser.add_argument("--transport", choices=("local", "ssh"))
    parser.add_argument("--flux-uri", dest="flux_uri", metavar="URI")


def _add_wait_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--poll-interval",
        type=_interval,
        metavar="S",
        help="seconds between two status rounds towards the scheduler (default: "
        "HPCBRIDGE_POLL_INTERVAL, else 10; an end is seen within a second from the job's "
        "exit-code file)",
    )
    parser.add_argument("--timeout", type=_seconds, help="give up waiting after this many seconds")


def _add_ids(parser: argparse.ArgumentParser, names: bool) -> None:
    """The ids a command takes (``names``: a sweep's or pack's name too), and ``--host``."""
    which = "a job id, or a sweep's or pack's name" if names else None
    parser.add_argument("job_ids", nargs="+", metavar="ID", help=which)
    _add_lookup_flags(parser)


def _add_lookup_flags(parser: argparse.ArgumentParser) -> None:
    """The target flags, and ``--host``: which records an id may mean (see targets.py)."""
    _add_target_flags(parser)
    parser.add_argument(
        "--host",
        metavar="HOST",
        help="only the jobs recorded on HOST (as 'hpcbridge jobs --json' shows it, or the "
        "SSH host as it was given at submission: an ssh-config alias)",
    )


def _add_job_flags(parser: argparse.ArgumentParser, remote_dir: str) -> None:
    """What a job is submitted with: resources, where it goes, ``--nested``, its folder."""
    _add_resource_flags(parser)
    _add_target_flags(parser)
    parser.add_argument(
        "--nested",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Flux: a batch job, a nested instance of its own (--nested), or a plain job "
        "run directly as the job's tasks (--no-nested); default: HPCBRIDGE_FLUX_NESTED, "
        "else batch on the system instance and plain in an enclosing or named one. "
        "Slurm and mock ignore it",
    )
    parser.add_argument("--remote-dir", help=remote_dir)


#: makes one subcommand's parser (name, help text)
Sub = Callable[[str, str], argparse.ArgumentParser]


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=0, help="show log messages")
    common.add_argument("--debug", action="store_true", help="show tracebacks")
    parser = argparse.ArgumentParser(
        prog="hpcbridge",
        description="Submit a batch script to Slurm, Flux or the local mock scheduler, "
        "and follow it to the end - locally or over SSH.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"hpcbridge {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    def sub(name: str, help_text: str) -> argparse.ArgumentParser:
        return commands.add_parser(
            name,
            help=help_text,
            description=help_text,
            parents=[common],
            epilog=EXIT_CODES_HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    _add_submit(sub)
    _add_submit_many(sub)
    _add_following(sub)
    _add_records_and_probes(sub)
    _add_session(sub)
    return parser


def _add_session(sub: Sub) -> None:
    """``login``, ``logout`` (the OpenSSH backend's master connection)."""
    for name, what in (
        ("login", "open the SSH master connection once (a code or a push may be asked now)"),
        ("logout", "close the SSH master connection"),
    ):
        command = sub(name, what + "; HPCBRIDGE_SSH_BACKEND=openssh rides it")
        command.add_argument(
            "host", nargs="?", metavar="HOST", help="the login node (default: HPCBRIDGE_SSH_HOST)"
        )


def _add_submit(sub: Sub) -> None:
    submit = sub("submit", "submit a batch script; prints the job id")
    submit.add_argument("script", metavar="SCRIPT")
    # default=[]: without one argparse counts a "*" positional as required ("required: ARG")
    submit.add_argument(
        "script_args", nargs="*", default=[], metavar="ARG", help="arguments for the script"
    )
    _add_job_flags(submit, "the job's folder (default: a new one per job)")
    submit.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a variable in the job's environment (repeatable)",
    )
    _add_submit_tail(submit, "print the exact command (or jobspec) and submit nothing")


def _add_submit_many(sub: Sub) -> None:
    many = sub("submit-many", "submit many jobs at once (one id per line, in order)")
    many.add_argument("scripts", nargs="+", metavar="SCRIPT")
    many.add_argument(
        "--args-file",
        metavar="FILE",
        help="one job per line: the line's words are the arguments for SCRIPT "
        "(with a single SCRIPT)",
    )
    _add_job_flags(many, "the jobs' folder (default: a new one)")
    many.add_argument(
        "--max-queued",
        type=_at_least_one,
        metavar="N",
        help="at most N of these jobs queued at once, more sent as jobs end (default: "
        "HPCBRIDGE_MAX_QUEUED, else the cluster's own cap on your queued jobs)",
    )
    many.add_argument(
        "--sweep",
        metavar="NAME",
        help="record the jobs as a sweep of this name (wait, jobs and cancel take it; "
        "'hpcbridge wait NAME' goes on feeding it if this command dies)",
    )
    many.add_argument(
        "--pack",
        metavar="SPEC",
        help="Slurm: run the jobs as plain Flux jobs in allocations hpcbridge holds and "
        "releases, SPEC 'nodes=N,time=T[,count=K][,cpus_per_node=C][,partition=P]"
        "[,account=A][,qos=Q]' - whole nodes unless cpus_per_node (waits for the jobs; its "
        "name, --sweep or made, is said on stderr for cancel/wait NAME; flux on the compute "
        "nodes: HPCBRIDGE_FLUX_COMMAND)",
    )
    _add_submit_tail(
        many, "print the exact command (or jobspec) of each submission and submit nothing"
    )


def _add_submit_tail(parser: argparse.ArgumentParser, dry_run: str) -> None:
    """What ``submit`` and ``submit-many`` share: parents, following, dry run, JSON."""
    parser.add_argument(
        "--after",
        action="append",
        default=[],
        metavar="ID",
        help="start only after job ID completed (repeatable)",
    )
    parser.add_argument(
        "--wait", action="store_true", help="follow the jobs; exit 0 only if all COMPLETED"
    )
    _add_wait_flags(parser)
    parser.add_argument("--dry-run", action="store_true", help=dry_run)
    parser.add_argument("--json", action="store_true")


def _add_following(sub: Sub) -> None:
    """``status``, ``wait``, ``logs``, ``cancel``: the commands that take recorded ids."""
    status = sub("status", "show the state of jobs (a sweep or pack: its state and counts)")
    _add_ids(status, names=True)
    status.add_argument("--json", action="store_true")

    wait = sub("wait", "wait for jobs (or a sweep or pack, fed on) to end, showing each change")
    _add_ids(wait, names=True)
    _add_wait_flags(wait)
    wait.add_argument("--json", action="store_true")

    logs = sub("logs", "print a job's output")
    logs.add_argument("job_id", metavar="ID")
    _add_lookup_flags(logs)
    logs.add_argument(
        "-f", "--follow", action="store_true", help="keep printing until the job ends"
    )

    cancel = sub(
        "cancel", "cancel jobs (a sweep: all its jobs, and send no more; a pack: its allocations)"
    )
    _add_ids(cancel, names=True)


COST_HELP = """\
CPU-hours, GPU-hours and cost of the recorded jobs, from what the scheduler charged:
Slurm's sacct (CPUTimeRAW: the CPUs it allocated x elapsed, a whole node for --exclusive;
GPUs and billing from AllocTRES), Flux's cores and GPUs of the job's R x its run time -
read once when a job has ended and kept in its record. Each job is counted once: a pack's
allocations, its tasks listed under them and not added again. Mock jobs are shown apart
and charged nothing.

Prices: HPCBRIDGE_CPU_COST_PER_HOUR and HPCBRIDGE_GPU_COST_PER_HOUR (per CPU-hour and
GPU-hour; none set: every cost is 0, and the command says so)."""


def _add_records_and_probes(sub: Sub) -> None:
    """``jobs``, ``cost``, ``doctor``, ``uri``."""
    jobs = sub("jobs", "list the recorded jobs in their states now (a sweep or pack as one line)")
    jobs.add_argument(
        "sweep", nargs="?", metavar="NAME", help="list this sweep's jobs or this pack's tasks"
    )
    jobs.add_argument("--state", type=str.upper, choices=[s.value for s in JobState])
    many = jobs.add_mutually_exclusive_group()
    many.add_argument(
        "--limit",
        type=_at_least_one,
        metavar="N",
        help=f"only the newest N jobs (the table: the newest {TABLE_JOBS} unless --all)",
    )
    many.add_argument(
        "--all", action="store_true", help="the table lists every job (--json always does)"
    )
    jobs.add_argument("--json", action="store_true")
    jobs.add_argument("--cached", action="store_true", help=_CACHED_HELP)

    cost = sub("cost", "CPU-hours, GPU-hours and cost of the recorded jobs")
    cost.description = COST_HELP
    cost.add_argument("--json", action="store_true")
    cost.add_argument(
        "--cached",
        action="store_true",
        help=_CACHED_HELP + "; a job's charge not read yet is estimated (what it asked for x "
        "its elapsed time, basis 'requested')",
    )
    cost.add_argument("--scheduler", choices=SCHEDULERS, help="only this scheduler's jobs")
    cost.add_argument(
        "--sweep", metavar="NAME", help="only this sweep's or pack's jobs (a pack: its allocations)"
    )
    cost.add_argument(
        "--since", metavar="DATE", help="only jobs submitted then or later (ISO: 2026-12-01)"
    )
    cost.add_argument(
        "--until",
        metavar="DATE",
        help="only jobs submitted before then (a date alone: up to the end of that day)",
    )

    doctor = sub("doctor", "say what is usable here, and why not when it is not")
    _add_target_flags(doctor)
    doctor.add_argument("--json", action="store_true")

    uri = sub("uri", "resolve a Flux target (slurm:ID, lsf:ID, a Flux job id) to a FLUX_URI")
    uri.add_argument("target")
    uri.add_argument("--local", action="store_true", help="print the local:// form")
    _add_target_flags(uri, scheduler=False)  # always Flux's
