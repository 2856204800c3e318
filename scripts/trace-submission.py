"""Which hpcbridge modules one plain submission passes, in order (issue 33's measure).

    python scripts/trace-submission.py slurm            # Slurm CLI, the running test cluster
    python scripts/trace-submission.py flux [URI]       # Flux bindings (FLUX_URI or URI)

The adapter is made and opened first (the session, the driver's choice); the trace then
covers ``submit_job`` of a one-line script alone and prints each module the first time
its code runs, the number of stays (entries into a module other than the one just left)
and of returns (a stay in a module already left).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any, List, Optional, Tuple

PACKAGE = str(Path(__file__).resolve().parents[1] / "hpcbridge") + os.sep


def module_of(path: str) -> Optional[str]:
    if not path.startswith(PACKAGE):
        return None
    return path[len(PACKAGE) :].replace(os.sep, "/")


def trace(call: Any) -> Tuple[List[str], int, int]:
    """(modules first call first, stays, returns) while ``call()`` runs."""
    seen: List[str] = []
    stack: List[Optional[str]] = []
    stays = returns = 0
    current: List[Optional[str]] = [None]
    left: set = set()

    def enter(module: Optional[str]) -> None:
        nonlocal stays, returns
        if module is None or module == current[0]:
            return
        if current[0] is not None:
            left.add(current[0])
        stays += 1
        if module in left:
            returns += 1
        if module not in seen:
            seen.append(module)
        current[0] = module

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call":
            module = module_of(frame.f_code.co_filename)
            stack.append(module)
            enter(module)
        elif event == "return" and stack:
            stack.pop()
            # back in the caller's module (the nearest hpcbridge frame under it)
            for module in reversed(stack):
                if module is not None:
                    enter(module)
                    break

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen, stays, returns


def main(argv: List[str]) -> int:
    from hpcbridge import FluxAdapter, RealSlurmAdapter, Settings

    scheduler = argv[0] if argv else "slurm"
    work = Path(tempfile.mkdtemp(prefix="hpcb-trace-"))
    settings = Settings.from_env(env={}, state_dir=str(work / "state"), remote_workdir=str(work))
    script = work / "hello.sh"
    script.write_text("#!/bin/sh\necho hello\n")
    if scheduler == "slurm":
        adapter: Any = RealSlurmAdapter(settings=settings, driver="cli")
    else:
        uri = argv[1] if len(argv) > 1 else os.environ.get("FLUX_URI")
        adapter = FluxAdapter(settings=settings, uri=uri, driver="native")
    adapter.open()
    modules, stays, returns = trace(lambda: adapter.submit_job(str(script), {"time": "1m"}))
    print(f"{scheduler}: {len(modules)} modules, {stays} stays, {returns} returns")
    for module in modules:
        print("  " + module)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
