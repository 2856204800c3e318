"""What the drivers ask Slurm about jobs, and in which order: the queue first (squeue, or
the bindings' live records), then the history (sacct, slurmdbd), then UNKNOWN; and the key
a lost submission is found by.  The CLI driver's command lines for them (squeue, sacct), the
answers' parsers and the order, written once for both drivers (the bindings' driver hands its
own requests).  Pure, no I/O."""

from __future__ import annotations

import logging
from typing import Callable, Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from ...engine.driver import Again, CannotAsk, NotAskedNow, Reply
from ...model import JobState, JobStatus
from .commands import is_invalid_job_id, scheduler_message, transient
from .ids import KEY_PREFIX, array_ids, job_list, normalize_job_id
from .status import SACCT_FIELDS, SQUEUE_FIELDS, parse_sacct, parse_squeue

log = logging.getLogger("hpcbridge.slurm")

#: the reason given for an id neither the queue nor the history knows
NOT_FOUND = "not in squeue or sacct"

Statuses = Dict[str, JobStatus]


def unknown(job_id: str, reason: str) -> JobStatus:
    return JobStatus(job_id, JobState.UNKNOWN, reason=reason)


class NoHistory(Exception):
    """The history could not be read; ``off``: accounting is off on this cluster."""

    def __init__(self, message: str, off: bool) -> None:
        super().__init__(message)
        self.off = off

    def note(self, where: str, noted: bool) -> bool:
        """Say it in the log (accounting off: once, ``noted`` telling whether it was);
        whether it has been said now."""
        if not self.off:
            log.warning("%s", self)
        elif not noted:
            log.info(
                "Slurm accounting is disabled on %s (%s): finished jobs are known from "
                "squeue (MinJobAge) and then from the exit-code file",
                where,
                self,
            )
        return noted or self.off


class NoAnswer(Exception):
    """A question that failed where asking another way is the answer (the light round)."""


# -- the questions as the CLI driver asks them (the bindings ask their own way) ----------

#: past this many ``--jobs`` entries, one squeue of the user's jobs (``--me``) answers them
#: all; decided here alone (``by_user``), read by ``squeue_argv``, ``squeue_chunk`` and
#: ``statuses``
BY_USER_OVER = 50


def by_user(job_ids: Sequence[str]) -> bool:
    """Whether ``squeue_argv`` lists the user's jobs (``--me``) for these ids: a job of
    another user is then found by its id only (``squeue_argv(ids, by_id=True)``)."""
    return _by_user(job_list(job_ids))


def _by_user(entries: Sequence[str]) -> bool:
    """``by_user`` of a ``--jobs`` list already made (``job_list``'s)."""
    # slurmctld gets the same request; squeue no longer matches 500 ids per job (~3 ms in 22.05)
    return len(entries) > BY_USER_OVER


def squeue_chunk(job_ids: Sequence[str], chunk: int) -> int:
    """Ids per ``squeue_argv`` of ``job_ids``: all of them where one listing of the user's
    jobs answers them (``by_user``), else ``chunk``."""
    return len(job_ids) if by_user(job_ids) else chunk


def squeue_argv(job_ids: Sequence[str], by_id: bool = False) -> List[str]:
    """One squeue for many ids (one row per pending array task): by their ids, or
    (unless ``by_id``) every job of the user's where ``by_user``."""
    # Without --states=all a finished job (kept for MinJobAge) prints no row.
    fields = ",".join(f"{name}:0|" for name, _ in SQUEUE_FIELDS)
    entries = job_list(job_ids)  # once: a round's 500 ids are not listed twice
    selection = "--me" if not by_id and _by_user(entries) else f"--jobs={','.join(entries)}"
    return [
        "squeue",
        "--noheader",
        "--array",
        "--states=all",
        selection,
        f"--Format={fields}",
    ]


#: squeue --only-job-state (the light REQUEST_JOB_STATE RPC) came in Slurm 23.11.5
ONLY_JOB_STATE_SINCE = (23, 11, 5)


def squeue_state_argv(job_ids: Sequence[str]) -> List[str]:
    """squeue through the light RPC: only each job's id and state."""
    return [
        "squeue",
        "--only-job-state",
        "--noheader",
        "--array",
        "--states=all",
        f"--jobs={','.join(job_list(job_ids))}",
        "--format=%i|%T",
    ]


def parse_squeue_states(text: str) -> Dict[str, str]:
    """``squeue_state_argv`` output: job id -> Slurm's state word."""
    found: Dict[str, str] = {}
    for line in text.splitlines():
        job_id, bar, state = line.strip().partition("|")
        if bar and job_id:
            found[normalize_job_id(job_id)] = state.strip()
    return found


def key_argv() -> List[str]:
    """This user's jobs with their comments, to find a submission by its key."""
    return ["squeue", "--me", "--noheader", "--states=all", "--format=%F|%k"]


def sacct_key_argv(since: str) -> List[str]:
    """The same from history (Slurm keeps the comment with AccountingStoreFlags=job_comment)."""
    return ["sacct", "-X", "-P", "--noheader", f"--starttime={since}", "--format=JobID,Comment"]


def parse_key_rows(text: str, key: str) -> Optional[str]:
    """The job (the array's own id, for an array) whose comment carries ``key``."""
    wanted = KEY_PREFIX + key
    for line in text.splitlines():
        job_id, bar, comment = line.strip().partition("|")
        if bar and comment.strip() == wanted:
            return job_id.split("_", 1)[0]
    return None


def sacct_argv(job_ids: Sequence[str], fields: Optional[Sequence[str]] = None) -> List[str]:
    """One sacct for the ids squeue no longer knows (an id it never saw: no row, exit 0);
    ``fields``: other columns than the status round's (a charge's)."""
    # -P: fixed columns truncate (CANCELLED+); -X: the allocation's own row (what Slurm
    # charged), no .batch/.extern step rows.
    columns = fields if fields is not None else [name for name, _ in SACCT_FIELDS]
    return [
        "sacct",
        "-X",
        "-P",
        "--noheader",
        f"--jobs={','.join(job_list(job_ids))}",
        f"--format={','.join(columns)}",
    ]


# -- the answers --------------------------------------------------------------------


def accounting_disabled(message: str) -> bool:
    """sacct's answer on a cluster without slurmdbd (exit 1)."""
    lowered = message.lower()
    return "accounting storage is disabled" in lowered or "accounting_storage/none" in lowered


def _failed(reply: Reply, what: str) -> str:
    """Slurm's words for a failed command, one line, never raw."""
    return f"{what} failed: {scheduler_message(reply.message())}"


def squeue_reply(reply: Reply, wanted: Sequence[str]) -> Statuses:
    """squeue's statuses of ``wanted``; ``Again`` while the controller is busy, restarting
    or limiting us, else ``NotAskedNow`` for a failure; none for a purged id."""
    if reply.ok:
        return parse_squeue(reply.stdout, wanted=wanted)
    message = scheduler_message(reply.message())
    if is_invalid_job_id(message):
        return {}  # the one id asked is no longer in the queue
    # e.g. "Unable to contact slurm controller" while slurmctld restarts
    failure = NotAskedNow(f"squeue failed: {message}")
    raise Again(message, failure) if transient(message) else failure


def states_reply(reply: Reply, wanted: Sequence[str] = ()) -> Dict[str, str]:
    """The light round's answer (``squeue --only-job-state``): id -> state; ``NoAnswer``
    when it failed (the full round then asks)."""
    if reply.ok:
        return parse_squeue_states(reply.stdout)
    if transient(reply.message()):
        raise Again(reply.message(), NotAskedNow(_failed(reply, "squeue")))
    raise NoAnswer(_failed(reply, "squeue --only-job-state"))


def light_round(
    ids: List[str], last: Mapping[str, JobStatus], states: Optional[Mapping[str, str]]
) -> Tuple[Statuses, List[str]]:
    """What the light round's ``states`` (``None``: none was asked, or it failed) settles -
    the last full answers of the jobs whose state has not changed - and the ids to ask
    in full: those it saw change (one it did not see is no longer in the queue)."""
    if states is None:
        return {}, ids
    same = {
        job_id: last[job_id]
        for job_id, state in states.items()
        if job_id in last and last[job_id].native_state == state
    }
    return same, [job_id for job_id in ids if job_id in states and job_id not in same]


def sacct_reply(reply: Reply, wanted: Sequence[str]) -> Statuses:
    """sacct's statuses of ``wanted``; ``NoHistory`` when it failed."""
    if not reply.ok:
        message = scheduler_message(reply.message())
        raise NoHistory(
            f"sacct failed (exit {reply.returncode}): {message}", accounting_disabled(message)
        )
    return parse_sacct(reply.stdout, wanted=wanted)


def statuses(
    job_ids: Sequence[str],
    live: Callable[[List[str]], Statuses],
    history: Callable[[List[str], List[str]], Statuses],
    by_id: Optional[Callable[[List[str]], Statuses]] = None,
) -> Statuses:
    """Every id's status: from the queue (``live(ids)``), else from the history
    (``history(asked, wanted)``: asked by the ids, then - for tasks it had no record of -
    by their arrays' ids; ``NoHistory`` when it cannot be read), else - where the queue
    was asked for the user's jobs (``by_user``) - from the queue by id (``by_id``), else
    UNKNOWN."""
    ids = list(dict.fromkeys(job_ids))
    answers = live(ids) if ids else {}
    missing = [job_id for job_id in ids if job_id not in answers]
    try:
        if missing:
            answers.update(history(missing, missing))
            # Tasks cancelled before they started have one record, under the array's id.
            rest = [job_id for job_id in missing if job_id not in answers]
            if array_ids(rest):
                answers.update(history(array_ids(rest), rest))
    except NoHistory:
        pass  # nothing from the history this round (``history`` says why)
    others = [job_id for job_id in missing if job_id not in answers]
    if others and by_id is not None and by_user(ids):  # another user's: not in the user's list
        answers.update(by_id(others))
    return {job_id: answers.get(job_id) or unknown(job_id, NOT_FOUND) for job_id in ids}


def keys_reply(reply: Reply, keys: Collection[str]) -> Dict[str, str]:
    """key -> the job (an array's own id) whose comment carries it, of this user's jobs in
    squeue; ``CannotAsk`` when squeue cannot tell now (``Again`` first while the
    controller is busy)."""
    if not reply.ok:
        message = scheduler_message(reply.message())
        raise Again(message, CannotAsk(message)) if transient(message) else CannotAsk(message)
    return _carried(reply.stdout, keys)


def history_keys_reply(reply: Reply, keys: Collection[str]) -> Dict[str, str]:
    """The same from sacct (an ended job that left the queue); none when it failed."""
    return _carried(reply.stdout, keys) if reply.ok else {}


def _carried(text: str, keys: Collection[str]) -> Dict[str, str]:
    found = {key: parse_key_rows(text, key) for key in keys}
    return {key: job_id for key, job_id in found.items() if job_id is not None}
