"""What is reachable from here: ``doctor`` and ``uri``."""

from __future__ import annotations

import argparse
import sys

from ..factory import build_executor
from ..settings.doctor import TRANSPORT, run_checks, unusable
from .exits import EXIT_OK, EXIT_TRANSPORT, EXIT_UNAVAILABLE
from .output import print_json
from .settings import settings_from


def cmd_doctor(args: argparse.Namespace) -> int:
    """Every check; exit 6 when the selected transport is unusable, 7 when the selected
    scheduler is (so ``hpcbridge doctor && ...`` is a readiness check), else 0."""
    settings = settings_from(args)
    checks = run_checks(settings)
    if args.json:
        print_json([check.to_json() for check in checks])
    else:
        for check in checks:
            mark = "ok " if check.ok else "-- "
            print(f"{mark} {check.name:<22} {_one_line(check.detail)}")
    blocking = unusable(checks, settings)
    if blocking is None:
        return EXIT_OK
    what = (
        f"the {settings.transport} transport"
        if blocking.blocks == TRANSPORT
        else f"the {settings.scheduler} scheduler"
    )
    detail = _one_line(blocking.detail)
    print(
        f"hpcbridge: error: {what} is not usable from here: {blocking.name}: {detail}",
        file=sys.stderr,
    )
    return EXIT_TRANSPORT if blocking.blocks == TRANSPORT else EXIT_UNAVAILABLE


def _one_line(detail: str) -> str:
    """A check's detail on its line: a command's several lines of stderr joined by "; "."""
    return "; ".join(line.strip() for line in detail.splitlines() if line.strip())


def cmd_uri(args: argparse.Namespace) -> int:
    """The URI a later ``HPCBRIDGE_FLUX_URI=...`` can use for a Flux target.

    Resolved like ``flux uri --remote`` where the commands run; the
    ``local://`` form when the target runs on that host, or always with --local.
    """
    from ..schedulers.flux.adapter import FluxAdapter

    settings = settings_from(args, "flux")
    adapter = FluxAdapter(executor=build_executor(settings), settings=settings)
    try:
        print(adapter.resolve_target(args.target, local=True if args.local else None))
    finally:
        adapter.close()
    return EXIT_OK
