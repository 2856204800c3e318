"""The site's settings (docs/settings.md): ``key = value`` lines in a file the cluster's
admins own, read before the user's environment; ``min_poll_interval`` is a floor a user
may raise, never lower.  An absent file sets nothing; an unreadable or bad one is an error."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from ..errors import ConfigurationError

#: where the site's file is, unless ``HPCBRIDGE_SITE_CONFIG`` names another
SITE_CONFIG = "/etc/hpcbridge/settings.toml"
SITE_CONFIG_VARIABLE = "HPCBRIDGE_SITE_CONFIG"

#: key -> whether a whole number, and its least value (only the floor may be 0)
SITE_KEYS: Dict[str, Tuple[bool, float]] = {
    "min_poll_interval": (False, 0.0),
    "poll_interval": (False, 0.001),
    "command_timeout": (False, 0.001),
    "unknown_limit": (True, 1),
}


def site_config_path(env: Mapping[str, str]) -> Path:
    """The site file this environment reads (it may not exist)."""
    named = env.get(SITE_CONFIG_VARIABLE, "").strip()
    return Path(named) if named else Path(SITE_CONFIG)


def _parse_flat_toml(text: str, where: str, ask: str) -> Dict[str, Tuple[str, int]]:
    """``key = value`` lines (TOML's flat subset: comments, no tables): each value as
    text, and its line number."""
    found: Dict[str, Tuple[str, int]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, equals, value = (part.strip() for part in line.partition("="))
        if not equals or not key or not value:
            raise ConfigurationError(f"{where}:{number}: expected key = value, got {line!r} {ask}")
        if key in found:
            raise ConfigurationError(f"{where}:{number}: {key} is set twice {ask}")
        found[key] = (value, number)
    return found


def parse_site_settings(text: str, where: str) -> Dict[str, Any]:
    """The settings of one site file's text (``where`` names it in errors)."""
    ask = f"(the file belongs to the site's admins: ask them to correct {where})"
    found: Dict[str, Any] = {}
    for key, (text_value, number) in _parse_flat_toml(text, where, ask).items():
        if key not in SITE_KEYS:
            raise ConfigurationError(
                f"{where}:{number}: unknown key {key!r}; known keys: {', '.join(SITE_KEYS)} {ask}"
            )
        whole, least = SITE_KEYS[key]
        kind = "a whole number" if whole else "a number of seconds"
        try:
            value: float = int(text_value.replace("_", "")) if whole else float(text_value)
        except ValueError:
            value = math.nan
        if not (value >= least and math.isfinite(value)):  # NaN: not a number at all
            raise ConfigurationError(
                f"{where}:{number}: {key} = {text_value}: "
                f"expected {kind} of at least {least:g} {ask}"
            )
        found[key] = value
    return found


def read_site_settings(env: Mapping[str, str]) -> Tuple[Optional[Path], Dict[str, Any]]:
    """``(the file read, its settings)``; ``(None, {})`` where the site has no file."""
    path = site_config_path(env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if env.get(SITE_CONFIG_VARIABLE, "").strip():
            raise ConfigurationError(
                f"{SITE_CONFIG_VARIABLE}={path}: no such file (correct the path, or unset "
                f"{SITE_CONFIG_VARIABLE} to read {SITE_CONFIG})"
            ) from None
        return None, {}
    except (OSError, UnicodeDecodeError) as exc:  # not UTF-8: the same "cannot read"
        why = getattr(exc, "strerror", None) or exc
        raise ConfigurationError(
            f"cannot read the site settings {path}: {why} (the site's admins "
            "own it: ask them to make it readable to every user)"
        ) from None
    return path, parse_site_settings(text, str(path))


def describe_site_settings(env: Optional[Mapping[str, str]] = None) -> str:
    """One line for ``hpcbridge doctor``: which file, and what it sets."""
    env = os.environ if env is None else env
    path, settings = read_site_settings(env)
    if path is None:
        return f"none ({site_config_path(env)} absent)"
    shown = ", ".join(f"{key} = {value:g}" for key, value in settings.items())
    return f"{path}: {shown or 'no keys'}"
