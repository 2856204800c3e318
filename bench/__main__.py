"""The bench runner: ``python -m bench [--quick] [--only NAME,...] [--out DIR]``.

Runs the scenarios in ``bench/scenarios`` against the real test cluster and
brokers (``bash containers/slurm/start.sh``, ``bash containers/sshd/start.sh``,
flux-core under /opt/flux-*), and writes ``latest.json``, ``latest.md`` and
``latest.png`` into ``--out`` (default ``bench/results``; ``bench/results/quick``
with ``--quick``).  A full default run also refreshes the results block of
``bench/README.md``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import shutil
import sys
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional

from .common import machine_info, skipped_scenario, slurm_environment, versions
from .report import chart, markdown
from .scenarios import SCENARIOS

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
README_START = "<!-- results:start (written by python -m bench) -->"
README_END = "<!-- results:end -->"


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmarks of hpcbridge against the raw schedulers, PSI/J, submitit "
        "and Maestro on the test cluster.",
    )
    parser.add_argument("--quick", action="store_true", help="tiny counts, one round (smoke)")
    parser.add_argument(
        "--only", help=f"comma-separated scenarios to run (of: {', '.join(SCENARIOS)})"
    )
    parser.add_argument("--out", help="output folder (default bench/results)")
    parser.add_argument(
        "--no-readme", action="store_true", help="do not refresh the table in bench/README.md"
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="put the scenarios run (--only) into the results already there, in place of "
        "the same-named ones (a re-run of what a change touched), and refresh the README",
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="log hpcbridge's INFO lines")
    return parser.parse_args(argv)


def run_scenario(name: str, quick: bool, workdir: Path) -> Dict[str, Any]:
    module = importlib.import_module(f"bench.scenarios.{name}")
    folder = workdir / name
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        result = module.run(quick, folder)
    except Exception as exc:  # noqa: BLE001 - one scenario's failure is reported, not fatal
        result = skipped_scenario(name, module.TITLE, f"{type(exc).__name__}: {exc}")
        result["status"] = "error"
        result["traceback"] = traceback.format_exc()
    result["runtime_s"] = round(time.perf_counter() - started, 2)
    return result


def preload_flux_bindings() -> None:
    """Put Flux's bindings on sys.path before any peer imports (PSI/J scans for
    its Flux executor once, at import)."""
    try:
        from .scenarios.flux_common import find_flux

        find_flux()
    except Exception:  # noqa: BLE001 - the Flux scenarios report why
        pass


def replaced(path: Path, fresh: Dict[str, Any]) -> Dict[str, Any]:
    """The results in ``path`` with the scenarios of ``fresh`` in place of theirs (each
    one keeps its own start time, machine and versions: ``rerun`` says when)."""
    if not path.is_file():
        return fresh
    results = json.loads(path.read_text())
    by_name = {scenario["name"]: scenario for scenario in fresh["scenarios"]}
    for scenario in by_name.values():
        scenario["rerun"] = {"at": fresh["started_at"], "versions": fresh["versions"]}
    names = [scenario["name"] for scenario in results["scenarios"]]
    results["scenarios"] = [by_name.get(s["name"], s) for s in results["scenarios"]] + [
        scenario for name, scenario in by_name.items() if name not in names
    ]
    results.setdefault("reruns", []).append(
        {"at": fresh["started_at"], "command": fresh["command"], "selected": fresh["selected"]}
    )
    return results


def update_readme(text: str) -> bool:
    if not README.is_file():
        return False
    content = README.read_text()
    if README_START not in content or README_END not in content:
        return False
    head, _, rest = content.partition(README_START)
    _, _, tail = rest.partition(README_END)
    README.write_text(f"{head}{README_START}\n\n{text.strip()}\n\n{README_END}{tail}")
    return True


def main(argv: Optional[List[str]] = None) -> int:
    options = parse_args(argv)
    if options.list:
        for name in SCENARIOS:
            module = importlib.import_module(f"bench.scenarios.{name}")
            print(f"{name:14} {module.TITLE}")
        return 0
    logging.basicConfig(
        level=logging.INFO if options.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    selected = list(SCENARIOS)
    if options.only:
        selected = [name.strip() for name in options.only.split(",") if name.strip()]
        unknown = [name for name in selected if name not in SCENARIOS]
        if unknown:
            print(
                f"unknown scenario(s): {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}",
                file=sys.stderr,
            )
            return 2
    out = (
        Path(options.out) if options.out else HERE / "results" / ("quick" if options.quick else "")
    )
    out.mkdir(parents=True, exist_ok=True)
    slurm_environment()
    preload_flux_bindings()
    started_at = datetime.now(timezone.utc).replace(microsecond=0)
    started = time.perf_counter()
    results: Dict[str, Any] = {
        "started_at": started_at.isoformat(),
        "command": " ".join(["python -m bench", *(argv if argv is not None else sys.argv[1:])]),
        "quick": options.quick,
        "selected": selected,
        "machine": machine_info(),
        "versions": versions(),
        "scenarios": [],
    }
    workdir = Path(tempfile.mkdtemp(prefix="hpcb-bench-"))
    try:
        for name in selected:
            print(f"[bench] {name} ...", file=sys.stderr, flush=True)
            result = run_scenario(name, options.quick, workdir)
            status = result.get("status")
            detail = f": {result.get('reason')}" if status != "ok" else ""
            print(
                f"[bench] {name}: {status} in {result['runtime_s']:.1f} s{detail}",
                file=sys.stderr,
                flush=True,
            )
            results["scenarios"].append(result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results["runtime_s"] = round(time.perf_counter() - started, 1)
    results["load_average_at_end"] = machine_info().get("load_average")
    if options.replace:
        results = replaced(out / "latest.json", results)
    text = markdown(results)
    (out / "latest.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    (out / "latest.md").write_text(text + "\n")
    chart_problem = chart(results, out / "latest.png")
    if chart_problem:
        print(f"[bench] no chart: {chart_problem}", file=sys.stderr)
    print(text)
    print(f"[bench] wrote {out / 'latest.json'}, latest.md, latest.png", file=sys.stderr)
    full_default = not options.quick and (not options.only or options.replace)
    if full_default and not options.out and not options.no_readme and update_readme(text):
        print(f"[bench] refreshed the results in {README}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
