"""The send step both Flux drivers share: again while the instance starts, then the outcome.

A driver hands ``send`` one attempt - submit every job of a plan, pipelined,
and report ``(True, id)`` or ``(False, Flux's words)`` per job - and gets the
submitted jobs back, or the error the caller should see.  A freshly started
(nested) instance answers before its job-ingest module is loaded; a
submission it refuses that way was not accepted, so it is sent again, within
the ready budget - as is one that could not connect to the instance at all
(nothing was sent).  Anything else is final.

A Flux submission whose answer was lost: its jobs found by their keys, or sent once more.

Every Flux job hpcbridge submits carries its key in its jobspec
(``jobspec.KEY_ATTRIBUTE``).  When a submission command's answer is lost - the
SSH connection dropped while ``flux batch``, ``flux submit`` or the bulk helper
ran, or the command ran past its timeout - ``KeyFinder`` lists this user's jobs
submitted since shortly before the attempt began (``flux jobs``) and reads the
key of each (``flux job info ID jobspec``, once per job: a jobspec never
changes).  ``adoption.adopt_or_resubmit`` then decides: found - adopted; the
instance keeps answering for ``SETTLE`` seconds that no job has it - sent once
more; neither within ``ADOPTION_BUDGET`` - ``SubmissionUncertainError`` naming
the key.  ``adopt_all`` does the same for the many jobs of one bulk submission,
sending again only those that surely did not go in.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Collection, Dict, List, Optional, Sequence, Tuple

from ...errors import (
    JobSubmissionError,
    JobTimeoutError,
    SchedulerUnavailableError,
    SubmissionUncertainError,
    TransportError,
)
from ...retrying import retry
from ..adoption import CannotAsk, adopt_or_resubmit, look_up
from ..driver import PartialSubmissionError, Planned, Submitted
from . import command_line as cl
from .command_line import limit_refused, scheduler_message, submission_error
from .commands import FluxCommands
from .instance import FluxPolicy
from .jobspec import KEY_ATTRIBUTE
from .plan import FluxPlan, flux_plan, kind_of
from .status import canonical_job_id

#: one job's outcome: (True, its id) or (False, why not)
Outcome = Tuple[bool, str]

log = logging.getLogger("hpcbridge")

# What a starting instance says before its job-ingest service exists.
NOT_READY = ("No service matching job-ingest.submit", "Function not implemented")
# What every release's commands and bindings say when the broker's socket is
# missing or nobody listens on it: the connection never opened, nothing was sent.
NEVER_REACHED = ("Unable to connect to Flux",)


def not_ready(outcomes: Sequence[Outcome]) -> bool:
    """Nothing went in, and only because the instance is still starting or could
    not be reached."""
    markers = NOT_READY + NEVER_REACHED
    return bool(outcomes) and all(
        not ok and any(marker in value for marker in markers) for ok, value in outcomes
    )


def send(
    attempt: Callable[[], List[Outcome]],
    *,
    output: str,
    kind: str,
    what: str,
    ready_timeout: float,
) -> List[Submitted]:
    """``attempt()`` until the instance is ready; the jobs that went in, in order.

    Some in: ``PartialSubmissionError`` (they are recorded, never sent twice);
    none: the first refusal as a ``JobSubmissionError`` in Flux's own words.
    """
    noted: List[bool] = []

    def noting() -> List[Outcome]:
        outcomes = attempt()
        if not noted and not_ready(outcomes) and any(m in outcomes[0][1] for m in NEVER_REACHED):
            noted.append(True)
            log.info(
                "%s did not reach the Flux instance (%s); sending it again",
                what,
                scheduler_message(outcomes[0][1]),
            )
        return outcomes

    outcomes = retry(noting, budget=ready_timeout, again=not_ready, pause=0.25, what=what)
    submitted: List[Submitted] = []
    failures: List[str] = []
    for index, (ok, value) in enumerate(outcomes):
        if ok:
            job_id = canonical_job_id(value)
            submitted.append(Submitted(job_id, log_path(output, job_id), index, kind))
        else:
            failures.append(value)
    if failures and submitted:
        limited = any(limit_refused(failure) for failure in failures)
        raise PartialSubmissionError(submitted, failures, len(outcomes), limited)
    if failures:
        raise submission_error(failures[0], what=what)
    if not submitted:
        raise JobSubmissionError(f"{what} submitted nothing and said nothing")
    return submitted


def log_path(output: str, job_id: str) -> str:
    """Where a submitted job's output lands: Flux's ``{{id}}`` replaced by its id."""
    return output.replace("{{id}}", job_id)


# -- a submission whose answer was lost: adopted by its keys -------------------


#: one job's outcome: (True, its id) or (False, why not)

#: seconds an uncertain submission may take to be found, or found surely absent
ADOPTION_BUDGET = 180.0
#: seconds the instance must keep answering that no job has the key before it is sent
#: again: a request a paused broker holds is taken in once it runs again, and job-list
#: learns of a job a moment after the job-manager accepted it
SETTLE = 10.0
#: seconds before the attempt began from which jobs are listed (the broker stamps
#: t_submit on its own clock; this host's and the login node's are compared)
SINCE_MARGIN = 30.0
#: seconds back from now a lookup for a sender that died lists jobs from, by default
LOOK_BACK = 3600.0
#: seconds one question may take (a paused broker answers nothing: the command waits)
LOOK_TIMEOUT = 15.0


class KeyFinder:
    """The jobs carrying some keys on one instance, asked by command."""

    def __init__(self, commands: FluxCommands, policy: FluxPolicy, started: float) -> None:
        """``started``: when the lost attempt began, in epoch seconds of this host."""
        self.commands = commands
        self.policy = policy
        self.since = self._since(started)
        #: job id -> the key its jobspec carries (``None``: none)
        self._keys: Dict[str, Optional[str]] = {}

    def _since(self, started: float) -> float:
        """The attempt's start on the clock where the commands run, less the margin."""
        elapsed = time.time() - started
        now = time.time()
        try:
            result = self.commands.run(cl.clock_argv(), timeout=LOOK_TIMEOUT)
            if result.ok:
                now = cl.parse_clock(result.stdout)
        except (ValueError, JobTimeoutError, TransportError, SchedulerUnavailableError) as exc:
            log.debug("flux: cannot read the clock where the commands run (%s)", exc)
        return now - elapsed - SINCE_MARGIN

    def find(self, keys: Collection[str]) -> Dict[str, str]:
        """key -> the id of the job carrying it, for each of ``keys`` some job carries;
        ``CannotAsk`` when the instance cannot tell now."""
        argv = cl.recent_jobs_argv(self.commands.flux, self.policy, self.since)
        listing = self.commands.run(argv, timeout=LOOK_TIMEOUT)
        if not listing.ok:
            raise CannotAsk(f"flux jobs: {cl.scheduler_message(listing.message()) or 'failed'}")
        for job_id in cl.parse_recent_jobs(listing.stdout, self.since):
            if job_id not in self._keys:
                self._keys[job_id] = self._key_of(job_id)
        found: Dict[str, str] = {}
        for job_id, key in self._keys.items():
            if key is not None and key in keys:
                found.setdefault(key, job_id)
        return found

    def _key_of(self, job_id: str) -> Optional[str]:
        argv = cl.jobspec_argv(self.commands.flux, job_id)
        result = self.commands.run(argv, timeout=LOOK_TIMEOUT)
        if not result.ok:
            raise CannotAsk(f"flux job info {job_id} jobspec: {result.message() or 'failed'}")
        try:
            return cl.key_of_jobspec(result.stdout)
        except ValueError as exc:
            raise CannotAsk(f"flux job info {job_id} jobspec: {exc}") from None


def adopt_one(finder: KeyFinder, key: str, resubmit: Callable[[], str], where: str) -> str:
    """The id of the one job an uncertain submission of ``key`` made (found, or sent again)."""
    return adopt_or_resubmit(
        lambda: finder.find({key}).get(key),
        resubmit,
        key=key,
        budget=ADOPTION_BUDGET,
        settle=SETTLE,
        where=where,
        look_for=f"a job whose jobspec has {KEY_ATTRIBUTE}={key}",
    )


def adopt_all(
    finder: KeyFinder,
    keys: Sequence[str],
    resend: Callable[[List[int]], List[Outcome]],
    where: str,
) -> List[Outcome]:
    """The outcome of each job of an uncertain bulk submission, in order: found (adopted),
    or sent again by ``resend(indices)`` once the rest stayed absent for ``SETTLE`` s.

    Jobs still arriving restart the settling; past the budget the jobs found are
    kept and the rest fail with the key to look for."""
    found: Dict[str, str] = {}
    sent: Dict[int, Outcome] = {}
    label = keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"

    def look() -> Optional[str]:
        before = len(found)
        found.update(finder.find(set(keys) - set(found)))
        if len(found) == len(keys):
            return f"{found[keys[0]]} and {len(keys) - 1} more" if len(keys) > 1 else found[keys[0]]
        if len(found) > before:
            raise CannotAsk(f"{len(found)} of its {len(keys)} jobs found so far")
        return None

    def resubmit() -> str:
        missing = [index for index, key in enumerate(keys) if key not in found]
        if found:
            log.warning(
                "submission %s: adopted jobs %s; the other %d never went in",
                label,
                ", ".join(found[key] for key in keys if key in found),
                len(missing),
            )
        sent.update(zip(missing, resend(missing)))
        return label

    try:
        adopt_or_resubmit(
            look,
            resubmit,
            key=label,
            budget=ADOPTION_BUDGET,
            settle=SETTLE,
            where=where,
            look_for=f"jobs whose jobspec has {KEY_ATTRIBUTE}={label}",
        )
    except SubmissionUncertainError as exc:
        if not found:
            raise
        sent.update({i: (False, str(exc)) for i, key in enumerate(keys) if key not in found})
    return [sent[index] if index in sent else (True, found[key]) for index, key in enumerate(keys)]


def look_up_all(finder: KeyFinder, keys: Sequence[str], where: str) -> Dict[str, str]:
    """key -> job id for the keys some job carries, once the rest stayed absent for
    ``SETTLE`` s; empty: surely none went in.  For a submission whose sender died
    (a sweep's feeder): nothing is sent again here."""
    found: Dict[str, str] = {}
    label = keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"

    def look() -> Optional[str]:
        before = len(found)
        found.update(finder.find(set(keys) - set(found)))
        if len(found) == len(keys):
            return found[keys[0]]
        if len(found) > before:
            raise CannotAsk(f"{len(found)} of its {len(keys)} jobs found so far")
        return None

    look_up(
        look,
        key=label,
        budget=ADOPTION_BUDGET,
        settle=SETTLE,
        where=where,
        look_for=f"jobs whose jobspec has {KEY_ATTRIBUTE}={label}",
    )
    return found


def submitted_of(
    keys: Sequence[str], found: Dict[str, str], output: str, kind: str
) -> Optional[List[Submitted]]:
    """The jobs found by their keys as ``submit_many`` would have returned them."""
    jobs = [
        Submitted(
            canonical_job_id(found[key]),
            log_path(output, canonical_job_id(found[key])),
            index,
            kind,
        )
        for index, key in enumerate(keys)
        if key in found
    ]
    return jobs or None


def find_by_keys(
    commands: FluxCommands,
    policy: FluxPolicy,
    planned: Planned,
    since: Optional[float],
    where: str,
) -> Optional[List[Submitted]]:
    """Either driver's ``find_submitted``: by the keys in the jobs' jobspecs, among this
    user's jobs submitted since ``since`` (epoch seconds; default: ``LOOK_BACK`` ago)."""
    plan = flux_plan(planned)
    began = since if since is not None else time.time() - LOOK_BACK
    found = look_up_all(KeyFinder(commands, policy, began), plan.keys, where)
    return submitted_of(plan.keys, found, plan.request.output, kind_of(planned.batch).value)


def adopt_lost(
    plan: FluxPlan,
    keys: List[str],
    finder: KeyFinder,
    submit: Callable[[FluxPlan], List[Tuple[bool, str]]],
    where: str,
) -> List[Tuple[bool, str]]:
    """The native driver's jobs of ``keys`` whose answers were lost: found by their keys
    (asked by command), or sent once more through ``submit``."""
    log.warning("flux.job.submit: the answers of %d job(s) were lost; looking", len(keys))
    by_key = dict(zip(plan.keys, range(len(plan.keys))))

    def resend(indices: List[int]) -> List[Tuple[bool, str]]:
        return submit(plan.only([by_key[keys[index]] for index in indices]))

    return adopt_all(finder, keys, resend, where)
