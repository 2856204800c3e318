"""Which record an id means (README, "Which job an id means"): the id in each scheduler's
recorded form, the records the explicit choices keep, one record or an error listing
them, and the ids grouped by the adapter that reaches them."""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Set, Tuple

from .. import factory
from ..errors import ConfigurationError, SchedulerAdapterError
from ..settings.config import Settings
from ..settings.schedulers import SCHEDULER_ENTRIES
from ..store.jobs import JobRecord, JobStore
from .places import Place, adapter_at, place_of, settings_place

if TYPE_CHECKING:
    from ..engine.adapter import SchedulerAdapter

log = logging.getLogger("hpcbridge")


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

    @classmethod
    def of(
        cls, settings: Settings, host: Optional[str] = None, flux_uri: Optional[str] = None
    ) -> Narrowing:
        """The settings' scheduler when chosen (not hpcbridge's default), ``host``,
        ``flux_uri``."""
        chosen = settings.sources.get("scheduler", "default") != "default"
        return cls(scheduler=settings.scheduler if chosen else None, host=host, flux_uri=flux_uri)

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


def asking(command: str, job_id: str, place: Place, with_host: bool) -> str:
    """The command line that asks ``place`` about ``job_id``."""
    flags = f"--scheduler {place.scheduler}"
    if with_host:
        flags += f" --host {shlex.quote(place.host)}"
    return f"hpcbridge {command} {shlex.quote(job_id)} {flags}"


def one_record(command: str, job_id: str, records: Sequence[JobRecord]) -> Optional[JobRecord]:
    """The record ``job_id`` means; ``ConfigurationError`` listing them (as the
    ``command`` lines that ask each) when it may mean several."""
    places = list(dict.fromkeys(place_of(record) for record in records))
    if len(places) <= 1:
        return records[0] if records else None
    hosts: Dict[str, Set[str]] = {}
    for place in places:
        hosts.setdefault(place.scheduler, set()).add(place.host)
    asks = [asking(command, job_id, place, len(hosts[place.scheduler]) > 1) for place in places]
    where = "; ".join(place.describe() for place in places)
    raise ConfigurationError(
        f"job {job_id} is recorded more than once ({where}); ask one of them: " + ", or ".join(asks)
    )


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

    def placed(self) -> Dict[str, Tuple[Group, str]]:
        """typed id -> its group and normalized id (the ids that lead somewhere)."""
        return {typed: (group, job_id) for typed, group, job_id in self.order}

    def hint(self, group: Group, job_ids: Sequence[str]) -> str:
        """Where else these ids are recorded, as the commands that ask there ("" if nowhere)."""
        asks = [
            ask
            for typed, owner, job_id in self.order
            if owner is group and job_id in job_ids
            for ask in self.elsewhere.get(typed, [])
        ]
        return f" (recorded elsewhere: {', or '.join(asks)})" if asks else ""


#: the settings that say where to ask, each against what of a place it names
WHERE_SETTINGS = (("scheduler", "scheduler"), ("transport", "transport"), ("ssh_host", "host"))


@dataclass
class Router:
    """Leads typed ids to the adapters that reach their records (an id no record
    knows: to the settings' own adapter, which is asked for it)."""

    settings: Settings
    store: JobStore
    narrowing: Narrowing = Narrowing()
    #: the command the hints and errors name (``hpcbridge status ID --scheduler slurm``)
    command: str = "status"
    #: records whose jobs can no longer be asked (a gone pack allocation's) settled as
    #: they ended; whether any was (the records are then read again)
    settle: Optional[Callable[[Sequence[JobRecord]], bool]] = None
    #: where a notice goes (the command: a line on stderr)
    notify: Callable[[str], None] = log.warning

    def targets(self, job_ids: Sequence[str], keep_going: bool = False) -> Targets:
        """The groups of jobs these ids name, one per place they lead to.

        ``keep_going``: an id that leads nowhere is noted in ``Targets.failed`` and the
        others are still grouped (``status`` of several ids answers each)."""
        found = records_of(self.store, job_ids, self.narrowing)
        settled = [record for records in found.values() for record in records]
        if self.settle is not None and self.settle(settled):
            found = records_of(self.store, job_ids, self.narrowing)  # as they are now recorded
        targets = Targets([], [], self._elsewhere(job_ids))
        by_place: Dict[Optional[Place], Group] = {}
        for job_id in job_ids:
            try:
                record = one_record(self.command, job_id, found[job_id])
                group = self._group(targets, by_place, job_id, record)
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

    def _group(
        self,
        targets: Targets,
        by_place: Dict[Optional[Place], Group],
        job_id: str,
        record: Optional[JobRecord],
    ) -> Group:
        """The group of the place ``record`` names (``None``: the settings' own), made
        on first use."""
        scheduler = self.settings.scheduler
        if record is None and targets.elsewhere.get(job_id):
            # the id is asked of the chosen scheduler, where it may be someone else's
            self.notify(
                f"job {job_id} is not recorded on {scheduler} here; asking {scheduler} for it "
                "(yours is recorded elsewhere: " + ", or ".join(targets.elsewhere[job_id]) + ")"
            )
        place = place_of(record) if record is not None else None
        group = by_place.get(place)
        if group is None:
            group = Group(self._adapter(place, job_id))
            by_place[place] = group
            targets.groups.append(group)
        return group

    def _elsewhere(self, job_ids: Sequence[str]) -> Dict[str, List[str]]:
        """For ids that the narrowing cut off from a record, the commands that ask those
        records."""
        if self.narrowing == Narrowing():
            return {}
        hints: Dict[str, List[str]] = {}
        for job_id, records in records_of(self.store, job_ids).items():
            left_out = [place_of(record) for record in records if not self.narrowing.keeps(record)]
            if left_out:
                hints[job_id] = [asking(self.command, job_id, place, False) for place in left_out]
        return hints

    def _adapter(self, place: Optional[Place], job_id: str) -> SchedulerAdapter:
        """The settings' adapter (``place=None``), else one that reaches the recorded
        place, saying so when the user chose a scheduler, transport or host and it is
        not that (with none chosen, the job's own place is all there is to ask: nothing
        to say)."""
        if place is None:
            return factory.adapter_from_settings(self.settings)
        chosen = _chosen(self.settings)
        here = settings_place(self.settings) if chosen else None
        if chosen and _overridden(self.settings, here, place):
            now = f"; these settings point at {here.describe()}" if here is not None else ""
            self.notify(f"job {job_id} is asked where it was submitted: {place.describe()}{now}")
        return adapter_at(place, self.settings)


def _chosen(settings: Settings) -> bool:
    """Whether the user chose where to ask: a scheduler, a transport or an SSH host set
    (by a variable, the site file or a flag), not hpcbridge's defaults."""
    return any(_set_by_user(settings, name) for name, _ in WHERE_SETTINGS)


def _set_by_user(settings: Settings, name: str) -> bool:
    return settings.sources.get(name, "default") != "default"


def _overridden(settings: Settings, here: Optional[Place], place: Place) -> bool:
    """Whether a setting the user chose points elsewhere than the job's place (a place
    the settings cannot tell without connecting: elsewhere)."""
    if here is None:
        return True
    return any(
        _set_by_user(settings, name) and getattr(here, field) != getattr(place, field)
        for name, field in WHERE_SETTINGS
    )
