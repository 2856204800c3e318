"""Which settings, adapter and recorded jobs a command works on.

An id is looked up in the job store under the form each scheduler records
it in (a Flux id typed in decimal or with an ASCII ``f`` is recorded as
``ƒ…``), so ``hpcbridge status ID`` follows a job with whatever scheduler,
and for Flux whatever instance, submitted it; an id with no record goes to
the configured scheduler.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ..config import Settings
from ..errors import ConfigurationError
from ..registry import SCHEDULER_ENTRIES

if TYPE_CHECKING:  # the store and adapters load when a command needs them: --help stays quick
    from ..schedulers.base import SchedulerAdapter
    from ..store import JobRecord, JobStore


def settings_from(args: argparse.Namespace, scheduler: Optional[str] = None) -> Settings:
    """The environment's settings with the command's flags over them."""
    overrides: Dict[str, Any] = {}
    for name in ("transport", "flux_uri"):
        if getattr(args, name, None):
            overrides[name] = getattr(args, name)
    chosen = getattr(args, "scheduler", None) or scheduler
    if chosen:
        overrides["scheduler"] = chosen
    return Settings.from_env(**overrides)


def adapter_for(args: argparse.Namespace, settings: Optional[Settings] = None) -> SchedulerAdapter:
    """The adapter for the settings (default: the command's)."""
    from .. import factory

    return factory.adapter_from_settings(settings or settings_from(args))


def store_for(settings: Settings) -> JobStore:
    from ..store import JobStore

    return JobStore(settings.database_path)


def recorded_forms(job_id: str) -> Dict[str, str]:
    """``{scheduler: the id as that scheduler records it}``, for the schedulers it fits."""
    forms: Dict[str, str] = {}
    for entry in SCHEDULER_ENTRIES:
        try:
            forms[entry.name] = entry.recorded_job_id(job_id)
        except ValueError:  # not an id of this scheduler (e.g. "123_4" for Flux)
            continue
    return forms


def find_records(
    store: JobStore, job_ids: Sequence[str], scheduler: Optional[str] = None
) -> Dict[str, JobRecord]:
    """For each id given, its newest record under any scheduler's form (one query).

    With ``scheduler``, only that scheduler's records count.
    """
    forms = {job_id: recorded_forms(job_id) for job_id in job_ids}
    wanted = {form for by_scheduler in forms.values() for form in by_scheduler.values()}
    newest: Dict[Tuple[str, str], Tuple[int, JobRecord]] = {}
    for rank, record in enumerate(store.find(sorted(wanted))):
        if scheduler is None or record.scheduler == scheduler:
            newest.setdefault((record.scheduler, record.job_id), (rank, record))
    found: Dict[str, JobRecord] = {}
    for job_id, by_scheduler in forms.items():
        matches = [newest[key] for key in by_scheduler.items() if key in newest]
        if matches:
            found[job_id] = min(matches, key=lambda match: match[0])[1]
    return found


@dataclass
class Target:
    """The adapter a command works through and the jobs it works on."""

    adapter: SchedulerAdapter
    #: the ids in the order given, each as its scheduler records it (normalized)
    job_ids: List[str]
    #: the records of those ids that have one, by normalized id
    records: Dict[str, JobRecord]

    def unrecorded(self, job_ids: Optional[Sequence[str]] = None) -> List[str]:
        """Those of ``job_ids`` (default: all) that no record knows."""
        return [job_id for job_id in (job_ids or self.job_ids) if job_id not in self.records]


def adapter_for_ids(args: argparse.Namespace, job_ids: Sequence[str]) -> Target:
    """The adapter that submitted these jobs, their ids as it recorded them, their records.

    The records say which scheduler (unless --scheduler) and, for Flux, which
    instance (unless --flux-uri): a job in a nested broker is followed there
    even when HPCBRIDGE_FLUX_URI is no longer set.
    """
    settings = settings_from(args)
    records = find_records(store_for(settings), job_ids, args.scheduler)
    schedulers = {args.scheduler} if args.scheduler else {r.scheduler for r in records.values()}
    if len(schedulers) > 1:
        raise ConfigurationError(
            f"these ids belong to different schedulers ({', '.join(sorted(schedulers))}); "
            "give --scheduler"
        )
    scheduler = schedulers.pop() if schedulers else None
    chosen = settings_from(args, scheduler)
    instances = {record.flux_uri for record in records.values() if record.flux_uri}
    if len(instances) > 1 and not args.flux_uri:
        raise ConfigurationError("these Flux jobs are in different instances; give --flux-uri")
    if len(instances) == 1 and not args.flux_uri:
        chosen = chosen.with_(flux_uri=instances.pop())
    adapter = adapter_for(args, chosen)
    ids = [records[job_id].job_id if job_id in records else job_id for job_id in job_ids]
    normalized = [adapter.normalize_job_id(job_id) for job_id in ids]
    by_id = {adapter.normalize_job_id(record.job_id): record for record in records.values()}
    return Target(adapter, normalized, by_id)
