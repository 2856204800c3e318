"""The structure's measures of issue 47, for a checkout (default: this one).

    python scripts/measure-structure.py [REPO] [--json]

Code lines are lines that are not blank, comments or docstrings.  A module is *pure* when it
imports none of subprocess, socket, threading, time, sqlite3, paramiko, flux, pyslurm, an HTTP
client, ``hpcbridge.transports``, ``hpcbridge.store`` or an engine module other than its value
types and text builders, and names no ``Executor`` (issue 47's rule: ``pure_share``); the
stricter ``pure_share_transitive`` also counts a module importing an impure module of its own
folder as impure.
"""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import Dict, List, Set, Tuple

IMPURE_MODULES = {
    "subprocess", "socket", "threading", "time", "sqlite3", "paramiko", "flux", "pyslurm",
    "httpx", "requests", "urllib3", "http", "asyncio", "concurrent",
}  # fmt: skip
#: engine modules that hold only value types and text builders
#: (the engine's value types belong in engine/values.py; a module holding both value types and
#: running code counts as running code)
ENGINE_VALUES = {
    "hpcbridge.engine.jobscript",
    "hpcbridge.engine.observation",
    "hpcbridge.engine.values",
    "hpcbridge.engine.driver",  # the driver contract and the value types of a submission
}
SCHEDULER_FOLDERS = ("hpcbridge/schedulers/slurm", "hpcbridge/schedulers/flux")
NO_SLEEP = ("hpcbridge/schedulers", "hpcbridge/transports", "hpcbridge/store")
SLEEP_ALLOWED = {"hpcbridge/schedulers/mock_runner.py"}


def code_lines(text: str) -> int:
    """Lines holding code: not blank, not a comment, not a docstring."""
    doc_lines: Set[int] = set()
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                doc_lines.update(range(body[0].lineno, body[0].end_lineno + 1))  # type: ignore[operator]
    lines: Set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                        tokenize.DEDENT, tokenize.ENDMARKER):  # fmt: skip
            continue
        for n in range(tok.start[0], tok.end[0] + 1):
            if n not in doc_lines:
                lines.add(n)
    return len(lines)


def module_name(repo: Path, path: Path) -> str:
    parts = list(path.relative_to(repo).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, module: str, everywhere: bool = True) -> List[Tuple[str, int]]:
    """(imported module, line) for each import; relative ones resolved."""
    tree = ast.parse(path.read_text())
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: List[Tuple[str, int]] = []
    nodes = ast.walk(tree) if everywhere else iter(tree.body)
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module:  # "from . import x" names submodules, not the package itself
                found.append((target, node.lineno))
            for alias in node.names:
                found.append((target + "." + alias.name, node.lineno))
    return found


def main(argv: List[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    repo = Path(args[0] if args else Path(__file__).resolve().parents[1]).resolve()
    files = sorted((repo / "hpcbridge").rglob("*.py"))
    mods = {module_name(repo, f): f for f in files}
    report: Dict[str, object] = {}

    # imports inside hpcbridge
    graph: Dict[str, Set[str]] = {}
    for mod, path in mods.items():
        targets = set()
        for target, _line in imports_of(path, mod):
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != mod and target.startswith("hpcbridge"):
                targets.add(target)
        graph[mod] = targets

    # purity per scheduler folder
    purity: Dict[str, object] = {}
    for folder in SCHEDULER_FOLDERS:
        prefix = folder.replace("/", ".")
        members = {m: p for m, p in mods.items() if m.startswith(prefix + ".") or m == prefix}
        direct: Dict[str, List[str]] = {}
        for mod, path in members.items():
            text = path.read_text()
            why = []
            for target, _ in imports_of(path, mod):
                top = target.split(".")[0]
                outside = top in IMPURE_MODULES and not target.startswith("hpcbridge")
                engine = target.startswith("hpcbridge.engine") and target not in ENGINE_VALUES
                if (
                    outside
                    or target.startswith(("hpcbridge.transports", "hpcbridge.store"))
                    or (engine and (target in mods or target == "hpcbridge.engine"))
                ):
                    why.append(target)
            if "Executor" in {
                t.string
                for t in tokenize.generate_tokens(io.StringIO(text).readline)
                if t.type == tokenize.NAME
            }:
                why.append("names Executor")
            direct[mod] = sorted(set(why))
        impure = {m for m, w in direct.items() if w}
        sizes = {m: code_lines(p.read_text()) for m, p in members.items()}
        total = sum(sizes.values())
        direct_pure = sum(n for m, n in sizes.items() if m not in impure)
        changed = True
        while changed:  # importing an impure module of the same folder makes one impure
            changed = False
            for mod in members:
                if mod not in impure and graph[mod] & impure:
                    impure.add(mod)
                    direct[mod] = sorted(graph[mod] & impure)
                    changed = True
        pure = sum(n for m, n in sizes.items() if m not in impure)
        purity[folder] = {
            "code_lines": total,
            "pure_share": round(direct_pure / total, 3) if total else None,
            "pure_share_transitive": round(pure / total, 3) if total else None,
            "impure": {
                m.rsplit(".", 1)[-1]: {"code_lines": sizes[m], "why": direct[m][:4]}
                for m in sorted(impure, key=lambda m: -sizes[m])
            },  # fmt: skip
            "impure_over_250": [m for m in impure if sizes[m] > 250],
        }
    report["scheduler_folders"] = purity

    # root modules, sizes, long functions
    root = [
        f.name
        for f in (repo / "hpcbridge").glob("*.py")
        if f.name not in ("__init__.py", "__main__.py")
    ]
    report["root_modules"] = {"count": len(root), "names": sorted(root)}
    report["modules_over_400"] = {
        str(f.relative_to(repo)): n for f in files if (n := len(f.read_text().splitlines())) > 400
    }
    long_functions = {}
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if n > 50:
                    long_functions[f"{f.relative_to(repo)}:{node.name}"] = n
    report["functions_over_50"] = long_functions

    # sleeps and sqlite3 out of place
    sleeps, sqlite = [], []
    for f in files:
        rel = str(f.relative_to(repo))
        text = f.read_text()
        if rel.startswith(NO_SLEEP) and rel not in SLEEP_ALLOWED:
            for n, line in enumerate(text.splitlines(), 1):
                if "sleep(" in line and not line.lstrip().startswith("#"):
                    sleeps.append(f"{rel}:{n}")
        if not rel.startswith("hpcbridge/store") and any(
            t == "sqlite3" for t, _ in imports_of(f, module_name(repo, f))
        ):
            sqlite.append(rel)
    report["sleep_outside_place"] = sleeps
    report["sqlite3_outside_store"] = sqlite

    # cycles (every import, typing-only and function-level included)
    cycles = strongly_connected(graph)
    report["import_cycles"] = [sorted(c) for c in cycles]

    # modules loaded by importing each adapter class
    counts = {}
    for name, stmt in (
        ("slurm", "from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter"),
        ("flux", "from hpcbridge.schedulers.flux.adapter import FluxAdapter"),
    ):
        code = (
            f"import sys; {stmt}; print(len([m for m in sys.modules if m.startswith('hpcbridge')]))"
        )
        env = dict(os.environ, PYTHONPATH=str(repo))
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=repo
        )
        counts[name] = int(out.stdout.strip()) if out.returncode == 0 else out.stderr.strip()[-200:]
    report["modules_loaded_by_adapter_import"] = counts

    # folders' shares of the code
    shares: Dict[str, int] = {}
    for mod, path in mods.items():
        parts = mod.split(".")
        room = (
            ".".join(parts[:3])
            if len(parts) > 3 and parts[1] == "schedulers"
            else ".".join(parts[:2])
        )
        if path.parent == repo / "hpcbridge":
            room = "hpcbridge (root)"
        shares[room] = shares.get(room, 0) + code_lines(path.read_text())
    total = sum(shares.values())
    report["folder_code_lines"] = dict(sorted(shares.items(), key=lambda kv: -kv[1]))
    report["total_code_lines"] = total
    report["layers"] = layers(graph)

    if "--json" in argv:
        print(json.dumps(report, indent=1))
    else:
        for key, value in report.items():
            shown = json.dumps(value, indent=1) if isinstance(value, (dict, list)) else value
            print(f"{key}: {shown}")
    return 0


def strongly_connected(graph: Dict[str, Set[str]]) -> List[Set[str]]:
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[Set[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return out


def layers(graph: Dict[str, Set[str]]) -> Dict[str, int]:
    """Each room's floor: 1 + the highest floor of what its modules import (packages'
    __init__ aside; a cycle is cut where it is met)."""
    depth: Dict[str, int] = {}

    def floor(v: str, seen: Tuple[str, ...] = ()) -> int:
        if v in depth:
            return depth[v]
        below = [
            floor(w, seen + (v,))
            for w in graph.get(v, ())
            if w not in seen and not w.endswith("__init__")
        ]
        depth[v] = 1 + max(below, default=0)
        return depth[v]

    for v in graph:
        floor(v)
    rooms: Dict[str, int] = {}
    for mod, d in depth.items():
        parts = mod.split(".")
        room = "/".join(parts[1:3]) if len(parts) > 2 else parts[-1]
        rooms[room] = max(rooms.get(room, 0), d)
    return dict(sorted(rooms.items(), key=lambda kv: -kv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
