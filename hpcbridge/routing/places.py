"""Where a recorded job runs (its scheduler, host, Flux instance and transport) and the
adapter that reaches it again."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Optional

from .. import factory
from ..errors import ConfigurationError
from ..settings.config import Settings

if TYPE_CHECKING:  # the adapters load when a command needs them: --help stays quick
    from ..engine.adapter import SchedulerAdapter


class Place(NamedTuple):
    """Where a job runs (a job, sweep or pack record's scheduler, host, Flux instance and
    transport): what one adapter reaches."""

    scheduler: str
    host: str
    flux_uri: Optional[str]
    transport: str
    #: JSON of the settings that reach the host again (``Executor.reach``), or None
    reach: Optional[str] = None

    def describe(self) -> str:
        """``slurm over ssh on me@login1:22`` (and the Flux instance)."""
        text = f"{self.scheduler} over {self.transport} on {self.host}"
        return f"{text} (instance {self.flux_uri})" if self.flux_uri else text


def place_of(record: Any) -> Place:
    """Where a job, sweep or pack record was submitted: it is always asked there again."""
    return Place(record.scheduler, record.host, record.flux_uri, record.transport, record.reach)


def adapter_at(place: Place, settings: Settings) -> SchedulerAdapter:
    """An adapter that reaches ``place``: first as the job was reached when it went
    in (the SSH host as given then - an ssh-config alias - with its key and
    known-hosts files), then the settings' own SSH target if it is that host, last
    the host the record names (``user@host:port``)."""
    changes: Dict[str, Any] = {"scheduler": place.scheduler, "transport": place.transport}
    if place.flux_uri:
        changes["flux_uri"] = place.flux_uri
    candidates = [changes]
    if place.transport == "ssh":
        if place.reach:
            candidates.insert(0, {**changes, **json.loads(place.reach)})
        candidates.append({**changes, **_ssh_target(place.host)})
    for candidate in candidates:
        try:
            adapter = factory.adapter_from_settings(settings.with_(**candidate))
        except ConfigurationError:
            if candidate is candidates[-1]:
                raise
            continue
        if adapter.host_label == place.host:
            return adapter
        adapter.close()
    raise ConfigurationError(
        f"recorded on host {place.host}, which these settings do not reach; "
        "set HPCBRIDGE_SSH_HOST (and _USER, _PORT) to reach it"
    )


def settings_place(settings: Settings) -> Optional[Place]:
    """Where the settings' own adapter would ask (``None`` when that cannot be told
    without connecting: an SSH setting that does not resolve)."""
    try:
        executor = factory.build_executor(settings)
    except (ConfigurationError, OSError):
        return None
    try:
        return Place(settings.scheduler, executor.host, settings.flux_uri, executor.kind)
    finally:
        executor.close()


def _ssh_target(label: str) -> Dict[str, Any]:
    """``user@host:port`` (how an SSH host is recorded) as settings."""
    user_host, colon, port = label.rpartition(":")
    if not colon or not port.isdigit():
        user_host, port = label, ""
    user, _, host = user_host.rpartition("@")
    target: Dict[str, Any] = {"ssh_host": host or user_host}
    if user:
        target["ssh_user"] = user
    if port:
        target["ssh_port"] = int(port)
    return target
