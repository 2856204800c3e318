"""What is reachable from here: ``doctor`` and ``uri``."""

from __future__ import annotations

import argparse

from .exits import EXIT_OK
from .output import print_json
from .targets import settings_from


def cmd_doctor(args: argparse.Namespace) -> int:
    from ..doctor import run_checks

    checks = run_checks(settings_from(args))
    if args.json:
        print_json([check.to_json() for check in checks])
        return EXIT_OK
    for check in checks:
        mark = "ok " if check.ok else "-- "
        print(f"{mark} {check.name:<22} {check.detail}")
    return EXIT_OK


def cmd_uri(args: argparse.Namespace) -> int:
    """The URI a later ``HPCBRIDGE_FLUX_URI=...`` can use for a Flux target.

    Resolved like ``flux uri --remote`` where the commands run; the
    ``local://`` form when the target runs on that host, or always with --local.
    """
    from ..factory import build_executor
    from ..schedulers.flux.adapter import FluxAdapter

    settings = settings_from(args, "flux")
    adapter = FluxAdapter(executor=build_executor(settings), settings=settings)
    try:
        print(adapter.resolve_target(args.target, local=True if args.local else None))
    finally:
        adapter.close()
    return EXIT_OK
