"""The environment variables hpcbridge reads: the prefixes of their families, the table of
setting variables and how each one's text is read, and the variables that look like one
of them but name none (misspelt: warned of once, ignored)."""

from __future__ import annotations

import difflib
import logging
import shlex
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ..errors import ConfigurationError
from ..resources import RESOURCE_KEYS
from ..schedulers.native_options import NATIVE_SCHEDULERS

PREFIXES = ("HPCBRIDGE_", "EXAMLOPS_HPC_", "EXAMLOPS_SLURM_")

log = logging.getLogger("hpcbridge")


def lookup(env: Mapping[str, str], name: str) -> Optional[Tuple[str, str]]:
    """``(variable, value)`` of the first family that sets ``name``, or ``None``."""
    for prefix in PREFIXES:
        variable = prefix + name
        value = env.get(variable)
        if value is not None and value.strip() != "":
            return variable, value.strip()
    return None


def _text(variable: str, text: str) -> str:
    return text


def unprefixed(env: Mapping[str, str], name: str) -> Optional[Tuple[str, str]]:
    value = env.get(name, "").strip()
    return (name, value) if value else None


def _integer(variable: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigurationError(f"{variable}={text!r}: expected a whole number") from None


def _checked(
    parse: Callable[[str, str], Any], ok: Callable[[Any], bool], expected: str
) -> Callable[[str, str], Any]:
    """``parse``, then refuse a value ``ok`` rejects (the message: ``expected ...``)."""

    def read(variable: str, text: str) -> Any:
        value = parse(variable, text)
        if not ok(value):
            raise ConfigurationError(f"{variable}={text!r}: expected {expected}")
        return value

    return read


def _number(variable: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigurationError(f"{variable}={text!r}: expected a number") from None


_count = _checked(_integer, lambda value: value >= 1, "a whole number of 1 or more")
_positive = _checked(_number, lambda value: value > 0, "a number of seconds above 0")
_seconds = _checked(_number, lambda value: not value < 0, "a number of seconds, 0 or more")


def _assignments(variable: str, text: str) -> Dict[str, str]:
    """``"A=1 B='two words'"`` (shell words) as a dict; names must be identifiers."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ConfigurationError(f"{variable}={text!r}: {exc}") from None
    return name_values(words, variable)


def name_values(words: Sequence[str], what: str) -> Dict[str, str]:
    """``NAME=VALUE`` words as a dict; ``what`` (a variable, a flag) names them in errors."""
    found: Dict[str, str] = {}
    for word in words:
        name, equals, value = word.partition("=")
        if not equals or not name.isidentifier():
            raise ConfigurationError(f"{what}: expected NAME=VALUE, got {word!r}")
        found[name] = value
    return found


def _boolean(variable: str, text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"{variable}={text!r}: expected yes/no, true/false or 1/0")


#: setting, variable name (after the prefix), parser of its text
READERS: Tuple[Tuple[str, str, Callable[[str, str], Any]], ...] = (
    ("transport", "TRANSPORT", _text),
    ("ssh_host", "SSH_HOST", _text),
    ("ssh_user", "SSH_USER", _text),
    ("ssh_key", "SSH_KEY", _text),
    ("ssh_known_hosts", "SSH_KNOWN_HOSTS", _text),
    ("ssh_backend", "SSH_BACKEND", _text),
    ("remote_workdir", "REMOTE_WORKDIR", _text),
    ("remote_repo", "REMOTE_REPO", _text),
    ("flux_uri", "FLUX_URI", _text),
    ("flux_adapter_version", "FLUX_ADAPTER_VERSION", _text),
    ("slurm_driver", "SLURM_DRIVER", _text),
    ("slurm_rest_url", "SLURM_REST_URL", _text),
    ("slurm_rest_token_command", "SLURM_REST_TOKEN_COMMAND", _text),
    ("flux_driver", "FLUX_DRIVER", _text),
    ("flux_command", "FLUX_COMMAND", _text),
    ("container_runtime", "CONTAINER_RUNTIME", _text),
    ("db_path", "DB", _text),
    ("state_dir", "STATE_DIR", _text),
    ("ssh_port", "SSH_PORT", _integer),
    ("unknown_limit", "UNKNOWN_LIMIT", _integer),
    ("ssh_accept_new_host_keys", "SSH_ACCEPT_NEW_HOST_KEYS", _boolean),
    ("ssh_login_shell", "SSH_LOGIN_SHELL", _boolean),
    ("flux_nested", "FLUX_NESTED", _boolean),
    ("command_env", "COMMAND_ENV", _assignments),
    ("command_timeout", "COMMAND_TIMEOUT", _positive),
    ("poll_interval", "POLL_INTERVAL", _positive),
    ("min_poll_interval", "MIN_POLL_INTERVAL", _seconds),
    ("max_queued", "MAX_QUEUED", _count),
    ("cpu_cost_per_hour", "CPU_COST_PER_HOUR", _number),
    ("gpu_cost_per_hour", "GPU_COST_PER_HOUR", _number),
)


#: ``HPCBRIDGE_`` names hpcbridge reads that are no settings of the table above: the site
#: file's path, the store's local stand-in, what the job wrapper exports to a job
OTHER_VARIABLES = (
    "SITE_CONFIG",
    "LOCAL_STATE_DIR",
    "LAUNCHER",
    "TASK_INDEX",
    "JOB_ID",
    "EXIT_RANKS",
)
#: the test harness's own families (containers/, tests/): not hpcbridge's to judge
HARNESS_PREFIXES = ("TEST_", "SSHD_")
#: how alike a name must be to a known one to be taken for a misspelling of it
NEAR = 0.8


def known_variables() -> List[str]:
    """Every name hpcbridge reads after the ``HPCBRIDGE_`` prefix: the settings table,
    the scheduler, each resource key, each scheduler's options, and ``OTHER_VARIABLES``."""
    names = ["SCHEDULER", *(name for _, name, _ in READERS), *OTHER_VARIABLES]
    names += [key.upper() for key in RESOURCE_KEYS if key != "native"]
    names += [f"{scheduler.upper()}_OPTIONS" for scheduler in NATIVE_SCHEDULERS]
    return names


def misspelt(env: Mapping[str, str]) -> List[Tuple[str, str]]:
    """``(variable, the known one it is nearest to)`` for each ``HPCBRIDGE_`` variable of
    ``env`` that hpcbridge does not read but that looks like one it does (another tool may
    share the prefix: a name like no known one is left alone)."""
    known = set(known_variables())
    found = []
    for variable in sorted(env):
        if not variable.startswith("HPCBRIDGE_"):
            continue
        name = variable[len("HPCBRIDGE_") :]
        if name in known or name.startswith(HARNESS_PREFIXES):
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=NEAR)
        if close:
            found.append((variable, "HPCBRIDGE_" + close[0]))
    return found


_warned: Set[str] = set()


def warn_misspelt(env: Mapping[str, str]) -> None:
    """One warning per misspelt variable and process (it is ignored, not refused)."""
    for variable, nearest in misspelt(env):
        if variable not in _warned:
            _warned.add(variable)
            log.warning(
                "%s is not a setting of hpcbridge and is ignored: did you mean %s?",
                variable,
                nearest,
            )
