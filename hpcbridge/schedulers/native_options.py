"""Options in a scheduler's own words (the ``native`` resource), checked by name: one that
sets what hpcbridge sets itself, or says again what a typed key says, is refused before
anything is staged, naming what to use instead (each scheduler's ``OWNED_OPTIONS``)."""

from __future__ import annotations

import difflib
import re
from typing import Any, Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import ResourceError

#: the schedulers ``native`` options are given for (the mock takes none)
NATIVE_SCHEDULERS = ("slurm", "flux")

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


def native_form(value: Any) -> Optional[Tuple[Tuple[str, Tuple[str, ...]], ...]]:
    """``{"slurm": [...], "flux": [...]}``: options, each its value attached; only their
    form is checked here (each scheduler checks their names)."""
    pairs = value.items() if isinstance(value, Mapping) else value
    if isinstance(value, str) or not isinstance(value, (Mapping, list, tuple)):
        raise ResourceError("native", f"expected {{'slurm': [...], 'flux': [...]}}, got {value!r}")
    if not isinstance(value, Mapping) and any(isinstance(entry, str) for entry in value):
        # a list of options with no scheduler: which scheduler's words they are is unsaid
        example = ", ".join(repr(entry) for entry in value if isinstance(entry, str))
        raise ResourceError(
            "native",
            f"native takes a dict of each scheduler's options, not a list: write "
            f"native={{'slurm': [{example}]}} (or 'flux': [...]; on the command line "
            "--slurm-option=OPT / --flux-option=OPT)",
        )
    native: Dict[str, Tuple[str, ...]] = {}
    for entry in pairs:
        scheduler, options = entry if isinstance(entry, (tuple, list)) else (entry, None)
        if scheduler not in NATIVE_SCHEDULERS:
            close = difflib.get_close_matches(str(scheduler), NATIVE_SCHEDULERS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ResourceError(
                "native",
                f"no scheduler {scheduler!r}: {hint}(native takes {', '.join(NATIVE_SCHEDULERS)})",
            )
        native[scheduler] = _native_list(scheduler, options)
    kept = tuple((name, options) for name, options in sorted(native.items()) if options)
    return kept or None


def _native_list(scheduler: str, options: Any) -> Tuple[str, ...]:
    if isinstance(options, str) or not isinstance(options, (list, tuple)):
        raise ResourceError(
            "native",
            f"{scheduler}: expected a list of options, e.g. ['--licenses=matlab:1'], "
            f"got {options!r}",
        )
    attached: List[str] = []
    for option in options:
        if not isinstance(option, str):
            raise ResourceError("native", f"{scheduler}: {option!r} is not text")
        if "\x00" in option or "\n" in option:
            raise ResourceError("native", f"{scheduler}: {option!r} holds a NUL or a newline")
        # "--licenses matlab:1" and "-o" "x": the value attached to its option
        spaced = re.match(r"^(?P<name>-[A-Za-z0-9]|--[A-Za-z][\w-]*) +(?P<value>\S.*)$", option)
        if spaced:
            option = _attach(spaced.group("name"), spaced.group("value"))
        if not option.startswith("-") and attached and _takes_next(attached[-1]):
            attached[-1] = _attach(attached[-1], option)
        elif re.match(r"^--?[A-Za-z0-9]", option):
            attached.append(option)
        else:
            raise ResourceError(
                "native",
                f"{scheduler}: {option!r} is not an option; give each beginning with '-', "
                "its value attached ('--licenses=matlab:1')",
            )
    return tuple(attached)


def _takes_next(option: str) -> bool:
    """An option with no value attached yet: the next word may be its value."""
    return option.startswith("--") and "=" not in option or len(option) == 2


def _attach(name: str, value: str) -> str:
    return f"{name}={value}" if name.startswith("--") else f"{name}{value}"


def joined_native(first: Any, then: Any) -> Dict[str, List[str]]:
    """Two ``native`` values as one: each scheduler's options of ``first``, then ``then``'s."""
    joined: Dict[str, List[str]] = {}
    for value in (first, then):
        validated = native_form(value) or ()
        for scheduler, options in validated:
            joined.setdefault(scheduler, []).extend(options)
    return joined
