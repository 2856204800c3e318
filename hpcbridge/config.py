"""Settings from the site's file (its ``min_poll_interval`` a floor no user goes under),
then the environment (``HPCBRIDGE_X``, else ``EXAMLOPS_HPC_X``, else ``EXAMLOPS_SLURM_X``;
the scheduler also from ``EXAMLOPS_SLURM_MODE``), then keyword overrides."""

from __future__ import annotations

import difflib
import logging
import os
import shlex
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from .errors import ConfigurationError
from .registry import CONTAINER_RUNTIMES, DRIVER_CHOICES, SCHEDULERS
from .resources import NATIVE_SCHEDULERS, RESOURCE_KEYS
from .site_config import read_site_settings

TRANSPORTS = ("local", "ssh")
#: what carries the ssh transport: paramiko in this process, or the system's OpenSSH client
SSH_BACKENDS = ("paramiko", "openssh")
#: seconds: the least time between two status rounds towards a scheduler, unless set
DEFAULT_MIN_POLL_INTERVAL = 5.0
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


def _native_options(env: Mapping[str, str]) -> Tuple[Dict[str, List[str]], str]:
    """``HPCBRIDGE_SLURM_OPTIONS`` / ``HPCBRIDGE_FLUX_OPTIONS`` (shell words) as the
    ``native`` resource, and the variables they came from."""
    native: Dict[str, List[str]] = {}
    variables = []
    for scheduler in NATIVE_SCHEDULERS:
        found = lookup(env, f"{scheduler.upper()}_OPTIONS")
        if found:
            try:
                native[scheduler] = shlex.split(found[1])
            except ValueError as exc:
                raise ConfigurationError(
                    f"{found[0]}={found[1]!r}: {exc}; quote as a shell would "
                    "(--comment='two words')"
                ) from None
            variables.append(found[0])
    return native, " and ".join(variables)


def _scheduler_from(env: Mapping[str, str]) -> Tuple[str, str]:
    for variable in ("HPCBRIDGE_SCHEDULER", "EXAMLOPS_HPC_SCHEDULER", "EXAMLOPS_SLURM_MODE"):
        value = env.get(variable, "").strip()
        if value:
            return variable, value.lower()
    return "default", "mock"


def _state_home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME") or os.path.expanduser("~")
    base = env.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
    return Path(base) / "hpcbridge"


@dataclass
class Settings:
    """Everything hpcbridge reads from the environment, validated."""

    scheduler: str = "mock"
    transport: str = "local"
    ssh_host: Optional[str] = None
    ssh_user: Optional[str] = None
    ssh_port: Optional[int] = None
    ssh_key: Optional[str] = None
    ssh_known_hosts: Optional[str] = None
    ssh_accept_new_host_keys: bool = False
    ssh_login_shell: bool = False
    ssh_backend: str = "paramiko"
    remote_workdir: Optional[str] = None
    remote_repo: Optional[str] = None
    flux_uri: Optional[str] = None
    flux_adapter_version: Optional[str] = None
    slurm_driver: str = "auto"
    flux_driver: str = "auto"
    flux_command: str = "flux"
    #: what runs a job's script in its ``container``: ch-run, apptainer or singularity
    container_runtime: str = "ch-run"
    #: Flux: True = batch jobs, False = plain jobs, None = the instance's default
    flux_nested: Optional[bool] = None
    db_path: Optional[str] = None
    state_dir: Optional[str] = None
    cpu_cost_per_hour: float = 0.0
    gpu_cost_per_hour: float = 0.0
    command_timeout: float = 60.0
    #: seconds between two status rounds towards the scheduler (``None``: the adapter's default)
    poll_interval: Optional[float] = None
    #: seconds: the least time between two rounds towards a controller, whatever is asked
    min_poll_interval: float = DEFAULT_MIN_POLL_INTERVAL
    #: the site file's ``min_poll_interval``: ``min_poll_interval`` never goes under it
    site_min_poll_interval: float = 0.0
    #: the most jobs of one ``submit_many`` queued at once (``None``: the cluster's own cap)
    max_queued: Optional[int] = None
    #: environment for every scheduler command, where it runs (e.g. SLURM_CONF)
    command_env: Dict[str, str] = field(default_factory=dict)
    unknown_limit: int = 6
    #: the plain ``FLUX_URI`` of the environment read (set by Flux inside an allocation)
    enclosing_flux_uri: Optional[str] = None
    resource_defaults: Dict[str, Any] = field(default_factory=dict)
    #: which variable each setting came from, for ``hpcbridge doctor``
    sources: Dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_env(
        cls,
        env: Optional[Mapping[str, str]] = None,
        *,
        given_as: Optional[Mapping[str, str]] = None,
        **overrides: Any,
    ) -> Settings:
        """The settings of ``env`` (default: ``os.environ``) and the site file, with
        ``overrides`` over them; ``given_as``: where an override came from (``--scheduler``)."""
        env = os.environ if env is None else env
        settings = cls()
        site_file, site = read_site_settings(env)
        for attribute, value in site.items():
            settings._set(attribute, value, str(site_file))
        if "min_poll_interval" in site:
            settings._set("site_min_poll_interval", site["min_poll_interval"], str(site_file))
        warn_misspelt(env)
        variable, scheduler = _scheduler_from(env)
        settings._set("scheduler", scheduler, variable)
        for attribute, name, parse in _READERS:
            # the source system read the costs without a prefix too
            found = lookup(env, name) or (
                _unprefixed(env, name) if name.endswith("_COST_PER_HOUR") else None
            )
            if found:
                settings._set(attribute, parse(found[0], found[1]), found[0])
        if env.get("FLUX_URI", "").strip():
            settings._set("enclosing_flux_uri", env["FLUX_URI"].strip(), "FLUX_URI")
        for key in RESOURCE_KEYS:
            found = lookup(env, key.upper()) if key != "native" else None
            if found:
                settings.resource_defaults[key] = found[1]
                settings.sources[f"resource:{key}"] = found[0]
        native, native_from = _native_options(env)
        if native:
            settings.resource_defaults["native"] = native
            settings.sources["resource:native"] = native_from

        known = {f.name for f in fields(cls)} - {"sources"}
        for attribute, value in overrides.items():
            if attribute not in known:
                raise ConfigurationError(f"unknown setting {attribute!r}")
            if attribute == "site_min_poll_interval":
                raise ConfigurationError(
                    "site_min_poll_interval is the site settings file's floor; "
                    "set min_poll_interval (it can only raise that floor)"
                )
            if value is not None:
                settings._set(
                    attribute, value, (given_as or {}).get(attribute, f"argument {attribute}")
                )
        if not settings.state_dir:
            settings.state_dir = str(_state_home(env))
        settings.validate()
        return settings

    def _set(self, attribute: str, value: Any, source: str) -> None:
        setattr(self, attribute, value)
        self.sources[attribute] = source

    def validate(self) -> None:
        self.scheduler = str(self.scheduler).lower()
        self.transport = str(self.transport).lower()
        if self.scheduler not in SCHEDULERS:
            raise self._refused("scheduler", "unknown scheduler", SCHEDULERS)
        if self.transport not in TRANSPORTS:
            raise self._refused("transport", "unknown transport", TRANSPORTS)
        if self.transport == "ssh" and not self.ssh_host:
            raise ConfigurationError(
                "the ssh transport needs a host: set HPCBRIDGE_SSH_HOST (or EXAMLOPS_HPC_SSH_HOST)"
            )
        self.ssh_backend = str(self.ssh_backend).lower()
        if self.ssh_backend not in SSH_BACKENDS:
            raise self._refused("ssh_backend", "unknown ssh backend", SSH_BACKENDS)
        for attribute in ("slurm_driver", "flux_driver"):
            setattr(self, attribute, str(getattr(self, attribute)).lower())
            if getattr(self, attribute) not in DRIVER_CHOICES:
                raise self._refused(attribute, "", DRIVER_CHOICES)
        if self.container_runtime not in CONTAINER_RUNTIMES:
            raise self._refused("container_runtime", "", CONTAINER_RUNTIMES)
        if self.ssh_port is not None and not 0 < int(self.ssh_port) < 65536:
            raise self._refused("ssh_port", "not a TCP port")
        for attribute in ("cpu_cost_per_hour", "gpu_cost_per_hour"):
            if not getattr(self, attribute) >= 0:
                raise self._refused(
                    attribute, "a cost per hour is 0 or more; set it to what the site charges"
                )
        if self.unknown_limit < 1:
            raise ConfigurationError("HPCBRIDGE_UNKNOWN_LIMIT must be at least 1")
        if self.min_poll_interval < self.site_min_poll_interval:
            asked = self.sources.get("min_poll_interval", "min_poll_interval")
            self.min_poll_interval = self.site_min_poll_interval
            self.sources["min_poll_interval"] = (
                f"{self.sources.get('site_min_poll_interval', 'the site file')} "
                f"(over {asked}'s lower value)"
            )

    def _refused(self, attribute: str, why: str, choices: Sequence[str] = ()) -> ConfigurationError:
        """``VARIABLE=value: why; choose one of CHOICES``."""
        among = f"choose one of {', '.join(choices)}" if choices else ""
        text = "; ".join(part for part in (why, among) if part)
        value = getattr(self, attribute)
        return ConfigurationError(f"{self.sources.get(attribute, attribute)}={value!r}: {text}")

    def with_(self, **changes: Any) -> Settings:
        """A copy with some settings changed (validated again)."""
        import copy

        changed = copy.copy(self)
        changed.sources = dict(self.sources)
        for attribute, value in changes.items():
            changed._set(attribute, value, f"argument {attribute}")
        changed.validate()
        return changed

    @property
    def state_path(self) -> Path:
        # from_env always sets state_dir; a Settings() built by hand uses this process's home
        return Path(self.state_dir) if self.state_dir else _state_home(os.environ)

    @property
    def database_path(self) -> Path:
        return Path(self.db_path) if self.db_path else self.state_path / "jobs.db"


def _text(variable: str, text: str) -> str:
    return text


def _unprefixed(env: Mapping[str, str], name: str) -> Optional[Tuple[str, str]]:
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
_READERS: Tuple[Tuple[str, str, Callable[[str, str], Any]], ...] = (
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
    names = ["SCHEDULER", *(name for _, name, _ in _READERS), *OTHER_VARIABLES]
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
