"""Queues: what a broker offers, which queue a job goes to, and Flux's refusals.

Flux instances come in two kinds:

- **anonymous queue only** - the default of every ``flux start`` and nested
  ``flux batch`` instance.  A named queue is *rejected* there
  (``'debug' is not a valid queue``), so a requested queue is omitted;
- **named queues** (``[queues.NAME]`` in the config) - a job must name a
  valid one, unless ``policy.jobspec.defaults.system.queue`` names a
  default; otherwise Flux says ``no queue specified``.

Pure: the drivers fetch the config (``config.get`` RPC / ``flux config get``)
or the ``flux queue list`` table and hand the text or dict in here.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Tuple

from ...errors import JobSubmissionError
from .versions import FluxPolicy

log = logging.getLogger("hpcbridge")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class QueueInfo:
    """The queues of one broker; ``names`` empty = only the anonymous queue."""

    names: Tuple[str, ...] = ()
    default: Optional[str] = None
    #: where the answer came from (for doctor and messages)
    source: str = ""

    @property
    def anonymous(self) -> bool:
        return not self.names


def queue_info_from_config(config: Mapping[str, Any], source: str = "config.get") -> QueueInfo:
    """From the broker's configuration (``config.get`` RPC or ``flux config get``)."""
    queues = config.get("queues") or {}
    names = tuple(queues) if isinstance(queues, Mapping) else ()
    default = None
    try:
        default = config["policy"]["jobspec"]["defaults"]["system"]["queue"]
    except (KeyError, TypeError):
        default = None
    return QueueInfo(names=names, default=str(default) if default else None, source=source)


def parse_config_json(text: str) -> QueueInfo:
    """``flux config get`` prints the whole configuration as one JSON object."""
    text = text.strip()
    config = json.loads(text) if text else {}
    if not isinstance(config, dict):
        raise ValueError(f"flux config get printed {type(config).__name__}, not an object")
    return queue_info_from_config(config, source="flux config get")


def strip_ansi(text: str) -> str:
    # `flux queue list` (0.88) colours its EN/ST marks even when piped.
    return _ANSI.sub("", text)


def parse_queue_list(text: str) -> QueueInfo:
    """``flux queue list``: a QUEUE column exists only when named queues do.

    0.88: ``QUEUE EN ST TDEFAULT ...`` with ANSI colour codes; 0.49 has no
    EN/ST columns.  The default queue carries a ``*`` after its name.
    An anonymous-only broker prints a table without the QUEUE column.
    """
    lines = [line for line in strip_ansi(text).splitlines() if line.strip()]
    if not lines:
        raise ValueError("flux queue list printed nothing")
    header = lines[0].split()
    if not header or header[0] != "QUEUE":
        return QueueInfo(source="flux queue list")
    names = []
    default = None
    for line in lines[1:]:
        name = line.split()[0]
        if name.endswith("*"):
            name = name.rstrip("*")
            default = name
        names.append(name)
    return QueueInfo(names=tuple(names), default=default, source="flux queue list")


@dataclass(frozen=True)
class QueueChoice:
    """The queue to send (``None`` = none) and a note for the log, if any."""

    queue: Optional[str]
    note: str = ""


def choose_queue(
    requested: Optional[str], info: Optional[QueueInfo], policy: FluxPolicy
) -> QueueChoice:
    """Which queue a job is submitted to; raises for a queue the broker does not have."""
    if not policy.queues:
        if requested:
            # 0.26: `--queue` is an unrecognized argument and system.queue is ignored.
            return QueueChoice(
                None, f"Flux adapter {policy.name} has no queues: queue {requested!r} dropped"
            )
        return QueueChoice(None)
    if info is None:
        # Could not learn the queues: pass the request through, Flux will judge.
        return QueueChoice(requested)
    if info.anonymous:
        if requested:
            # A named queue on an anonymous-only broker is rejected
            # ("'debug' is not a valid queue"): omit it.
            return QueueChoice(
                None,
                f"this Flux instance has only the anonymous queue: queue {requested!r} omitted",
            )
        return QueueChoice(None)
    if requested:
        if requested not in info.names:
            raise JobSubmissionError(
                f"Flux queue {requested!r} does not exist on this instance; "
                f"valid queues: {', '.join(info.names)}",
                scheduler_message=f"Invalid queue '{requested}' specified",
            )
        return QueueChoice(requested)
    if info.default:
        return QueueChoice(
            info.default, f"no queue requested: using the default queue {info.default!r}"
        )
    raise JobSubmissionError(
        "this Flux instance has named queues and no default queue; request one with "
        f"qos=NAME (valid queues: {', '.join(info.names)})",
        scheduler_message="no queue specified",
    )


# The refusals Flux phrases (job-ingest validators, the job-manager queue
# plugin, the policy limits), across 0.49 .. 0.88.
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


def submission_error(
    text: str, argv: Optional[Sequence[str]] = None, what: str = "flux batch"
) -> JobSubmissionError:
    """A ``JobSubmissionError`` carrying Flux's refusal text."""
    message = scheduler_message(text) or "no message"
    return JobSubmissionError(
        f"{what} refused the job: {message}", argv=argv, scheduler_message=message
    )


def log_choice(choice: QueueChoice) -> None:
    if choice.note:
        if choice.note.startswith("no queue requested"):
            log.info("%s", choice.note)
        else:
            log.warning("%s", choice.note)
