"""Which settings, adapters and recorded jobs a command works on: the one rule for ids
(README, "Which job an id means"), where a recorded job runs and the adapter that reaches
it, and which ids name no job anywhere."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
)

from .. import factory
from ..config import Settings
from ..errors import (
    ConfigurationError,
    JobNotFoundError,
    SchedulerAdapterError,
    SchedulerUnavailableError,
)
from ..model import JobState
from ..registry import SCHEDULER_ENTRIES
from ..store.jobs import JobRecord, JobStore

if TYPE_CHECKING:  # the adapters load when a command needs them: --help stays quick
    from ..engine.adapter import SchedulerAdapter
    from ..engine.observation import Observation


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
    return factory.adapter_from_settings(settings or settings_from(args))


def store_for(settings: Settings) -> JobStore:
    return JobStore(settings.database_path)


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


def _settings_place(settings: Settings) -> Optional[Place]:
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


def targets_for(
    args: argparse.Namespace, job_ids: Sequence[str], keep_going: bool = False
) -> Targets:
    """The groups of jobs these ids name, one per place they lead to.

    ``keep_going``: an id that leads nowhere is noted in ``Targets.failed`` and the
    others are still grouped (``status`` of several ids answers each)."""
    settings = settings_from(args)
    store = store_for(settings)
    narrowing = narrowing_of(args, settings)
    found = records_of(store, job_ids, narrowing)
    from .sweeps import settle_orphans  # (it reaches places through this module)

    if settle_orphans(settings, [record for records in found.values() for record in records]):
        found = records_of(store, job_ids, narrowing)  # as they are now recorded
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
    saying so when the user chose a scheduler, transport or host and it is not that
    (with none chosen, the job's own place is all there is to ask: nothing to say)."""
    if place is None:
        return adapter_for(args, settings)
    here = _settings_place(settings) if _chosen(settings) else None
    if _chosen(settings) and _overridden(settings, here, place):
        now = f"; these settings point at {here.describe()}" if here is not None else ""
        print(
            f"hpcbridge: job {job_id} is asked where it was submitted: {place.describe()}{now}",
            file=sys.stderr,
        )
    return adapter_at(place, settings)


#: the settings that say where to ask, each against what of a place it names
WHERE_SETTINGS = (("scheduler", "scheduler"), ("transport", "transport"), ("ssh_host", "host"))


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


def ask(
    targets: Targets, group: Group, job_ids: Sequence[str]
) -> Tuple[Mapping[str, Observation], List[str], Optional[SchedulerAdapterError]]:
    """What the group's scheduler says of ``job_ids`` (one query), the ids with no record
    it answered UNKNOWN for, in order - not jobs hpcbridge can follow - and their error."""
    observed = group.adapter.observe(list(job_ids)) if job_ids else {}
    missing = [
        job_id
        for job_id in dict.fromkeys(group.unrecorded())
        if job_id in observed and observed[job_id].status.state is JobState.UNKNOWN
    ]
    return observed, missing, group_error(targets, group, missing, observed) if missing else None


def not_found_error(
    scheduler: str,
    job_ids: Sequence[str],
    observed: Mapping[str, Observation],
    hint: str = "",
    typed: Optional[Mapping[str, str]] = None,
) -> SchedulerAdapterError:
    """One line: which ids, what the scheduler said, what to try next.

    When the scheduler could not be asked at all, that is the error (exit 7),
    not "no such job" (exit 4): it may well know the job once it answers.
    ``hint``: where else the ids are recorded (``Targets.hint``); ``typed``: the
    id as given, where the scheduler writes it otherwise (``1857`` is Flux's ``ƒZ2``).
    """
    reasons = (observed[job_id].status.reason for job_id in job_ids)
    said = sorted({reason for reason in reasons if reason})
    because = f" ({'; '.join(said)})" if said else ""
    labels = [_label(job_id, (typed or {}).get(job_id)) for job_id in job_ids]
    which = "job " + labels[0] if len(labels) == 1 else "jobs " + ", ".join(labels)
    if all(observed[job_id].out_of_reach for job_id in job_ids):
        return SchedulerUnavailableError(
            f"cannot tell about {which}: the {scheduler} scheduler could not be asked{because}; "
            "check it with 'hpcbridge doctor' and try again"
        )
    return JobNotFoundError(
        f"no {which}: no record here, and the {scheduler} scheduler gave no trace of it{because}"
        f"{hint}; list the recorded jobs with 'hpcbridge jobs', or name the scheduler that ran "
        "it with --scheduler (Flux: --flux-uri)"
    )


def _label(job_id: str, typed: Optional[str]) -> str:
    return f"{job_id} ({typed} as given)" if typed and typed.strip() != job_id else job_id


def group_error(
    targets: Targets, group: Group, missing: Sequence[str], observed: Mapping[str, Observation]
) -> SchedulerAdapterError:
    """``not_found_error`` for ids of one group, with where else they are recorded."""
    scheduler = group.adapter.scheduler_name
    typed = {own: given for given, owner, own in targets.order if owner is group}
    return not_found_error(scheduler, missing, observed, targets.hint(group, missing), typed)


def untraced_errors(targets: Targets) -> Dict[Tuple[int, str], Exception]:
    """The error of each id with no record that its scheduler gave no trace of (or
    could not be asked about), by (group, id)."""
    errors: Dict[Tuple[int, str], Exception] = {}
    for group in targets.groups:
        unrecorded = list(dict.fromkeys(group.unrecorded()))
        if not unrecorded:
            continue
        try:
            _, missing, error = ask(targets, group, unrecorded)
        except SchedulerAdapterError as exc:
            errors.update({(id(group), job_id): exc for job_id in unrecorded})
            continue
        if error is not None:
            errors.update({(id(group), job_id): error for job_id in missing})
    return errors


def require_traced(targets: Targets) -> None:
    """Raise the error of the first id with no record that its scheduler does not know."""
    for error in untraced_errors(targets).values():
        raise error
