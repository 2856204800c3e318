"""What an adapter knows of its jobs' states: answers merged (a state never goes back,
a final state is final), the exit-code file for a job the scheduler cannot see, a
requested cancel turning a SIGTERM "failure" into CANCELLED."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..errors import ConfigurationError, SchedulerUnavailableError, TransportError
from ..model import FROM_FILE, TERMINAL_STATES, JobState, JobStatus, advance
from ..store.jobs import JobRecord, JobStore, status_from_row
from ..transports.base import Executor
from .driver import NotAskedNow, SchedulerDriver
from .observation import Observation, Source, out_of_reach

log = logging.getLogger("hpcbridge")

#: the scheduler's answers for ids (through the poller: some may be left out)
Query = Callable[[List[str]], Dict[str, Observation]]
#: paths -> their modification time (epoch seconds), for those that exist
StatMany = Callable[[Sequence[str]], Dict[str, float]]

#: answers for which the whole record matters: the exit-code file, a cancel request
_RECORD_NEEDED = (JobState.UNKNOWN, JobState.FAILED, JobState.TIMEOUT)

#: the final states as the store writes them
_FINAL_WORDS = frozenset(state.value for state in TERMINAL_STATES)
#: the rank of each unfinished state as the store writes it
_UNFINISHED_RANKS = {state.value: state.rank for state in (JobState.PENDING, JobState.RUNNING)}


def ask(
    open_driver: Callable[[], SchedulerDriver], scheduler: str, job_ids: List[str]
) -> Dict[str, Observation]:
    """The driver's answer for every id (one left out: UNKNOWN); a scheduler that cannot
    be asked is out of reach for all, lastingly when it cannot be opened from here."""
    try:
        answers = open_driver().query(job_ids)
    except NotAskedNow as exc:
        return {job_id: out_of_reach(job_id, str(exc)) for job_id in job_ids}
    except (ConfigurationError, SchedulerUnavailableError) as exc:
        reason = f"cannot reach the {scheduler} scheduler: {exc}"
        return {job_id: out_of_reach(job_id, reason, lasting=True) for job_id in job_ids}
    return {
        job_id: Observation(
            answers.get(job_id)
            or JobStatus(job_id, JobState.UNKNOWN, reason="no answer from the scheduler")
        )
        for job_id in job_ids
    }


class JobTracker:
    """The last state seen of each job, kept in step with the store."""

    def __init__(
        self,
        store: JobStore,
        scheduler_name: str,
        host_label: str,
        read_text: Callable[[str], str],
        stat_many: StatMany,
    ) -> None:
        self.store = store
        self.scheduler_name = scheduler_name
        self.host_label = host_label
        self.read_text = read_text
        #: the exit-code files' mtimes (a job's end): one SFTP round for many over SSH
        self.stat_many = stat_many
        self.known: Dict[str, JobStatus] = {}
        #: the store's rows of jobs not in ``known`` yet, made statuses only when needed
        #: (a job seen again in its recorded state needs none: ``_seen_again``)
        self._recorded: Dict[str, Sequence[Any]] = {}
        #: each job's exit-code file ("" when it has none), read from its record once
        self.exit_paths: Dict[str, str] = {}

    def refresh(
        self, ids: List[str], query: Query, confirm: bool = False
    ) -> Dict[str, Observation]:
        """Every id's status: one ``query`` for all unfinished (an id it leaves out keeps
        what was known); with ``confirm``, an end known from the exit-code file only is
        asked of the scheduler too."""
        self._load(ids)
        to_ask = [job_id for job_id in ids if self._to_ask(job_id, confirm)]
        observed = self.observe(query(to_ask) if to_ask else {})
        return {job_id: observed.get(job_id) or self._known_or_unknown(job_id) for job_id in ids}

    def all_ended(self, ids: List[str]) -> Optional[Dict[str, Observation]]:
        """Every id's final status when the store knows each one ended (an end from the
        exit-code file alone, which a status confirms, not counted): nothing to ask of
        the scheduler; else ``None``."""
        self._load(ids)
        if not all(self._is_final(job_id) and not self._from_file_only(job_id) for job_id in ids):
            return None
        known = {job_id: self._known(job_id) for job_id in ids}
        return {i: Observation(status, Source.KNOWN) for i, status in known.items() if status}

    def observe(self, answers: Dict[str, Observation]) -> Dict[str, Observation]:
        """Merge answers into what is known (states never go backwards), record the changes."""
        needed = [i for i, seen in answers.items() if seen.status.state in _RECORD_NEEDED]
        records = self._records(needed)
        changed = []
        merged_all: Dict[str, Observation] = {}
        dated = _Dating()
        for job_id, seen in answers.items():
            observed = dated(seen)
            row = self._recorded.pop(job_id, None)
            if row is not None:
                moved = None if seen.out_of_reach else _moved_on(row, observed)
                if moved is not None:  # the merge is ``observed``: the row needs no status
                    if moved:
                        changed.append(observed)
                    self.known[job_id] = observed
                    # a status the poller dated is ``seen``'s own: no new observation
                    same = observed is seen.status
                    merged_all[job_id] = seen if same else seen.with_status(observed)
                    continue
                self.known[job_id] = status_from_row(row)
            merged = self._merge(job_id, seen, observed, records.get(job_id))
            previous = self.known.get(job_id)
            if merged.state is not JobState.UNKNOWN:
                if previous is None or _lasting(previous) != _lasting(merged):
                    changed.append(merged)
                self.known[job_id] = merged  # the same state, seen again: its ``as_of`` is new
            merged_all[job_id] = seen.with_status(merged)
        if changed:
            self.store.update_statuses(self.scheduler_name, self.host_label, changed)
        return merged_all

    def knows(self, job_id: str) -> bool:
        """Whether a state of the job is known: recorded here, or answered."""
        return job_id in self.known or job_id in self._recorded

    def ended_by_files(self, ids: List[str]) -> Dict[str, Observation]:
        """The jobs among ``ids`` whose wrapper wrote its exit-code file, from it alone
        (a signal's code, 128 or more, and a cancelled job are left to the scheduler)."""
        self._load(ids)
        pending = [job_id for job_id in ids if not self._is_final(job_id)]
        paths = self._exit_paths(pending)
        if not paths:
            return {}
        found = self.stat_many(list(paths.values()))
        appeared = [job_id for job_id, path in paths.items() if path in found]
        records = self._records(appeared)
        answers: Dict[str, Observation] = {}
        for job_id in appeared:
            record = records.get(job_id)
            mtime = found.get(paths[job_id])
            if record is None or mtime is None or record.cancel_requested:
                continue
            exit_record = self._exit_file(record.exit_file or "")
            code = exit_record.code
            if code is None or code >= 128:
                continue
            status = _as_file_says(JobStatus(job_id, JobState.UNKNOWN), exit_record, mtime)
            answers[job_id] = Observation(status, Source.EXIT_FILE)
        return self.observe(answers)

    def _load(self, ids: List[str]) -> None:
        """What the store knows of ids this tracker has not seen yet."""
        unseen = [i for i in ids if i not in self.known and i not in self._recorded]
        if unseen:
            self._recorded.update(
                self.store.status_rows(self.scheduler_name, self.host_label, unseen)
            )

    def _known(self, job_id: str) -> Optional[JobStatus]:
        """The state known of a job (its recorded row made a status now, if need be)."""
        known = self.known.get(job_id)
        if known is None:
            row = self._recorded.pop(job_id, None)
            if row is not None:
                known = self.known[job_id] = status_from_row(row)
        return known

    def _known_or_unknown(self, job_id: str) -> Observation:
        """What was known, else UNKNOWN "not answered yet"."""
        known = self._known(job_id)
        status = known or JobStatus(job_id, JobState.UNKNOWN, reason="not answered yet")
        return Observation(status, Source.KNOWN)

    def _exit_paths(self, ids: List[str]) -> Dict[str, str]:
        """Each job's exit-code file (read from the store once per job, then known)."""
        unknown = [job_id for job_id in ids if job_id not in self.exit_paths]
        records = self._records(unknown)
        for job_id in unknown:
            record = records.get(job_id)
            self.exit_paths[job_id] = (record.exit_file or "") if record is not None else ""
        return {job_id: self.exit_paths[job_id] for job_id in ids if self.exit_paths.get(job_id)}

    def _exit_file(self, path: str) -> ExitRecord:
        try:
            return read_exit_file(self.read_text(path))
        except Exception as exc:  # noqa: BLE001 - unreadable: the scheduler will tell
            log.debug("cannot read the exit-code file %s: %s", path, exc)
            return ExitRecord(None)

    def _records(self, job_ids: List[str]) -> Dict[str, JobRecord]:
        if not job_ids:
            return {}
        return self.store.get_many(self.scheduler_name, self.host_label, job_ids)

    def _to_ask(self, job_id: str, confirm: bool) -> bool:
        """Unfinished, or (``confirm``) ended as its exit-code file alone says."""
        known = self.known.get(job_id)
        if known is not None:
            final, from_file = known.is_terminal, known.native_state == FROM_FILE
        else:
            row = self._recorded.get(job_id)
            if row is None:
                return True
            final, from_file = row[1] in _FINAL_WORDS, row[5] == FROM_FILE
        return not final or (confirm and from_file)

    def _from_file_only(self, job_id: str) -> bool:
        known = self.known.get(job_id)
        if known is None:
            row = self._recorded.get(job_id)
            return row is not None and row[5] == FROM_FILE
        return known.native_state == FROM_FILE

    def _is_final(self, job_id: str) -> bool:
        known = self.known.get(job_id)
        if known is None:
            row = self._recorded.get(job_id)
            return row is not None and row[1] in _FINAL_WORDS
        return known.is_terminal

    def _merge(
        self, job_id: str, seen: Observation, observed: JobStatus, record: Optional[JobRecord]
    ) -> JobStatus:
        """``observed`` (``seen``'s status, dated) merged into what is known."""
        if seen.out_of_reach:
            return observed  # its word will come: no file stands in for a time limit
        if observed.state is JobState.UNKNOWN:
            return self._from_exit_file(observed, record) or observed
        return self._merge_status(job_id, observed, record)

    def _merge_status(
        self, job_id: str, observed: JobStatus, record: Optional[JobRecord]
    ) -> JobStatus:
        cancelled = record is not None and record.cancel_requested
        if cancelled and observed.state in (JobState.FAILED, JobState.TIMEOUT):
            # killed by the SIGTERM of a requested cancel: CANCELLED (native_state kept)
            observed = observed.with_(
                state=JobState.CANCELLED, reason=observed.reason or "cancel requested"
            )
        known = self._known(job_id)
        if known is not None and known.native_state == FROM_FILE and observed.is_terminal:
            # The scheduler's own end stands over the file's (times, reason, its words).
            return observed.with_(start_time=observed.start_time or known.start_time)
        return advance(known, observed)

    def _from_exit_file(
        self, status: JobStatus, record: Optional[JobRecord]
    ) -> Optional[JobStatus]:
        """The end the wrapper recorded, for a job the scheduler cannot see, if readable."""
        if record is None or not record.exit_file:
            return None
        exit_record = self._exit_file(record.exit_file)
        if exit_record.code is None:
            return None
        mtime = self.stat_many([record.exit_file]).get(record.exit_file)
        found = _as_file_says(status, exit_record, mtime)
        return self._merge_status(status.job_id, found, record)


class _Dating:
    """The answers with the time their states were seen: their round's, else now (a file
    read, a direct question) - one datetime per round, not one per job."""

    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc)
        self.rounds: Dict[float, datetime] = {}

    def __call__(self, seen: Observation) -> JobStatus:
        """``seen``'s status, with the time it was seen."""
        if seen.status.as_of is not None:
            return seen.status
        at = seen.answered_at
        if at is None:
            when = self.now
        else:
            when = self.rounds.get(at) or self.rounds.setdefault(
                at, datetime.fromtimestamp(at, tz=timezone.utc)
            )
        return seen.status.with_(as_of=when)


def _as_file_says(status: JobStatus, exit_record: ExitRecord, mtime: Optional[float]) -> JobStatus:
    """``status`` ended as the exit-code file says (a code in it), what it knew kept."""
    code = exit_record.code
    started, ended = exit_record.times(mtime)
    return status.with_(
        state=JobState.COMPLETED if code == 0 else JobState.FAILED,
        exit_code=code,
        start_time=status.start_time or started,
        end_time=status.end_time or ended,
        native_state=status.native_state or FROM_FILE,
        reason=f"from the exit-code file ({status.reason})"
        if status.reason
        else "from the exit-code file",
    )


def _moved_on(row: Sequence[Any], observed: JobStatus) -> Optional[bool]:
    """Merged into the unfinished state a store row (``status_from_row``'s) records,
    whether ``observed`` stands as it is and changes the record (``True``: a later state;
    ``False``: the same, no time nor code in either); ``None``: the merge needs the
    recorded status (``advance``, a cancel's or an exit-code file's end)."""
    recorded = _UNFINISHED_RANKS.get(row[1])
    if recorded is None or row[5] == FROM_FILE or observed.state in _RECORD_NEEDED:
        return None
    if row[1] == observed.state:  # a JobState is its word
        unchanged = (
            observed.start_time is None
            and observed.end_time is None
            and observed.exit_code == row[2]
            and not row[3]
            and not row[4]
        )
        return False if unchanged else None
    if observed.state.rank < recorded or (observed.start_time is None and row[3]):
        return None  # the state stays, or the recorded start does
    return True


def _lasting(status: JobStatus) -> Tuple[Any, ...]:
    """What the store keeps up to date (a new reason alone is not written)."""
    return (status.state, status.exit_code, status.start_time, status.end_time)


def read_output(executor: Executor, path: str) -> str:
    """A job's output so far: "" while it has not been written."""
    try:
        return executor.read_text(path)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        if getattr(exc, "errno", None) == 2:
            return ""
        raise TransportError(f"cannot read {path}: {exc}") from exc


def exit_code_from_file(text: str) -> Optional[int]:
    """The exit code in the wrapper's exit-code file."""
    return read_exit_file(text).code


class ExitRecord(NamedTuple):
    """What the wrapper's exit-code file holds; ``code`` None when unreadable."""

    code: Optional[int]
    started: Optional[datetime] = None
    ended: Optional[datetime] = None
    #: seconds the wrapper ran (its start: the end less these)
    ran: Optional[float] = None

    def times(self, mtime: Optional[float]) -> Tuple[Optional[datetime], Optional[datetime]]:
        """(start, end): the end written, else the file's mtime (never before the start:
        an mtime lags the clock by up to a tick)."""
        ended = self.ended
        if ended is None and mtime is not None:
            ended = datetime.fromtimestamp(mtime, tz=timezone.utc)
        started = self.started
        if started is None and self.ran is not None and ended is not None:
            started = ended - timedelta(seconds=self.ran)
        if started is not None and ended is not None and ended < started:
            ended = started
        return started, ended


def read_exit_file(text: str) -> ExitRecord:
    """``"<code> +<seconds it ran>"`` or ``"<code> <start epoch>"`` (``-``: not known);
    older wrappers: the code alone, or ``"<code> <start> <end>"``."""
    words = text.split()
    try:
        code = int(words[0])
    except (IndexError, ValueError):
        return ExitRecord(None)
    if len(words) > 1 and words[1].startswith("+"):
        try:
            ran = float(words[1][1:])
        except ValueError:
            return ExitRecord(code)
        # inf, nan, centuries: no time the wrapper writes (timedelta would raise)
        return ExitRecord(code, ran=ran if -1e10 < ran < 1e10 else None)
    return ExitRecord(code, _epoch(words, 1), _epoch(words, 2))


def _epoch(words: List[str], index: int) -> Optional[datetime]:
    try:
        return datetime.fromtimestamp(float(words[index]), tz=timezone.utc)
    except (IndexError, ValueError, OverflowError):
        return None
