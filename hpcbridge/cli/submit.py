"""``submit`` and ``submit-many`` (with ``--dry-run`` and ``--wait``)."""

from __future__ import annotations

import argparse
import shlex
import sys
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from ..errors import ConfigurationError, ResourceError, SweepCancelledError
from ..model import JobState, JobStatus
from ..resources import RESOURCE_KEYS
from ..schedulers.native_options import NATIVE_SCHEDULERS
from ..settings.variables import name_values
from . import sweeps
from .exits import EXIT_JOB_NOT_COMPLETED, EXIT_OK
from .follow import records_here, wait_and_report, with_record
from .output import one_line, print_json
from .settings import adapter_for


def resources_from(args: argparse.Namespace) -> Dict[str, Any]:
    """The resource flags given on the command line."""
    given = {
        key: getattr(args, key) for key in RESOURCE_KEYS if getattr(args, key, None) is not None
    }
    native = {
        scheduler: getattr(args, f"{scheduler}_options")
        for scheduler in NATIVE_SCHEDULERS
        if getattr(args, f"{scheduler}_options", None)
    }
    return {**given, "native": native} if native else given


def cmd_submit(args: argparse.Namespace) -> int:
    adapter = adapter_for(args)
    resources = resources_from(args)
    with flags_named(args):
        if args.dry_run:
            print(
                adapter.describe_submission(
                    args.script, resources, args.remote_dir, args.after, nested=args.nested
                )
            )
            return EXIT_OK
        job_id = adapter.submit_job(
            args.script,
            resources,
            remote_dir=args.remote_dir,
            depends_on=args.after or None,
            arguments=args.script_args,
            environment=name_values(args.env, "--env"),
            nested=args.nested,
        )
    return _submitted(adapter, [job_id], args, as_list=False)


def _submitted(
    adapter: Any,
    job_ids: List[str],
    args: argparse.Namespace,
    as_list: bool,
    cancelled: Optional[SweepCancelledError] = None,
) -> int:
    """Print the jobs just submitted (``--json``: the keys of ``status --json``, from their
    records, nothing asked of the scheduler; with ``--wait`` their final statuses instead),
    then follow them with ``--wait``; a cancelled sweep exits 1."""
    if args.json:
        if not args.wait:
            records = records_here(adapter, job_ids)
            statuses = [
                records[job_id].status()
                if job_id in records
                else JobStatus(job_id, JobState.PENDING)
                for job_id in job_ids
            ]
            entries = [with_record(status.to_json(), records) for status in statuses]
            print_json(entries if as_list else entries[0])
    elif job_ids:
        print("\n".join(job_ids), flush=True)
    if cancelled is not None:
        # A cancelled sweep: its jobs end CANCELLED, its other tasks never run (exit 1).
        print(f"hpcbridge: {one_line(cancelled)}", file=sys.stderr, flush=True)
    code = wait_and_report([(adapter, job_ids)], args, as_list) if args.wait else EXIT_OK
    return code if cancelled is None or code != EXIT_OK else EXIT_JOB_NOT_COMPLETED


def _jobs_from(args: argparse.Namespace) -> List[Union[str, Tuple[str, List[str]]]]:
    """The scripts, or with --args-file one (script, arguments) per line of the file."""
    if not args.args_file:
        return list(args.scripts)
    if len(args.scripts) != 1:
        raise ConfigurationError("--args-file takes exactly one SCRIPT")
    path = args.args_file
    try:
        with open(path, encoding="utf-8") as handle:
            lines = [
                (number, line)
                for number, line in enumerate(handle, start=1)
                if line.strip() and not line.lstrip().startswith("#")
            ]
    except (OSError, UnicodeDecodeError) as exc:  # UnicodeDecodeError: not UTF-8 text
        missing = isinstance(exc, FileNotFoundError)
        why = "no such file" if missing else getattr(exc, "strerror", None) or str(exc)
        raise ConfigurationError(
            f"--args-file {path}: {why} (give a file with one job per line: the line's words "
            "are the arguments of SCRIPT)"
        ) from None
    if not lines:
        raise ConfigurationError(
            f"--args-file {path} has no job lines (blank lines and lines starting with # are "
            "skipped): nothing was submitted; write one line of arguments per job"
        )
    jobs: List[Union[str, Tuple[str, List[str]]]] = []
    for number, line in lines:
        try:
            jobs.append((args.scripts[0], shlex.split(line)))
        except ValueError as exc:
            raise ConfigurationError(
                f"--args-file {path}:{number}: {exc} (quote as a shell would); nothing was "
                "submitted"
            ) from None
    return jobs


@contextmanager
def flags_named(args: argparse.Namespace) -> Iterator[None]:
    """A bad resource value given as a flag names the flag (``--time``)."""
    try:
        yield
    except ResourceError as exc:
        if exc.origin is None and getattr(args, exc.key, None) is not None:
            flag = f"--{exc.key.replace('_', '-')}"
            raise exc.with_origin(f"{flag} {getattr(args, exc.key)}") from None
        raise


def _fed(adapter: Any, jobs: List[Any], args: argparse.Namespace) -> List[str]:
    """``submit_many`` as a sweep, with its progress line on a terminal."""
    from ..engine.sweeping import Sweep

    sweep = Sweep(adapter, args.sweep, args.max_queued or adapter.settings.max_queued)
    sweep.add(jobs, resources_from(args), args.after or None, nested=args.nested)
    progress = sweeps.SweepProgress(sweep.name)
    print(f"hpcbridge: sweep {sweep.name}: {len(jobs)} job(s)", file=sys.stderr, flush=True)
    try:
        return sweep.submit(args.remote_dir, progress)
    finally:
        progress.finish()


def _announced(name: str, why: str) -> None:
    """A sweep made because of a limit, said on stderr as a named one is."""
    print(
        f"hpcbridge: sweep {name}: fed as a sweep ({why}); if this command stops, "
        f"'hpcbridge wait {name}' goes on with it",
        file=sys.stderr,
        flush=True,
    )


def _packed(adapter: Any, jobs: List[Any], args: argparse.Namespace) -> int:
    """``submit-many --pack``: the jobs run in allocations held for them, and waited for;
    the pack's name (``--sweep``, else made) said on stderr first, for ``cancel`` and
    ``wait`` from another shell."""
    from ..packing import Pack, new_pack_name, run_packed
    from ..packing.allocations import Allocations
    from ..packing.request import split_resources
    from ..packing.script import allocation_runs

    pack = Pack.parse(args.pack)
    resources = resources_from(args)
    given, _ = split_resources(resources, adapter.scheduler_name)
    allocations = Allocations(adapter, pack, adapter.settings.flux_command, given)
    if args.after or args.max_queued:
        raise ConfigurationError(
            "--pack takes no --after or --max-queued: the pack feeds its allocations at "
            "Flux's rate, two tasks per core"
        )
    flux = adapter.settings.flux_command
    if args.dry_run:
        runs = allocation_runs(flux, pack.nodes, adapter.scheduler_name, pack.cpus_per_node)
        print(f"# {pack.count} allocation(s), each running: {runs}")
        script = allocations.script()
        nested = {"nested": True} if adapter.scheduler_name == "flux" else {}
        print(adapter.describe_submission(script, allocations.resources, **nested))
        print(f"# then {len(jobs)} plain Flux job(s) fed into their instances")
        return EXIT_OK
    name = args.sweep or new_pack_name()
    print(
        f"hpcbridge: pack {name}: {len(jobs)} job(s) in {pack.count} allocation(s) at a time "
        f"('hpcbridge cancel {name}' stops it, 'hpcbridge wait {name}' goes on with it)",
        file=sys.stderr,
        flush=True,
    )
    finals = run_packed(
        adapter,
        jobs,
        resources,
        pack,
        flux_command=flux,
        poll_interval=args.poll_interval,
        timeout=args.timeout,
        name=name,
    )
    return sweeps.report(finals, args.json)


def cmd_submit_many(args: argparse.Namespace) -> int:
    jobs = _jobs_from(args)
    adapter = adapter_for(args)
    if args.pack:
        with flags_named(args):
            return _packed(adapter, jobs, args)
    cancelled: Optional[SweepCancelledError] = None
    with flags_named(args):
        if args.dry_run:
            print(
                adapter.describe_many(
                    jobs, resources_from(args), args.after, args.remote_dir, nested=args.nested
                )
            )
            return EXIT_OK
        if args.max_queued or args.sweep or adapter.settings.max_queued:
            try:
                job_ids = _fed(adapter, jobs, args)
            except SweepCancelledError as exc:  # cancelled while sent: what went in, printed
                job_ids, cancelled = exc.submitted_ids, exc
        else:
            job_ids = adapter.submit_many(
                jobs,
                resources_from(args),
                depends_on=args.after or None,
                remote_dir=args.remote_dir,
                nested=args.nested,
                on_sweep=_announced,
            )
    return _submitted(adapter, job_ids, args, as_list=True, cancelled=cancelled)
