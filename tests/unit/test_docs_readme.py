"""The README's command synopsis names every flag each command takes (the parser is the truth)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Dict, Set

from hpcbridge.cli.parser import build_parser
from hpcbridge.resources import RESOURCE_KEYS

README = Path(__file__).resolve().parents[2] / "README.md"
#: the flags every command has, not repeated in the synopsis
COMMON = {"--help", "--verbose", "--debug"}
RESOURCE_FLAGS = {f"--{key.replace('_', '-')}" for key in RESOURCE_KEYS} | {
    "--no-requeue",
    "--slurm-option",
    "--flux-option",
}
SHARED = re.compile(r"\((?P<commands>[\w, -]+): (?P<flags>[^)]*)\)")


def synopsis() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## The command", 1)[1]
    return section.split("```", 2)[1]


def synopsis_by_command() -> Dict[str, str]:
    """The synopsis text of each command (a shared "(a, b: flags)" line goes to each)."""
    text = synopsis()
    found: Dict[str, str] = {}
    parts = re.split(r"hpcbridge ([\w-]+)", text)
    for name, body in zip(parts[1::2], parts[2::2]):
        found[name] = found.get(name, "") + body
    for shared in SHARED.finditer(text):
        for name in shared.group("commands").split(", "):
            found[name] = found.get(name, "") + shared.group("flags")
    return found


def flags_of(parser: argparse.ArgumentParser) -> Set[str]:
    return {
        option
        for action in parser._actions  # noqa: SLF001 - the parser's own table
        for option in action.option_strings
        if option.startswith("--") and option not in COMMON
    }


def test_the_synopsis_names_every_flag_of_every_command() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    written = synopsis_by_command()
    missing = {}
    for name, sub in commands.choices.items():
        text = written.get(name, "")
        flags = flags_of(sub)
        if "[resource flags]" in text:
            flags -= RESOURCE_FLAGS
        absent = sorted(flag for flag in flags if not re.search(re.escape(flag) + r"\b", text))
        if name not in written or absent:
            missing[name] = absent or ["(the command itself)"]
    assert missing == {}, f"README synopsis omits: {missing}"
