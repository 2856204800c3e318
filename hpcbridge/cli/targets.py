"""Which settings, adapters and recorded jobs a command works on: the one rule for ids.

For each id a command is given (``status``, ``wait``, ``logs``, ``cancel``):

1. Its records are looked up under the form each scheduler records it in (a
   Flux id typed in decimal or with an ASCII ``f`` is recorded as ``ƒ…``).
2. An explicit choice narrows them: the scheduler of ``--scheduler`` or of
   ``HPCBRIDGE_SCHEDULER`` (not the default), ``--host`` (the host a job is
   recorded on, as ``hpcbridge jobs --json`` shows it, or the SSH host as given at
   submission), ``--flux-uri``.
3. No record left: the id is asked of the settings' scheduler and transport (saying
   so on stderr, with the commands that ask them, when the narrowing left out records
   of the id: the job asked may be someone else's).
   One: the job is asked where it was recorded - its scheduler, transport,
   host and Flux instance, reached as it was at submission (``places.adapter_at``) -
   whatever the current settings, and the command
   says so on stderr when that differs from them.  Several (the same id on
   two schedulers or hosts): an error listing each, with the command that asks it.

Ids that lead to different places are asked in one group per place, so one
command can follow a mock job and a Slurm job together.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Set, Tuple

from ..config import Settings
from ..errors import ConfigurationError, SchedulerAdapterError
from ..registry import SCHEDULER_ENTRIES
from .places import Place, adapter_at, place_of, settings_place

if TYPE_CHECKING:  # the store and adapters load when a command needs them: --help stays quick
    from ..engine.adapter import SchedulerAdapter
    from ..store.jobs import JobRecord, JobStore


def settings_from(args: argparse.Namespace, scheduler: Optional[str] = None) -> Settings:
    """The environment's settings with the command's flags over them."""
    overrides: Dict[str, Any] = {}
    for name in ("transport", "flux_uri"):
        if getattr(args, name, None):
            overrides[name] = getattr(args, name)
    chosen = getattr(args, "scheduler", None) or scheduler
    if chosen:
        overrides["scheduler"] = chosen
    flags = {name: "--" + name.replace("_", "-") for name in overrides}
    return Settings.from_env(given_as=flags, **overrides)


def adapter_for(args: argparse.Namespace, settings: Optional[Settings] = None) -> SchedulerAdapter:
    """The adapter for the settings (default: the command's)."""
    from .. import factory

    return factory.adapter_from_settings(settings or settings_from(args))


def store_for(settings: Settings) -> JobStore:
    from ..store.jobs import JobStore

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


@dataclass(frozen=True)
class Narrowing:
    """The explicit choices that narrow which records an id may mean."""

    scheduler: Optional[str] = None
    host: Optional[str] = None
    flux_uri: Optional[str] = None

    def keeps(self, record: JobRecord) -> bool:
        return (
            (self.scheduler is None or record.scheduler == self.scheduler)
            and (self.host is None or self.host in hosts_of(record))
            and (self.flux_uri is None or record.flux_uri == self.flux_uri)
        )


def hosts_of(record: JobRecord) -> Tuple[str, ...]:
    """The names ``--host`` may give a record's host by: its label (``user@host:port``)
    and, for SSH, the host as it was given at submission (an ssh-config alias)."""
    given = json.loads(record.reach).get("ssh_host") if record.reach else None
    return (record.host, given) if given else (record.host,)


def narrowing_of(args: argparse.Namespace, settings: Settings) -> Narrowing:
    """``--scheduler`` or a scheduler the environment sets, ``--host``, ``--flux-uri``."""
    chosen = settings.sources.get("scheduler", "default") != "default"
    return Narrowing(
        scheduler=settings.scheduler if chosen else None,
        host=getattr(args, "host", None),
        flux_uri=getattr(args, "flux_uri", None),
    )


def records_of(
    store: JobStore, job_ids: Sequence[str], narrowing: Narrowing = Narrowing()
) -> Dict[str, List[JobRecord]]:
    """For each id given, its records under any scheduler's form that ``narrowing``
    keeps, newest first (one query)."""
    forms = {job_id: recorded_forms(job_id) for job_id in job_ids}
    wanted = {form for by_scheduler in forms.values() for form in by_scheduler.values()}
    found: Dict[str, List[JobRecord]] = {job_id: [] for job_id in job_ids}
    for record in store.find(sorted(wanted)):
        if not narrowing.keeps(record):
            continue
        for job_id, by_scheduler in forms.items():
            if by_scheduler.get(record.scheduler) == record.job_id:
                found[job_id].append(record)
    return found


@dataclass
class Group:
    """The jobs one adapter reaches, and their records."""

    adapter: SchedulerAdapter
    #: the ids in the order given, each as its scheduler records it (normalized)
    job_ids: List[str] = field(default_factory=list)
    #: the records of those ids that have one, by normalized id
    records: Dict[str, JobRecord] = field(default_factory=dict)

    def unrecorded(self, job_ids: Optional[Sequence[str]] = None) -> List[str]:
        """Those of ``job_ids`` (default: all) that no record knows."""
        return [job_id for job_id in (job_ids or self.job_ids) if job_id not in self.records]


@dataclass
class Targets:
    """Every group a command works on, and which group and id each typed id became."""

    groups: List[Group]
    #: (typed id, its group, its normalized id), in the order given
    order: List[Tuple[str, Group, str]]
    #: typed id -> the commands that ask its records the narrowing left out
    elsewhere: Dict[str, List[str]] = field(default_factory=dict)
    #: typed id -> why it leads nowhere (recorded twice, no id of the scheduler...);
    #: filled only with ``keep_going``, else the first such error is raised
    failed: Dict[str, Exception] = field(default_factory=dict)

    def typed(self, group: Group, job_ids: Sequence[str]) -> List[str]:
        """The ids as typed that became these ids of ``group``."""
        return [
            typed for typed, owner, job_id in self.order if owner is group and job_id in job_ids
        ]

    def hint(self, group: Group, job_ids: Sequence[str]) -> str:
        """Where else these ids are recorded, as the commands that ask there ("" if nowhere)."""
        asks = [
            ask for typed in self.typed(group, job_ids) for ask in self.elsewhere.get(typed, [])
        ]
        return f" (recorded elsewhere: {', or '.join(asks)})" if asks else ""


def targets_for(
    args: argparse.Namespace, job_ids: Sequence[str], keep_going: bool = False
) -> Targets:
    """The groups of jobs these ids name (see the module docstring).

    ``keep_going``: an id that leads nowhere is noted in ``Targets.failed`` and the
    others are still grouped (``status`` of several ids answers each)."""
    settings = settings_from(args)
    store = store_for(settings)
    narrowing = narrowing_of(args, settings)
    found = records_of(store, job_ids, narrowing)
    targets = Targets([], [], _elsewhere(args, store, job_ids, narrowing))
    by_place: Dict[Optional[Place], Group] = {}
    for job_id in job_ids:
        try:
            record = one_record(args, job_id, found[job_id])
            if record is None and targets.elsewhere.get(job_id):
                # the id is asked of the chosen scheduler, where it may be someone else's
                print(
                    f"hpcbridge: job {job_id} is not recorded on {settings.scheduler} here; "
                    f"asking {settings.scheduler} for it (yours is recorded elsewhere: "
                    + ", or ".join(targets.elsewhere[job_id])
                    + ")",
                    file=sys.stderr,
                )
            place = place_of(record) if record is not None else None
            group = by_place.get(place)
            if group is None:
                group = Group(_adapter(args, settings, place, job_id))
                by_place[place] = group
                targets.groups.append(group)
            normalized = group.adapter.normalize_job_id(record.job_id if record else job_id)
        except (SchedulerAdapterError, ValueError, OSError) as exc:
            if not keep_going:
                raise
            targets.failed[job_id] = exc
            continue
        if record is not None:
            group.records[normalized] = record
        if normalized not in group.job_ids:
            group.job_ids.append(normalized)
        targets.order.append((job_id, group, normalized))
    return targets


def _elsewhere(
    args: argparse.Namespace, store: JobStore, job_ids: Sequence[str], narrowing: Narrowing
) -> Dict[str, List[str]]:
    """For ids that the narrowing cut off from a record, the commands that ask those records."""
    if narrowing == Narrowing():
        return {}
    hints: Dict[str, List[str]] = {}
    for job_id, records in records_of(store, job_ids).items():
        left_out = [place_of(record) for record in records if not narrowing.keeps(record)]
        if left_out:
            hints[job_id] = [_ask(args, job_id, place, False) for place in left_out]
    return hints


def _ask(args: argparse.Namespace, job_id: str, place: Place, with_host: bool) -> str:
    """The command that asks ``place`` about ``job_id``."""
    flags = f"--scheduler {place.scheduler}"
    if with_host:
        flags += f" --host {shlex.quote(place.host)}"
    return f"hpcbridge {args.command} {shlex.quote(job_id)} {flags}"


def one_record(
    args: argparse.Namespace, job_id: str, records: Sequence[JobRecord]
) -> Optional[JobRecord]:
    """The record ``job_id`` means; ``ConfigurationError`` listing them when it may mean several."""
    places = list(dict.fromkeys(place_of(record) for record in records))
    if len(places) <= 1:
        return records[0] if records else None
    hosts: Dict[str, Set[str]] = {}
    for place in places:
        hosts.setdefault(place.scheduler, set()).add(place.host)
    asks = [_ask(args, job_id, place, len(hosts[place.scheduler]) > 1) for place in places]
    where = "; ".join(place.describe() for place in places)
    raise ConfigurationError(
        f"job {job_id} is recorded more than once ({where}); ask one of them: " + ", or ".join(asks)
    )


def _adapter(
    args: argparse.Namespace, settings: Settings, place: Optional[Place], job_id: str
) -> SchedulerAdapter:
    """The settings' adapter (``place=None``), else one that reaches the recorded place,
    saying so when that is not where the settings point."""
    if place is None:
        return adapter_for(args, settings)
    here = settings_place(settings)
    if here is None or (here.scheduler, here.transport, here.host) != (
        place.scheduler,
        place.transport,
        place.host,
    ):
        now = f"; these settings point at {here.describe()}" if here is not None else ""
        print(
            f"hpcbridge: job {job_id} is asked where it was submitted: {place.describe()}{now}",
            file=sys.stderr,
        )
    return adapter_at(place, settings)
