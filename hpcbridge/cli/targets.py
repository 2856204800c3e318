"""Which recorded jobs a command works on: its ids led by the one rule for ids (README,
"Which job an id means"; ``routing/ids.py``) to the adapters that reach them, under the
choices its flags make, with the notices on stderr."""

from __future__ import annotations

import argparse
from typing import Sequence

from ..routing.ids import Narrowing, Router, Targets
from ..settings.config import Settings
from . import sweeps
from .output import notice
from .settings import settings_from, store_for


def narrowing_of(args: argparse.Namespace, settings: Settings) -> Narrowing:
    """``--scheduler`` or a scheduler the environment sets, ``--host``, ``--flux-uri``."""
    return Narrowing.of(settings, getattr(args, "host", None), getattr(args, "flux_uri", None))


def targets_for(
    args: argparse.Namespace, job_ids: Sequence[str], keep_going: bool = False
) -> Targets:
    """The groups of jobs these ids name, one per place they lead to (``Router.targets``;
    a named pack's jobs whose allocation is gone are settled first)."""
    settings = settings_from(args)
    router = Router(
        settings,
        store_for(settings),
        narrowing_of(args, settings),
        command=args.command,
        settle=lambda records: sweeps.settle_orphans(settings, records),
        notify=notice,
    )
    return router.targets(job_ids, keep_going)
