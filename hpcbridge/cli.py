"""The ``hpcbridge`` command: submit, follow, read logs, cancel, list, cost, doctor."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Sequence

from . import __version__
from .config import Settings
from .errors import (
    ConfigurationError,
    JobNotFoundError,
    JobSubmissionError,
    JobTimeoutError,
    ResourceError,
    SchedulerAdapterError,
    SchedulerUnavailableError,
    TransportError,
)
from .model import JobState, JobStatus
from .resources import RESOURCE_KEYS

EXIT_OK = 0
EXIT_JOB_NOT_COMPLETED = 1
EXIT_USAGE = 2
EXIT_SUBMISSION = 3
EXIT_NOT_FOUND = 4
EXIT_TIMEOUT = 5
EXIT_TRANSPORT = 6
EXIT_UNAVAILABLE = 7
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """\
exit codes:
  0    success (for --wait / wait: every job COMPLETED)
  1    a job ended FAILED, CANCELLED or TIMEOUT
  2    bad usage, a bad resource value or a bad setting (nothing was submitted)
  3    the scheduler refused the submission, or the script was not found
  4    a job could not be found in the queue, in history or in its folder
  5    a scheduler command or the wait ran past its time budget
  6    the transport failed (SSH connection, host key, file transfer)
  7    the scheduler is not usable from here
  130  interrupted
"""

log = logging.getLogger("hpcbridge")


# -- argument parsing ------------------------------------------------------------


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


def _add_resource_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("resources (scheduler-neutral; see README)")
    for key in RESOURCE_KEYS:
        if key == "output":
            continue
        flags = [f"--{key.replace('_', '-')}"]
        if key in _SHORT_FLAGS:
            flags.insert(0, _SHORT_FLAGS[key])
        group.add_argument(*flags, dest=key, metavar=key.upper())


def _add_target_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scheduler", choices=("mock", "slurm", "flux"))
    parser.add_argument("--transport", choices=("local", "ssh"))
    parser.add_argument("--flux-uri", dest="flux_uri", metavar="URI")


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

    submit = sub("submit", "submit a batch script; prints the job id")
    submit.add_argument("script")
    submit.add_argument("script_args", nargs="*", metavar="ARG", help="arguments for the script")
    _add_resource_flags(submit)
    _add_target_flags(submit)
    submit.add_argument("--remote-dir", help="the job's folder (default: a new one per job)")
    submit.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a variable in the job's environment (repeatable)",
    )
    submit.add_argument(
        "--after",
        action="append",
        default=[],
        metavar="ID",
        help="start only after job ID completed (repeatable)",
    )
    submit.add_argument(
        "--wait", action="store_true", help="follow the job; exit 0 only if COMPLETED"
    )
    submit.add_argument("--poll-interval", type=float, default=5.0)
    submit.add_argument("--timeout", type=float, help="give up waiting after this many seconds")
    submit.add_argument(
        "--dry-run",
        action="store_true",
        help="print the exact command (or jobspec) and submit nothing",
    )
    submit.add_argument("--json", action="store_true")

    many = sub("submit-many", "submit many jobs at once (one id per line, in order)")
    many.add_argument("scripts", nargs="+", metavar="SCRIPT")
    many.add_argument(
        "--args-file",
        metavar="FILE",
        help="one job per line: the line's words are the arguments for SCRIPT "
        "(with a single SCRIPT)",
    )
    _add_resource_flags(many)
    _add_target_flags(many)
    many.add_argument("--remote-dir")
    many.add_argument("--after", action="append", default=[], metavar="ID")
    many.add_argument("--wait", action="store_true")
    many.add_argument("--poll-interval", type=float, default=5.0)
    many.add_argument("--timeout", type=float)
    many.add_argument("--json", action="store_true")

    status = sub("status", "show the state of jobs")
    status.add_argument("job_ids", nargs="+", metavar="ID")
    _add_target_flags(status)
    status.add_argument("--json", action="store_true")

    wait = sub("wait", "wait for jobs to end, showing each state change")
    wait.add_argument("job_ids", nargs="+", metavar="ID")
    _add_target_flags(wait)
    wait.add_argument("--poll-interval", type=float, default=5.0)
    wait.add_argument("--timeout", type=float)
    wait.add_argument("--json", action="store_true")

    logs = sub("logs", "print a job's output")
    logs.add_argument("job_id", metavar="ID")
    _add_target_flags(logs)
    logs.add_argument(
        "-f", "--follow", action="store_true", help="keep printing until the job ends"
    )

    cancel = sub("cancel", "cancel jobs")
    cancel.add_argument("job_ids", nargs="+", metavar="ID")
    _add_target_flags(cancel)

    jobs = sub("jobs", "list the recorded jobs")
    jobs.add_argument("--state", type=str.upper, choices=[s.value for s in JobState])
    jobs.add_argument("--limit", type=int, help="only the newest N jobs")
    jobs.add_argument("--json", action="store_true")

    cost = sub("cost", "CPU-hours, GPU-hours and cost of the recorded jobs")
    cost.add_argument("--json", action="store_true")

    doctor = sub("doctor", "say what is usable here, and why not when it is not")
    _add_target_flags(doctor)
    doctor.add_argument("--json", action="store_true")

    uri = sub("uri", "resolve a Flux target (slurm:ID, lsf:ID, a Flux job id) to a FLUX_URI")
    uri.add_argument("target")
    uri.add_argument("--local", action="store_true", help="print the local:// form")
    _add_target_flags(uri)
    return parser


# -- helpers -----------------------------------------------------------------------


def _settings(args: argparse.Namespace, scheduler: Optional[str] = None) -> Settings:
    overrides: Dict[str, Any] = {}
    for name in ("transport", "flux_uri"):
        if getattr(args, name, None):
            overrides[name] = getattr(args, name)
    chosen = getattr(args, "scheduler", None) or scheduler
    if chosen:
        overrides["scheduler"] = chosen
    return Settings.from_env(**overrides)


def _adapter(args: argparse.Namespace, scheduler: Optional[str] = None) -> Any:
    from .factory import adapter_from_settings

    return adapter_from_settings(_settings(args, scheduler))


def _adapter_for_ids(args: argparse.Namespace, job_ids: Sequence[str]) -> Any:
    """The adapter that submitted these jobs, from their records.

    The records say which scheduler (unless --scheduler) and, for Flux, which
    instance (unless --flux-uri): a job in a nested broker is followed there
    even when HPCBRIDGE_FLUX_URI is no longer set.
    """
    from .factory import adapter_from_settings
    from .store import JobStore

    settings = _settings(args)
    store = JobStore(settings.database_path)
    records = [record for record in map(store.get, job_ids) if record is not None]
    schedulers = {record.scheduler for record in records}
    if args.scheduler:
        schedulers = {args.scheduler}
    if len(schedulers) > 1:
        raise ConfigurationError(
            f"these ids belong to different schedulers ({', '.join(sorted(schedulers))}); "
            "give --scheduler"
        )
    scheduler = schedulers.pop() if schedulers else None
    uris = {record.flux_uri for record in records if record.scheduler == "flux"} - {None}
    if scheduler == "flux" and not getattr(args, "flux_uri", None) and len(uris) == 1:
        return adapter_from_settings(_settings(args, scheduler).with_(flux_uri=uris.pop()))
    if len(uris) > 1 and not getattr(args, "flux_uri", None):
        raise ConfigurationError("these Flux jobs are in different instances; give --flux-uri")
    return adapter_from_settings(_settings(args, scheduler))


def _resources(args: argparse.Namespace) -> Dict[str, Any]:
    return {
        key: getattr(args, key) for key in RESOURCE_KEYS if getattr(args, key, None) is not None
    }


def _environment(assignments: Sequence[str]) -> Dict[str, str]:
    found: Dict[str, str] = {}
    for assignment in assignments:
        name, equals, value = assignment.partition("=")
        if not equals or not name.isidentifier():
            raise ConfigurationError(f"--env expects NAME=VALUE, got {assignment!r}")
        found[name] = value
    return found


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def _status_line(status: JobStatus) -> str:
    parts = [f"{status.job_id}", status.state.value]
    if status.exit_code is not None:
        parts.append(f"exit={status.exit_code}")
    if status.reason:
        parts.append(f"reason={status.reason}")
    if status.native_state and status.native_state != status.state.value:
        parts.append(f"native={status.native_state}")
    return "  ".join(parts)


def _announce(status: JobStatus) -> None:
    stamp = datetime.now().strftime("%H:%M:%S")
    print(f"{stamp}  {_status_line(status)}", file=sys.stderr, flush=True)


class _Progress:
    """Counts per state on one rewritten terminal line (only on a TTY)."""

    def __init__(self) -> None:
        self.shown = False

    def __call__(self, statuses: Dict[str, JobStatus]) -> None:
        counts: Dict[str, int] = {}
        for status in statuses.values():
            counts[status.state.value] = counts.get(status.state.value, 0) + 1
        line = "  ".join(f"{count} {state}" for state, count in sorted(counts.items()))
        sys.stderr.write(f"\r\033[K{line}")
        sys.stderr.flush()
        self.shown = True

    def finish(self) -> None:
        if self.shown:
            sys.stderr.write("\n")


def _wait_and_report(adapter: Any, job_ids: List[str], args: argparse.Namespace) -> int:
    many = len(job_ids) > 1
    progress = _Progress() if many and sys.stderr.isatty() else None
    try:
        final = adapter.wait_all(
            job_ids,
            poll_interval=args.poll_interval,
            timeout=args.timeout,
            # With many jobs on a terminal, one progress line beats a line per change.
            on_change=None if progress else _announce,
            on_poll=progress,
        )
    finally:
        if progress is not None:
            progress.finish()
    if getattr(args, "json", False):
        statuses = [final[job_id].to_json() for job_id in job_ids]
        _print_json(statuses[0] if len(statuses) == 1 else statuses)
    ok = all(status.state is JobState.COMPLETED for status in final.values())
    return EXIT_OK if ok else EXIT_JOB_NOT_COMPLETED


# -- commands ----------------------------------------------------------------------


def cmd_submit(args: argparse.Namespace) -> int:
    adapter = _adapter(args)
    resources = _resources(args)
    if args.dry_run:
        print(adapter.describe_submission(args.script, resources, args.remote_dir, args.after))
        return EXIT_OK
    job_id = adapter.submit_job(
        args.script,
        resources,
        remote_dir=args.remote_dir,
        depends_on=args.after or None,
        arguments=args.script_args,
        environment=_environment(args.env),
    )
    if args.json:  # with --wait, the final status (which holds the id) is printed instead
        if not args.wait:
            _print_json({"job_id": job_id, "state": "PENDING"})
    else:
        print(job_id, flush=True)
    if not args.wait:
        return EXIT_OK
    return _wait_and_report(adapter, [job_id], args)


def cmd_submit_many(args: argparse.Namespace) -> int:
    adapter = _adapter(args)
    jobs: List[Any] = list(args.scripts)
    if args.args_file:
        if len(args.scripts) != 1:
            raise ConfigurationError("--args-file takes exactly one SCRIPT")
        import shlex

        with open(args.args_file, encoding="utf-8") as handle:
            lines = [line for line in handle if line.strip() and not line.lstrip().startswith("#")]
        jobs = [(args.scripts[0], shlex.split(line)) for line in lines]
    job_ids = adapter.submit_many(
        jobs, _resources(args), depends_on=args.after or None, remote_dir=args.remote_dir
    )
    if args.json:
        if not args.wait:
            _print_json([{"job_id": job_id, "state": "PENDING"} for job_id in job_ids])
    else:
        print("\n".join(job_ids), flush=True)
    if not args.wait:
        return EXIT_OK
    return _wait_and_report(adapter, job_ids, args)


def cmd_status(args: argparse.Namespace) -> int:
    adapter = _adapter_for_ids(args, args.job_ids)
    statuses = adapter.get_job_statuses(args.job_ids)
    ordered = [statuses[adapter.normalize_job_id(job_id)] for job_id in args.job_ids]
    if args.json:
        payload = [status.to_json() for status in ordered]
        _print_json(payload[0] if len(payload) == 1 else payload)
    else:
        for status in ordered:
            print(_status_line(status))
    return EXIT_OK


def cmd_wait(args: argparse.Namespace) -> int:
    adapter = _adapter_for_ids(args, args.job_ids)
    return _wait_and_report(adapter, [adapter.normalize_job_id(j) for j in args.job_ids], args)


def cmd_logs(args: argparse.Namespace) -> int:
    adapter = _adapter_for_ids(args, [args.job_id])
    if not args.follow:
        sys.stdout.write(adapter.get_job_logs(args.job_id))
        return EXIT_OK
    shown = 0
    while True:
        status = adapter.get_job_status(args.job_id)
        text = adapter.get_job_logs(args.job_id)
        if len(text) > shown:
            sys.stdout.write(text[shown:])
            sys.stdout.flush()
            shown = len(text)
        if status.is_terminal:
            text = adapter.get_job_logs(args.job_id)  # what was written at the very end
            sys.stdout.write(text[shown:])
            return EXIT_OK
        time.sleep(1.0)


def cmd_cancel(args: argparse.Namespace) -> int:
    adapter = _adapter_for_ids(args, args.job_ids)
    adapter.cancel_jobs(args.job_ids)
    for job_id in args.job_ids:
        print(f"{job_id} cancel requested")
    return EXIT_OK


def _store(args: argparse.Namespace) -> Any:
    from .store import JobStore

    return JobStore(Settings.from_env().database_path)


def cmd_jobs(args: argparse.Namespace) -> int:
    records = _store(args).list(state=args.state, limit=args.limit)
    if args.json:
        _print_json(
            [
                {
                    **record.status().to_json(),
                    "scheduler": record.scheduler,
                    "host": record.host,
                    "job_name": record.job_name,
                    "remote_dir": record.remote_dir,
                    "submit_time": record.submit_time.isoformat() if record.submit_time else None,
                }
                for record in records
            ]
        )
        return EXIT_OK
    rows = [("JOB ID", "SCHEDULER", "NAME", "STATE", "EXIT", "SUBMITTED", "ELAPSED")]
    for record in records:
        elapsed = ""
        if record.start_time:
            end = record.end_time or datetime.now(timezone.utc)
            elapsed = _format_seconds((end - record.start_time).total_seconds())
        rows.append(
            (
                record.job_id,
                record.scheduler,
                (record.job_name or "")[:24],
                record.state,
                "" if record.exit_code is None else str(record.exit_code),
                record.submit_time.astimezone().strftime("%Y-%m-%d %H:%M:%S")
                if record.submit_time
                else "",
                elapsed,
            )
        )
    _print_table(rows)
    return EXIT_OK


def cmd_cost(args: argparse.Namespace) -> int:
    from .cost import costs

    settings = Settings.from_env()
    rows_data = costs(_store(args).list(), settings.cpu_cost_per_hour, settings.gpu_cost_per_hour)
    total_cpu = sum(row.cpu_hours for row in rows_data)
    total_gpu = sum(row.gpu_hours for row in rows_data)
    total = sum(row.cost for row in rows_data)
    if args.json:
        _print_json(
            {
                "jobs": [row.to_json() for row in rows_data],
                "total": {
                    "cpu_hours": round(total_cpu, 6),
                    "gpu_hours": round(total_gpu, 6),
                    "cost": round(total, 6),
                },
                "prices": {
                    "cpu_per_hour": settings.cpu_cost_per_hour,
                    "gpu_per_hour": settings.gpu_cost_per_hour,
                },
            }
        )
        return EXIT_OK
    rows = [("JOB ID", "SCHEDULER", "STATE", "CPU-H", "GPU-H", "COST")]
    for row in rows_data:
        rows.append(
            (
                row.job_id,
                row.scheduler,
                row.state,
                f"{row.cpu_hours:.4f}",
                f"{row.gpu_hours:.4f}",
                f"{row.cost:.4f}",
            )
        )
    rows.append(("TOTAL", "", "", f"{total_cpu:.4f}", f"{total_gpu:.4f}", f"{total:.4f}"))
    _print_table(rows)
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import run_checks

    checks = run_checks(_settings(args))
    if args.json:
        _print_json([check.to_json() for check in checks])
        return EXIT_OK
    for check in checks:
        mark = "ok " if check.ok else "-- "
        print(f"{mark} {check.name:<22} {check.detail}")
    return EXIT_OK


def cmd_uri(args: argparse.Namespace) -> int:
    from .schedulers.flux.uri import resolve_target_cli

    print(resolve_target_cli(_settings(args, "flux"), args.target, local=args.local))
    return EXIT_OK


def _format_seconds(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _print_table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())


COMMANDS = {
    "submit": cmd_submit,
    "submit-many": cmd_submit_many,
    "status": cmd_status,
    "wait": cmd_wait,
    "logs": cmd_logs,
    "cancel": cmd_cancel,
    "jobs": cmd_jobs,
    "cost": cmd_cost,
    "doctor": cmd_doctor,
    "uri": cmd_uri,
}

_ERROR_EXITS = (
    (ResourceError, EXIT_USAGE),
    (ConfigurationError, EXIT_USAGE),
    (JobSubmissionError, EXIT_SUBMISSION),
    (JobNotFoundError, EXIT_NOT_FOUND),
    (JobTimeoutError, EXIT_TIMEOUT),
    (TransportError, EXIT_TRANSPORT),
    (SchedulerUnavailableError, EXIT_UNAVAILABLE),
    (SchedulerAdapterError, EXIT_UNAVAILABLE),
)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("hpcbridge: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (SchedulerAdapterError, ValueError, OSError) as exc:
        if args.debug:
            raise
        print(f"hpcbridge: error: {_one_line(exc)}", file=sys.stderr)
        for kind, code in _ERROR_EXITS:
            if isinstance(exc, kind):
                return code
        return EXIT_USAGE if isinstance(exc, ValueError) else EXIT_TRANSPORT


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split()) if "\n" in text else text
