"""What ``flux`` commands answer, read: a submission's id or Flux's refusal in its own words,
the jobs carrying a key, charges, banks, an instance's R and URI; pure, tested against output
recorded from real releases.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from typing import (
    Any,
    Callable,
    Collection,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
)

from ...engine.driver import CannotAsk, Reply
from ...errors import (
    JobSubmissionError,
    LimitRefusedError,
    ResourceError,
    SchedulerAdapterError,
    SchedulerUnavailableError,
)
from ...model import JobState, JobStatus
from .ids import InvalidJobIdError, canonical_job_id, decimal_job_id
from .instance import strip_ansi
from .jobspec import KEY_ATTRIBUTE, LOST
from .status import (
    only_unknown_ids,
    parse_eventlog,
    parse_jobs_format,
    parse_jobs_json,
    parse_unknown_ids,
    status_from_facts,
    statuses_from_facts,
    unknown,
)

log = logging.getLogger("hpcbridge")

# The refusals Flux phrases (job-ingest, queue plugin, policy limits), 0.49 .. 0.88.
_KNOWN_REFUSALS = (
    re.compile(r"no queue specified"),
    re.compile(r"Invalid queue '[^']*' specified"),
    re.compile(r"'[^']*' is not a valid queue"),
    re.compile(r"job submission to \S+ is disabled.*"),
    re.compile(r"[Jj]ob submission is disabled.*"),
    re.compile(r"requested duration .* exceeds policy limit .*"),
    re.compile(r"requested .* exceeds policy limit .*"),
)


_PREFIXES = re.compile(r"^(?:flux-[\w-]+: )?(?:ERROR: )?(?:\[Errno \d+\] )?")


def scheduler_message(text: str) -> str:
    """Flux's own words from a failed submission's output, without program prefixes."""
    lines = [line.strip() for line in strip_ansi(text).splitlines() if line.strip()]
    for line in lines:
        for pattern in _KNOWN_REFUSALS:
            match = pattern.search(line)
            if match:
                return match.group(0).strip()
    for line in reversed(lines):
        cleaned = _PREFIXES.sub("", line).strip()
        if cleaned and not cleaned.startswith("usage:"):
            return cleaned
    return ""


def parse_submit_output(stdout: str) -> str:
    """The job id ``flux batch``/``flux submit`` printed: the last line that is one."""
    for line in reversed(stdout.strip().splitlines()):
        token = line.strip()
        if not token:
            continue
        try:
            return canonical_job_id(token)
        except InvalidJobIdError:
            continue
    raise ValueError(f"no job id in the output {stdout.strip()[:200]!r}")


R = TypeVar("R", bound=Reply)
T = TypeVar("T")

#: one job's outcome: (True, its id in Flux's canonical F58 form) or (False, why not)
Outcome = Tuple[bool, str]


def parse_bulk_output(stdout: str) -> List[Outcome]:
    """The bulk helper's ``OK <id>`` / ``ERR <message>`` lines, in order."""
    results: List[Outcome] = []
    for line in stdout.splitlines():
        kind, _, rest = line.strip().partition(" ")
        if kind == "OK":
            results.append((True, canonical_job_id(rest.strip())))
        elif kind == "ERR":
            results.append((False, rest.strip()))
    return results


def parse_recent_jobs(stdout: str, since: float) -> List[str]:
    """The ids (canonical) of the listed jobs submitted at ``since`` or later, newest first."""
    found: List[Tuple[float, str]] = []
    for line in stdout.splitlines():
        words = line.split()
        if len(words) != 2:
            continue
        try:
            job_id, submitted = canonical_job_id(words[0]), float(words[1])
        except (InvalidJobIdError, ValueError):
            continue
        if submitted >= since:
            found.append((submitted, job_id))
    return [job_id for _, job_id in sorted(found, reverse=True)]


def key_of_jobspec(text: str) -> Optional[str]:
    """The key a jobspec carries (``KEY_ATTRIBUTE``); ``ValueError`` for no jobspec."""
    try:
        value: Any = json.loads(text)["attributes"]
        for part in KEY_ATTRIBUTE.split("."):
            value = value.get(part) if isinstance(value, dict) else None
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a jobspec: {text.strip()[:120]!r}") from exc
    return value if isinstance(value, str) else None


def parse_clock(stdout: str) -> float:
    return float(stdout.strip())


# What Flux says when cancelling a job that already ended or never existed.
CANCEL_NOT_NEEDED = ("inactive", "unknown", "No such", "not found", "already")


def raise_cancel_errors(errors: Sequence[str]) -> None:
    real = [error for error in errors if not any(m in error for m in CANCEL_NOT_NEEDED)]
    if real:
        raise SchedulerAdapterError(
            f"flux cancel failed: {'; '.join(real)} (check the ids with hpcbridge status)"
        )


def output_path_from_jobspec(text: str, job_id: str) -> Optional[str]:
    """Where a job writes its output, from its jobspec (default ``flux-{{id}}.out`` in cwd)."""
    try:
        spec = json.loads(text)
        system: Dict[str, Any] = spec["attributes"]["system"]
    except (ValueError, KeyError, TypeError):
        return None
    try:
        path = str(system["shell"]["options"]["output"]["stdout"]["path"])
    except (KeyError, TypeError):
        path = "flux-{{id}}.out"
    if not posixpath.isabs(path):
        # `flux batch` records its default relative to the job's cwd.
        cwd = system.get("cwd")
        if not cwd:
            return None
        path = posixpath.join(str(cwd), path)
    return fill_id(path, job_id)


def fill_id(path: str, job_id: str) -> str:
    canonical = canonical_job_id(job_id)
    for template in ("{{id}}", "{{id.f58}}", "{{jobid}}"):
        path = path.replace(template, canonical)
    return path.replace("{{id.dec}}", decimal_job_id(job_id))


# What a starting instance says before its job-ingest service exists.
NOT_READY = ("No service matching job-ingest.submit", "Function not implemented")


# Every release's words for a broker socket missing or unheard: nothing was sent.
NEVER_REACHED = ("Unable to connect to Flux",)


#: Flux's words for a job refused by a cap on this user's active jobs: flux-core caps
#: none; flux-accounting's priority plugin rejects past the bank's max_active_jobs
LIMIT_REFUSED = ("user has max active jobs",)


def limit_refused(text: str) -> bool:
    return any(marker in text for marker in LIMIT_REFUSED)


def submission_error(
    text: str, argv: Optional[Sequence[str]] = None, what: str = "flux batch"
) -> JobSubmissionError:
    """Flux's refusal (``LimitRefusedError`` for a cap on active jobs)."""
    message = scheduler_message(text) or "no message"
    cls = LimitRefusedError if limit_refused(message) else JobSubmissionError
    return cls(f"{what} refused the job: {message}", argv=argv, scheduler_message=message)


def lost_answer(text: str) -> bool:
    """Whether a job's failure says its answer was lost (it may have gone in), not a refusal."""
    return text.startswith(LOST)


def unknown_after_loss(key: str) -> Outcome:
    """The outcome of a job whose answer was lost, neither found nor sent again (the
    instance could not tell in time whether it went in: never sent twice)."""
    return False, (
        "its answer was lost and the Flux instance could not tell in time whether it went "
        f"in; look for a job whose jobspec has {KEY_ATTRIBUTE}={key} before sending it again"
    )


def submit_outcome(argv: Sequence[str], result: Reply) -> Outcome:
    """``flux batch``/``flux submit``'s answer: its job id, or Flux's refusal."""
    if not result.ok:
        return False, result.stderr + "\n" + result.stdout
    try:
        return True, parse_submit_output(result.stdout)
    except ValueError as exc:
        raise JobSubmissionError(str(exc), argv=list(argv)) from None


def bulk_outcomes(result: Reply, count: int) -> List[Outcome]:
    """The bulk helper's answer, one outcome per job: those it did not reach failed (some
    went in before it stopped: never sent twice)."""
    outcomes = parse_bulk_output(result.stdout) if result.stdout else []
    if len(outcomes) < count:
        message = result.message() or "the bulk helper stopped early"
        outcomes += [(False, message)] * (count - len(outcomes))
    return outcomes


#: what to do when the ``flux`` command is missing where commands run
SET_FLUX_COMMAND = "set HPCBRIDGE_FLUX_COMMAND to the flux command's path"


def command_found(result: R, command: str, where: str, advice: str = SET_FLUX_COMMAND) -> R:
    """``result``; ``SchedulerUnavailableError`` (saying ``advice``) where ``command`` does
    not exist (127)."""
    if result.returncode == 127 and not result.stdout:
        raise SchedulerUnavailableError(
            f"{command} not found where commands run ({where}): {result.message()} - {advice}"
        )
    return result


def listing_answers(
    job_ids: List[str], result: Reply, jobs_json: bool, label: str
) -> Optional[Dict[str, JobStatus]]:
    """Each id's status from ``flux jobs``' answer (``commands.jobs_argv``); ``None`` where
    this ``flux jobs`` cannot read the broker (its eventlogs can)."""
    if result.ok or only_unknown_ids(result.stderr):
        return listed(job_ids, result.stdout, result.stderr, jobs_json)
    message = result.message()
    if "invalid payload" in message or "Protocol error" in message:
        # `flux jobs` of another release than the broker: the C eventlog reader works.
        return None
    if "Unable to connect" in message or "was not found" in message:
        # The broker's socket is gone: a nested instance whose job ended.
        return unknown(job_ids, f"the Flux instance {label} is gone or unreachable ({message})")
    return unknown(job_ids, f"flux jobs failed: {message}")


def listed(job_ids: List[str], stdout: str, stderr: str, jobs_json: bool) -> Dict[str, JobStatus]:
    parse = parse_jobs_json if jobs_json else parse_jobs_format
    try:
        facts = parse(stdout)
    except (ValueError, KeyError) as exc:
        return unknown(job_ids, f"cannot parse flux jobs output: {exc}")
    found = statuses_from_facts(job_ids, facts, "not known to the Flux instance (flux jobs)")
    for job_id in parse_unknown_ids(stderr):
        if job_id in found and found[job_id].state is JobState.UNKNOWN:
            found[job_id] = found[job_id].with_(reason="flux jobs: JobID unknown")
    return found


def eventlog_answer(job_id: str, result: Reply) -> JobStatus:
    """A job's status from ``flux job info ID eventlog`` (``commands.eventlog_argv``)."""
    if not result.ok:
        return JobStatus(job_id, JobState.UNKNOWN, reason=result.message())
    return status_from_facts(parse_eventlog(job_id, result.stdout))


def dry_run_jobspec(result: Reply, command: Sequence[str], options: Sequence[str]) -> str:
    """A dry run's jobspec; ``ResourceError`` in Flux's words where it refused the options."""
    if result.ok:
        return result.stdout
    said = scheduler_message(result.message()) or "no message"
    said = re.sub(r"^flux[ -][\w -]*?: (?:error: )?", "", said)
    asked = repr(" ".join(options)) if options else "a bare job"
    raise ResourceError("native", f"flux: {asked}: flux {' '.join(command)} says: {said}")


def parsed(result: Reply, parse: Callable[[str], T], what: str) -> Optional[T]:
    """``parse(stdout)`` of an answer; ``None`` for a failure or what ``parse`` refuses."""
    if not result.ok:
        return None
    try:
        return parse(result.stdout)
    except ValueError as exc:
        log.debug("%s: %s", what, exc)
        return None


def recent_jobs(result: Reply, since: float) -> List[str]:
    """The jobs ``commands.recent_jobs_argv`` listed; ``CannotAsk`` where it failed."""
    if not result.ok:
        raise CannotAsk(f"flux jobs: {scheduler_message(result.message()) or 'failed'}")
    return parse_recent_jobs(result.stdout, since)


def job_key(result: Reply, job_id: str) -> Optional[str]:
    """The key in a job's jobspec (``commands.jobspec_argv``); ``CannotAsk`` where it failed."""
    if not result.ok:
        raise CannotAsk(f"flux job info {job_id} jobspec: {result.message() or 'failed'}")
    try:
        return key_of_jobspec(result.stdout)
    except ValueError as exc:
        raise CannotAsk(f"flux job info {job_id} jobspec: {exc}") from None


def keys_found(keys_of_jobs: Mapping[str, Optional[str]], keys: Collection[str]) -> Dict[str, str]:
    """key -> the id of the (first listed) job carrying it, for ``keys``."""
    found: Dict[str, str] = {}
    for job_id, key in keys_of_jobs.items():
        if key is not None and key in keys:
            found.setdefault(key, job_id)
    return found
