"""Run a Jupyter notebook's code cells as a kernel does, without Jupyter: in order, in one
namespace, inside one running event loop (a cell may ``await`` at its top level, and a
task one cell starts goes on running while the next cells run)."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import io
import json
from pathlib import Path
from typing import Any, Dict, List, Tuple


def code_cells(path: Path) -> List[str]:
    """The source of each code cell, in order."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code"]


async def _run_cells(path: Path, namespace: Dict[str, Any], printed: List[str]) -> None:
    for number, source in enumerate(code_cells(path), 1):
        code = compile(
            source, f"{path.name}[cell {number}]", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        )
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            result = eval(code, namespace)  # noqa: S307 - the repository's own example
            if code.co_flags & inspect.CO_COROUTINE:
                await result
        printed.append(out.getvalue())


def run_notebook(path: Path) -> Tuple[Dict[str, Any], List[str]]:
    """Run every code cell of ``path``; its namespace, and what each cell printed."""
    namespace: Dict[str, Any] = {"__name__": "__main__"}
    printed: List[str] = []
    asyncio.run(_run_cells(path, namespace, printed))
    return namespace, printed
