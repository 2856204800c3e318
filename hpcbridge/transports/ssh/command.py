"""The remote command line for an argv: pure, every piece of caller data quoted."""

from __future__ import annotations

import re
import shlex
from typing import Mapping, Optional, Sequence

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def build_command(
    argv: Sequence[str],
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    login_shell: bool = False,
    stdin_devnull: bool = False,
) -> str:
    """The remote command line for ``argv``: every piece of caller data ``shlex.quote``-d.

    ``env`` becomes an ``env NAME=VALUE ...`` prefix (names must be shell
    identifiers), ``cwd`` a ``cd -- DIR &&`` prefix (a leading ``~`` or ``~/`` is
    the remote home, via ``"$HOME"``), and ``login_shell`` wraps everything in
    ``bash -l -c '...'`` so that the login profile (modules, PATH) is read.
    ``stdin_devnull`` appends ``</dev/null`` (stdin=DEVNULL, without an SSH EOF).
    """
    words = [str(arg) for arg in argv]
    if not words:
        raise ValueError("cannot run an empty argv")
    for word in words:
        if "\0" in word:
            raise ValueError("a command argument cannot contain a NUL byte")
    command = " ".join(shlex.quote(word) for word in words)
    if env:
        if words[0].startswith("-") or "=" in words[0]:
            # env(1) would read it as an option or another assignment.
            raise ValueError(f"cannot run {words[0]!r} with an environment: env would misread it")
        assignments = []
        for name, value in env.items():
            if not isinstance(name, str) or not _ENV_NAME.match(name):
                raise ValueError(f"environment variable name {name!r} is not an identifier")
            value = str(value)
            if "\0" in value:
                raise ValueError(f"environment variable {name} contains a NUL byte")
            assignments.append(shlex.quote(f"{name}={value}"))
        command = "env " + " ".join(assignments) + " " + command
    if cwd is not None:
        cwd = str(cwd)
        if cwd == "" or "\0" in cwd:
            raise ValueError(f"invalid working directory {cwd!r}")
        command = f"cd -- {_remote_dir_word(cwd)} && {command}"
    if login_shell:
        command = "bash -l -c " + shlex.quote(command)
    if stdin_devnull:
        command += " </dev/null"
    return command


def _remote_dir_word(path: str) -> str:
    """``path`` as one shell word; ``~``/``~/x`` expand to the remote ``$HOME`` only.

    A relative path stays relative to the login directory (the remote home).
    """
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        rest = path[2:]
        return '"$HOME"/' + shlex.quote(rest) if rest else '"$HOME"'
    if not path.startswith("/"):
        # "./": cd must not search CDPATH (it would also print the directory) nor
        # read "-" as "the previous directory".
        path = "./" + path
    return shlex.quote(path)
