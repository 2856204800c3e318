"""Options in a scheduler's own words (the ``native`` resource), checked by name: one that
sets what hpcbridge sets itself, or says again what a typed key says, is refused before
anything is staged, naming what to use instead (each scheduler's ``OWNED_OPTIONS``)."""

from __future__ import annotations

import difflib
import re
from typing import Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from .errors import ResourceError

# "  -A, --account=name ..." (sbatch) or "  -N, --nodes=N ..." (flux): "=" a value, "[=" optional
_HELP_LINE = re.compile(
    r"^\s{1,8}(?:(?P<short>-[A-Za-z0-9]),?\s+)?(?P<long>--[A-Za-z][\w-]*)(?P<value>\[?=)?"
)

#: what an option takes after its name
REQUIRED, OPTIONAL, NONE = "value", "optional value", "no value"


def option_names(help_text: str) -> Dict[str, str]:
    """Every option name a program's ``--help`` lists (``--account``, ``-A``...), with
    whether it takes a value (``REQUIRED``, ``OPTIONAL``, ``NONE``)."""
    names: Dict[str, str] = {}
    for line in help_text.splitlines():
        match = _HELP_LINE.match(line)
        if match:
            value = {"=": REQUIRED, "[=": OPTIONAL}.get(match.group("value") or "", NONE)
            names.update((name, value) for name in match.group("short", "long") if name)
    return names


def option_name(option: str) -> str:
    """The name of one option as given: ``--licenses`` of ``--licenses=a:1``, ``-L`` of
    ``-La:1``."""
    if option.startswith("--"):
        return option.split("=", 1)[0]
    return option[:2]


def resolve(name: str, known: Collection[str]) -> Tuple[Optional[str], Tuple[str, ...]]:
    """The full name ``name`` stands for among ``known``, as getopt_long resolves it (a
    long name may be shortened while it stays unambiguous); else ``None`` and the
    names it could mean."""
    if name in known:
        return name, ()
    if not name.startswith("--"):
        return None, ()
    candidates = tuple(sorted(full for full in known if full.startswith(name)))
    return (candidates[0], ()) if len(candidates) == 1 else (None, candidates)


def check_options(
    program: str,
    options: Sequence[str],
    owned: Mapping[str, str],
    known: Optional[Mapping[str, str]] = None,
    where: str = "",
) -> Tuple[str, ...]:
    """The full name of each option, or ``ResourceError`` (key ``native``) for one the
    release does not have (``known``: ``option_names``; ``None``: the scheduler's parser
    judges), one needing a value not attached, or one that sets what hpcbridge owns
    (``owned``: full name -> what to use instead)."""
    on = f"{program} on {where}" if where else program
    names: List[str] = []
    for option in options:
        given = option_name(option)
        if known is not None and option != given and known.get(given) == NONE and given[1] != "-":
            # getopt reads "-Hk" as "-H -k": each is judged on its own
            names.extend(check_options(program, [given, "-" + option[2:]], owned, known, where))
            continue
        if known is None:
            # Without the release's list an abbreviation is judged by what it may mean.
            full = given
            meant = tuple(name for name in owned if name.startswith(given) and given[1] == "-")
            meant = (given,) if given in owned else meant
        else:
            resolved, meant = resolve(given, known)
            if resolved is None:
                raise ResourceError("native", _unknown(option, given, meant, known, on))
            full, meant = resolved, (resolved,)
        for name in meant:
            if name in owned:
                also = f" ({given} stands for {name})" if name != given else ""
                raise ResourceError(
                    "native", f"{program}: {option!r} sets what hpcbridge sets{also}: {owned[name]}"
                )
        if known is not None and known[full] == NONE and option != given:
            raise ResourceError("native", f"{program}: {option!r}: {full} takes no value")
        if known is not None and known[full] == REQUIRED and option == given:
            attach = f"{full}=VALUE" if full.startswith("--") else f"{full}VALUE"
            raise ResourceError(
                "native", f"{program}: {option!r} takes a value: attach it ({attach})"
            )
        names.append(full)
    return tuple(names)


def _unknown(option: str, given: str, meant: Sequence[str], known: Collection[str], on: str) -> str:
    if meant:
        return f"{option!r} is ambiguous in {on}: it may be {', '.join(meant)}"
    close = difflib.get_close_matches(given, sorted(known), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"{option!r}: {on} has no option {given}{hint}"


def owned_table(rows: Sequence[Tuple[Sequence[str], str]]) -> Dict[str, str]:
    """``{name: what to use}`` of rows written once per option, with all its names."""
    return {name: use for names, use in rows for name in names}
