"""Settings from the site's file (its ``min_poll_interval`` a floor no user goes under),
then the environment (``HPCBRIDGE_X``, else ``EXAMLOPS_HPC_X``, else ``EXAMLOPS_SLURM_X``;
the scheduler also from ``EXAMLOPS_SLURM_MODE``), then keyword overrides."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import ConfigurationError
from ..resources import RESOURCE_KEYS
from ..schedulers.native_options import NATIVE_SCHEDULERS
from .schedulers import CONTAINER_RUNTIMES, DRIVER_CHOICES, SCHEDULERS, SLURM_DRIVER_CHOICES
from .site import read_site_settings
from .variables import READERS, lookup, unprefixed, warn_misspelt

TRANSPORTS = ("local", "ssh")
#: what carries the ssh transport: paramiko in this process, or the system's OpenSSH client
SSH_BACKENDS = ("paramiko", "openssh")
#: seconds: the least time between two status rounds towards a scheduler, unless set
DEFAULT_MIN_POLL_INTERVAL = 5.0


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
    #: slurmrestd for the REST driver: ``unix:/path/to/socket`` or ``http(s)://host:port``
    slurm_rest_url: Optional[str] = None
    #: the command that prints a token for slurmrestd (``scontrol token lifespan=3600``)
    slurm_rest_token_command: Optional[str] = None
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
        settings._read_site(env)
        warn_misspelt(env)
        settings._read_variables(env)
        settings._read_resource_defaults(env)
        settings._override(overrides, given_as or {})
        if not settings.state_dir:
            settings.state_dir = str(_state_home(env))
        settings.validate()
        return settings

    def _read_site(self, env: Mapping[str, str]) -> None:
        """The site file's settings (its ``min_poll_interval`` also the floor)."""
        site_file, site = read_site_settings(env)
        for attribute, value in site.items():
            self._set(attribute, value, str(site_file))
        if "min_poll_interval" in site:
            self._set("site_min_poll_interval", site["min_poll_interval"], str(site_file))

    def _read_variables(self, env: Mapping[str, str]) -> None:
        """The settings' variables (the scheduler's first), and ``FLUX_URI``."""
        variable, scheduler = _scheduler_from(env)
        self._set("scheduler", scheduler, variable)
        for attribute, name, parse in READERS:
            # the source system read the costs without a prefix too
            found = lookup(env, name) or (
                unprefixed(env, name) if name.endswith("_COST_PER_HOUR") else None
            )
            if found:
                self._set(attribute, parse(found[0], found[1]), found[0])
        if env.get("FLUX_URI", "").strip():
            self._set("enclosing_flux_uri", env["FLUX_URI"].strip(), "FLUX_URI")

    def _read_resource_defaults(self, env: Mapping[str, str]) -> None:
        """A variable per resource key (``HPCBRIDGE_TIME``...) and the native options."""
        for key in RESOURCE_KEYS:
            found = lookup(env, key.upper()) if key != "native" else None
            if found:
                self.resource_defaults[key] = found[1]
                self.sources[f"resource:{key}"] = found[0]
        native, native_from = _native_options(env)
        if native:
            self.resource_defaults["native"] = native
            self.sources["resource:native"] = native_from

    def _override(self, overrides: Mapping[str, Any], given_as: Mapping[str, str]) -> None:
        """Keyword settings over the rest (``None``: not given)."""
        known = {f.name for f in fields(self)} - {"sources"}
        for attribute, value in overrides.items():
            if attribute not in known:
                raise ConfigurationError(f"unknown setting {attribute!r}")
            if attribute == "site_min_poll_interval":
                raise ConfigurationError(
                    "site_min_poll_interval is the site settings file's floor; "
                    "set min_poll_interval (it can only raise that floor)"
                )
            if value is not None:
                self._set(attribute, value, given_as.get(attribute, f"argument {attribute}"))

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
        for attribute, choices in (
            ("slurm_driver", SLURM_DRIVER_CHOICES),
            ("flux_driver", DRIVER_CHOICES),
        ):
            setattr(self, attribute, str(getattr(self, attribute)).lower())
            if getattr(self, attribute) not in choices:
                raise self._refused(attribute, "", choices)
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
