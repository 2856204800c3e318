"""Run the fenced blocks of the guides (docs/guides/*.md) as shell scripts.

A block is *tested* when the line just before its opening fence is a marker::

    <!-- test: KIND [file=NAME] -->

KIND says what the block needs (``mock``, ``slurm``, ``ssh+slurm``, ``flux``,
``flux+slurm``; see ``KINDS``).  The blocks of one guide and one kind become
one bash script, in document order, so a later block sees the variables, the
current folder and the files of an earlier one.  Per block language:

``sh``/``bash``
    run as written.
``console``
    each line starting with ``$ `` is a command (a command whose line ends in
    ``\\`` continues on the next line); the lines up to the next ``$ `` are
    what it prints (stdout and stderr together).  Each command runs in the
    script's own shell (``{ CMD; } >FILE 2>&1``), so ``export`` and
    ``job_id=$(...)`` carry over to later commands.
``python``
    run with ``python3`` (the interpreter running the tests).
any language with ``file=NAME``
    not run: written to ``NAME`` (in the script's current folder), e.g. a job
    script, a parameter file or a Python program a later block runs.

How the printed output of a ``console`` command is checked (see
:func:`line_matches`): every documented output line must match some line of
what the command really printed, after both are normalised - runs of
whitespace become one space, every number of two or more digits becomes
``00`` (job ids, times, sizes) and every Flux job id (``ƒ`` + base58)
becomes ``ƒID``; single digits (exit codes, small counts) must be equal.  A
``…`` in a documented line matches any text (a host name, a path with a
random part, the tail of a long line); a documented line that is only ``…``
stands for lines left out and is not checked.  Order is not checked: a
command's stdout and stderr interleave differently from run to run.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

#: the kinds a marker may name, and what each needs (the tests provide it)
KINDS: Dict[str, str] = {
    "mock": "nothing (the embedded mock scheduler)",
    "slurm": "the Slurm test cluster (containers/slurm), SLURM_CONF",
    "ssh+slurm": "the sshd test server (containers/sshd) and the Slurm test cluster",
    "flux": "flux-core, and a broker the test starts (FLUX_URI)",
    "flux+slurm": "flux-core and the Slurm test cluster (no FLUX_URI)",
    "container": "mmdebstrap, Charliecloud (ch-image with the system's python3 and lark, "
    "ch-run, ch-convert) and a Debian mirror",
    "flux+accounting": "flux-core 0.88 with flux-accounting, and a broker of its own (FLUX_URI)",
    "ssh+flux+slurm": "the sshd test server, the Slurm test cluster and flux-core",
    "totp+slurm": "the sshd test server with a second factor (containers/sshd-totp), oathtool "
    "and the Slurm test cluster",
    "slurmrestd": "a Slurm 25.11 cluster of its own with slurmrestd's JWT listener on "
    "127.0.0.1:17283, SLURM_CONF and its commands on PATH (run by test_slurm_rest_jwt.py)",
}
#: the kinds whose guides run in a module of their own (a cluster of their own), not in
#: test_guides.py
OWN_MODULE_KINDS = ("slurmrestd",)
RUNNABLE = ("sh", "bash", "console", "python")

_MARKER = re.compile(r"^\s*<!--\s*test:\s*(?P<spec>[^>]*?)\s*-->\s*$")
_FENCE_OPEN = re.compile(r"^(?P<fence>```+)\s*(?P<lang>[\w+-]*)\s*$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_FLUX_ID = re.compile(r"ƒ[1-9A-HJ-NP-Za-km-z]+")
_DIGITS = re.compile(r"\d{2,}")
ELLIPSIS = "…"


class GuideError(ValueError):
    """A marker or a block the harness cannot use (a test fails with it)."""


@dataclass(frozen=True)
class Block:
    """One fenced block with a test marker."""

    guide: str  # file name, for messages
    line: int  # 1-based line of the opening fence
    kind: str
    lang: str
    text: str
    file: Optional[str] = None

    @property
    def where(self) -> str:
        return f"{self.guide}:{self.line}"


@dataclass
class Command:
    """One ``$ `` command of a console block and the output the guide shows."""

    line: int
    text: str
    expected: List[str] = field(default_factory=list)


def extract_blocks(text: str, guide: str = "<guide>") -> List[Block]:
    """The marked blocks of a Markdown text, in order; raises :class:`GuideError`."""
    lines = text.splitlines()
    blocks: List[Block] = []
    index = 0
    while index < len(lines):
        marker = _MARKER.match(lines[index])
        if not marker:
            index += 1
            continue
        kind, options = _parse_spec(marker.group("spec"), f"{guide}:{index + 1}")
        if index + 1 >= len(lines) or not _FENCE_OPEN.match(lines[index + 1]):
            raise GuideError(
                f"{guide}:{index + 1}: a test marker must be on the line just before a fence"
            )
        opening = _FENCE_OPEN.match(lines[index + 1])
        assert opening is not None
        fence, lang = opening.group("fence"), opening.group("lang").lower()
        body: List[str] = []
        cursor = index + 2
        while cursor < len(lines) and lines[cursor].strip() != fence:
            body.append(lines[cursor])
            cursor += 1
        if cursor >= len(lines):
            raise GuideError(f"{guide}:{index + 2}: the block never closes")
        file_name = options.get("file")
        if file_name is None and lang not in RUNNABLE:
            raise GuideError(
                f"{guide}:{index + 2}: a ```{lang or '(no language)'} block cannot run; "
                f"use one of {', '.join(RUNNABLE)}, or file=NAME to write it to a file"
            )
        blocks.append(Block(guide, index + 2, kind, lang, "\n".join(body) + "\n", file_name))
        index = cursor + 1
    return blocks


def _parse_spec(spec: str, where: str) -> Tuple[str, Dict[str, str]]:
    words = spec.split()
    if not words:
        raise GuideError(f"{where}: empty test marker")
    kind, rest = words[0], words[1:]
    if kind not in KINDS:
        raise GuideError(f"{where}: unknown kind {kind!r}; known: {', '.join(KINDS)}")
    options: Dict[str, str] = {}
    for word in rest:
        name, sep, value = word.partition("=")
        if not sep or name != "file" or not value:
            raise GuideError(f"{where}: unknown marker option {word!r} (only file=NAME)")
        if "/" in value or value.startswith((".", "-")):
            raise GuideError(f"{where}: file= takes a plain file name, not {value!r}")
        options[name] = value
    return kind, options


def parse_console(block: Block) -> List[Command]:
    """The commands of a console block with the output lines shown for each."""
    commands: List[Command] = []
    lines = block.text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("$ "):
            command = Command(block.line + 1 + index, line[2:])
            while command.text.endswith("\\") and index + 1 < len(lines):
                index += 1
                command.text += "\n" + lines[index]
            commands.append(command)
        elif line.strip():
            if not commands:
                raise GuideError(
                    f"{block.guide}:{block.line + 1 + index}: output before the first `$ ` command"
                )
            commands[-1].expected.append(line)
        index += 1
    if not commands:
        raise GuideError(f"{block.where}: a console block without a `$ ` command")
    return commands


# -- output matching ------------------------------------------------------------


def normalize(line: str) -> str:
    """What two lines are compared as: no colours, digits and Flux ids made equal."""
    line = _ANSI.sub("", line)
    line = _FLUX_ID.sub("ƒID", line)
    line = _DIGITS.sub("00", line)
    return " ".join(line.split())


def line_matches(expected: str, actual_lines: Sequence[str]) -> bool:
    """Whether a documented output line matches one of the actual lines."""
    parts = [normalize(part) for part in expected.split(ELLIPSIS)]
    # normalize() strips each part: "from … at" also matches "from at".
    compiled = re.compile(".*".join(re.escape(part) for part in parts))
    return any(compiled.fullmatch(normalize(line)) for line in actual_lines)


def missing_lines(expected: Sequence[str], actual: str) -> List[str]:
    """The documented lines that match nothing in ``actual``."""
    actual_lines = actual.splitlines()
    return [
        line
        for line in expected
        if line.strip() != ELLIPSIS and not line_matches(line, actual_lines)
    ]


# -- scripts ----------------------------------------------------------------------


@dataclass
class Script:
    """The bash script of one guide and kind, and how to read its results."""

    text: str
    commands: Dict[int, Tuple[Block, Command]]  # number -> (block, command)
    steps: Dict[str, Block]


def build_script(blocks: Sequence[Block], out_dir: str, prelude: str = "") -> Script:
    """One bash script running ``blocks`` in order (see the module docstring).

    ``out_dir`` receives ``N.out`` per console command and ``step`` (the
    block/command running, for a message when one fails).
    """
    out = shlex.quote(out_dir)
    parts = [
        "# generated by tests/support/guides.py",
        f"__hpcb_out={out}",
        '__hpcb_step() { printf "%s\\n" "$1" > "$__hpcb_out/step"; }',
        prelude,
    ]
    commands: Dict[int, Tuple[Block, Command]] = {}
    steps: Dict[str, Block] = {}
    for number, block in enumerate(blocks):
        delimiter = f"__HPCB_BLOCK_{number}__"
        if delimiter in block.text:  # pragma: no cover - nobody writes that
            raise GuideError(f"{block.where}: the block contains {delimiter}")
        steps[block.where] = block
        parts.append(f"__hpcb_step {shlex.quote(block.where)}")
        if block.file:
            parts.append(
                f"cat > {shlex.quote(block.file)} <<'{delimiter}'\n{block.text}{delimiter}"
            )
            if block.file.endswith(".sh"):
                parts.append(f"chmod +x {shlex.quote(block.file)}")
        elif block.lang in ("sh", "bash"):
            parts.append(block.text)
        elif block.lang == "python":
            parts.append(f"python3 - <<'{delimiter}'\n{block.text}{delimiter}")
        elif block.lang == "console":
            for command in parse_console(block):
                key = len(commands)
                commands[key] = (block, command)
                where = f"{block.guide}:{command.line}"
                steps[where] = block
                parts.append(f"__hpcb_step {shlex.quote(where)}")
                parts.append(f'{{\n{command.text}\n}} >"$__hpcb_out/{key}.out" 2>&1')
    parts.append('__hpcb_step "(end)"')
    return Script("\n".join(parts) + "\n", commands, steps)


def check_outputs(script: Script, out_dir: Path) -> List[str]:
    """One message per console command whose documented output was not printed."""
    problems = []
    for key, (block, command) in script.commands.items():
        if not command.expected:
            continue
        path = out_dir / f"{key}.out"
        actual = path.read_text(errors="replace") if path.exists() else ""
        missing = missing_lines(command.expected, actual)
        if missing:
            problems.append(
                f"{block.guide}:{command.line}: $ {command.text}\n"
                f"  documented but not printed:\n"
                + "".join(f"    {line}\n" for line in missing)
                + "  printed:\n"
                + "".join(f"    {line}\n" for line in actual.splitlines()[:60])
            )
    return problems


def guide_files(docs: Path) -> List[Path]:
    return sorted((docs / "guides").glob("*.md"))


def blocks_by_kind(path: Path) -> Dict[str, List[Block]]:
    grouped: Dict[str, List[Block]] = {}
    for block in extract_blocks(path.read_text(encoding="utf-8"), path.name):
        grouped.setdefault(block.kind, []).append(block)
    return grouped


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m tests.support.guides GUIDE KIND``: print the script (debugging)."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m tests.support.guides docs/guides/X.md KIND", file=sys.stderr)
        return 2
    blocks = blocks_by_kind(Path(args[0])).get(args[1], [])
    print(build_script(blocks, "/tmp/hpcbridge-guide-out").text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
