"""The scheduler-neutral resource request and its validation, and wall times (Slurm
``--time`` forms, Flux FSD, ``timedelta``; float seconds, ``math.inf`` unlimited; a bare
number is refused: minutes to Slurm, seconds to the Flux API): what every submission
reads.  The rules of the other keys: ``request/`` (start times, counts, memory, flags,
generic resources) and ``native_options.py`` (the ``native`` key)."""

from __future__ import annotations

import difflib
import math
import re
import signal as signals
from dataclasses import asdict, dataclass, fields
from datetime import timedelta
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union

from .errors import ResourceError
from .request import FSD_UNITS
from .request.begins import format_begin, validate_begin
from .request.values import validate_count, validate_flag, validate_gres, validate_mem
from .schedulers.native_options import joined_native, native_form

DurationLike = Union[str, timedelta]

UNLIMITED = math.inf

_UNLIMITED_WORDS = {"unlimited", "infinite", "inf", "infinity"}

# Flux Standard Duration, a unit required: "90" is read the Slurm way (minutes).
# An exponent as strtod reads it (Flux's FSD does): 1e-06s, as_request writes tiny times so.
_FSD = re.compile(r"^(?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)(?P<unit>ms|s|m|h|d)$")

# Slurm --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.
_SLURM_DAYS = re.compile(r"^(?P<days>\d+)-(?P<rest>\d+(?::\d+){0,2})$")
_SLURM_PLAIN = re.compile(r"^\d+(?::\d+){0,2}$")


class DurationError(ValueError):
    """A duration string or value cannot be understood."""


def parse_duration(value: object) -> float:
    """Seconds for ``value``; ``math.inf`` for UNLIMITED.

    >>> parse_duration("2:00:00"), parse_duration("1-0"), parse_duration("90s")
    (7200.0, 86400.0, 90.0)
    """
    if isinstance(value, (bool, int, float)):
        raise DurationError(
            f"a bare number ({value!r}) is ambiguous: Slurm reads it as minutes, the Flux "
            "API as seconds; write '30' or '0:30:00' (minutes, Slurm style) or '1800s'"
        )
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
        if seconds <= 0:
            raise DurationError(f"duration must be positive, got {value!r}")
        return seconds
    if not isinstance(value, str):
        raise DurationError(f"expected a string or timedelta, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise DurationError("empty duration")
    if text.lower() in _UNLIMITED_WORDS:
        return UNLIMITED
    seconds = _parse_fsd(text) if _FSD.match(text) else _parse_slurm(text)
    if seconds <= 0:
        raise DurationError(f"duration must be positive, got {value!r}")
    return seconds


def _parse_fsd(text: str) -> float:
    match = _FSD.match(text)
    assert match is not None
    seconds = float(match.group("number")) * FSD_UNITS[match.group("unit")]
    if seconds > _LONGEST:
        raise DurationError(f"{text!r} is too long; write UNLIMITED for no limit")
    return seconds


def _parse_slurm(text: str) -> float:
    days_match = _SLURM_DAYS.match(text)
    if not days_match and not _SLURM_PLAIN.match(text):
        raise DurationError(
            f"cannot read {text!r} as a duration; use a Slurm form (M, M:S, H:M:S, D-H, D-H:M, "
            "D-H:M:S, UNLIMITED) or a number with a unit (90s, 15m, 1.5h, 2d)"
        )
    days = int(days_match.group("days")) if days_match else 0
    parts = [int(p) for p in (days_match.group("rest") if days_match else text).split(":")]
    if days_match:  # D-H, D-H:M, D-H:M:S
        hours, minutes, seconds = (parts + [0, 0])[:3]
        _check_below(hours, 24, "hours", text)
    else:  # M, M:S (minutes unbounded), H:M:S
        hours, minutes, seconds = parts if len(parts) == 3 else [0, *parts, 0][:3]
    if days_match or len(parts) == 3:
        _check_below(minutes, 60, "minutes", text)
    _check_below(seconds, 60, "seconds", text)
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total > _LONGEST:  # float() of a far longer one overflows
        raise DurationError(f"{text!r} is too long; write UNLIMITED for no limit")
    return float(total)


#: the longest duration read (31 million years): no scheduler takes more
_LONGEST = 10**15


def _check_below(number: int, limit: int, what: str, text: str) -> None:
    if number >= limit:
        raise DurationError(f"{what} must be below {limit} in {text!r}")


def format_slurm_time(seconds: float) -> str:
    """Slurm ``--time`` text: ``H:MM:SS`` or ``D-HH:MM:SS``; whole seconds, rounded up."""
    if math.isinf(seconds):
        return "UNLIMITED"
    total = int(math.ceil(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours}:{minutes:02d}:{secs:02d}"


def format_fsd(seconds: float) -> str:
    """Flux Standard Duration with an explicit unit, e.g. ``7200s``."""
    if math.isinf(seconds):
        return "inf"
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"


_POSITIVE_COUNTS = ("nodes", "ntasks", "cpus_per_task")
_GPU_COUNTS = ("gpus", "gpus_per_node", "gpus_per_task")
_TEXT_KEYS = (
    "partition",
    "qos",
    "account",
    "constraint",
    "job_name",
    "output",
    "reservation",
    "container",
)
_FLAGS = ("exclusive", "requeue")
_MEMORIES = ("mem", "mem_per_cpu")


@dataclass(frozen=True)
class Resources:
    """A validated resource request; ``None`` means "not asked for"."""

    partition: Optional[str] = None
    qos: Optional[str] = None
    account: Optional[str] = None
    constraint: Optional[str] = None
    time: Optional[float] = None  # seconds; math.inf = unlimited
    nodes: Optional[int] = None
    ntasks: Optional[int] = None
    cpus_per_task: Optional[int] = None
    mem: Optional[str] = None  # normalised Slurm form, e.g. "4G"
    gpus: Optional[int] = None
    job_name: Optional[str] = None
    output: Optional[str] = None
    gpus_per_node: Optional[int] = None
    gpus_per_task: Optional[int] = None
    #: Slurm's generic resources, e.g. ``gpu:a100:2,shard:1``
    gres: Optional[str] = None
    mem_per_cpu: Optional[str] = None  # as ``mem``
    #: whole nodes, shared with no other job
    exclusive: Optional[bool] = None
    reservation: Optional[str] = None
    #: a signal before the time limit, Slurm's form normalised: ``USR1@60``, ``B:USR1@60``
    signal: Optional[str] = None
    #: whether the scheduler may start the job again (node failure, preemption)
    requeue: Optional[bool] = None
    #: the earliest start, epoch seconds
    begin: Optional[float] = None
    #: the image the job's script runs in, as the container runtime takes it
    container: Optional[str] = None
    #: options in a scheduler's own words: ``(("slurm", ("--licenses=a:1",)),)``
    native: Optional[Tuple[Tuple[str, Tuple[str, ...]], ...]] = None

    @classmethod
    def from_mapping(
        cls,
        requested: Optional[Mapping[str, Any]] = None,
        defaults: Optional[Mapping[str, Any]] = None,
        origins: Optional[Mapping[str, str]] = None,
    ) -> Resources:
        """Validate ``requested`` over ``defaults``; raise :class:`ResourceError` (naming the
        default's variable in ``origins`` when a default does not validate)."""
        if isinstance(requested, Resources):
            requested = requested.to_dict()
        merged: Dict[str, Any] = {}
        from_defaults = set()
        for source in (defaults or {}, requested or {}):
            for key, value in source.items():
                _check_known(key)
                if key == "native" and value and "native" in merged:
                    # the settings' options first, the request's after them (both apply)
                    merged[key] = joined_native(merged[key], value)
                    from_defaults.discard(key)
                elif value is not None and value != "":
                    merged[key] = value
                    if source is defaults:
                        from_defaults.add(key)
                    else:
                        from_defaults.discard(key)
        validated = {}
        for key, value in merged.items():
            try:
                validated[key] = _validate(key, value)
            except ResourceError as exc:
                origin = (origins or {}).get(key) if key in from_defaults else None
                raise exc.with_origin(f"{origin}={value!r}") if origin else exc from None
        if validated.get("gpus_per_node") and re.search(r"(^|,)gpu\b", validated.get("gres", "")):
            raise ResourceError(
                "gpus_per_node",
                "GPUs asked twice (gres names gpu too): give them in one of the two",
            )
        if validated.get("mem") and validated.get("mem_per_cpu"):
            raise ResourceError(
                "mem_per_cpu", "mem and mem_per_cpu exclude each other: give one of them"
            )
        return cls(**validated)

    def to_dict(self) -> Dict[str, Any]:
        asked = {key: value for key, value in asdict(self).items() if value is not None}
        if self.native is not None:
            asked["native"] = {name: list(options) for name, options in self.native}
        return asked

    def native_options(self, scheduler: str) -> Tuple[str, ...]:
        """The options given for ``scheduler`` in its own words, in order (none: ``()``)."""
        return dict(self.native or ()).get(scheduler, ())

    def as_request(self) -> Dict[str, Any]:
        """The keys asked for, in a form ``from_mapping`` takes back unchanged."""
        request = self.to_dict()
        if self.time is not None:
            request["time"] = "UNLIMITED" if math.isinf(self.time) else f"{self.time!r}s"
        if self.begin is not None:
            request["begin"] = format_begin(self.begin)
        return request

    @property
    def slots(self) -> int:
        """How many task slots the request amounts to (at least one per node)."""
        return max(self.ntasks or 1, self.nodes or 1)


#: the keys a request may hold
RESOURCE_KEYS = tuple(field.name for field in fields(Resources))

# Names other tools use for our keys, for a better "did you mean".
_OTHER_NAMES = {
    "cpus": "cpus_per_task",
    "cores": "cpus_per_task",
    "walltime": "time",
    "time_limit": "time",
    "duration": "time",
    "memory": "mem",
    "name": "job_name",
    "queue": "qos",
    "bank": "account",
    "requires": "constraint",
    "tasks": "ntasks",
    "procs": "ntasks",
    "num_nodes": "nodes",
    "gpus_per_slot": "gpus_per_task",
    "gres_per_node": "gres",
    "memory_per_cpu": "mem_per_cpu",
    "exclusive_nodes": "exclusive",
    "reservations": "reservation",
    "warn_signal": "signal",
    "begin_time": "begin",
    "start_time": "begin",
    "is_requeueable": "requeue",
}


def _check_known(key: str) -> None:
    if key in RESOURCE_KEYS:
        return
    spelled = key.replace("-", "_").lower()
    close = [_OTHER_NAMES[spelled]] if spelled in _OTHER_NAMES else []
    close = close or difflib.get_close_matches(spelled, RESOURCE_KEYS, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ResourceError(key, f"unknown resource key{hint} (known: {', '.join(RESOURCE_KEYS)})")


def _validate(key: str, value: Any) -> Any:
    if key in _POSITIVE_COUNTS or key in _GPU_COUNTS:
        return validate_count(key, value, minimum=1 if key in _POSITIVE_COUNTS else 0)
    if key in _MEMORIES:
        return validate_mem(value, key)
    if key in _FLAGS:
        return validate_flag(key, value)
    own: Dict[str, Callable[[Any], Any]] = {
        "time": _validate_time,
        "gres": validate_gres,
        "signal": _validate_signal,
        "begin": validate_begin,
        "native": native_form,
    }
    if key in own:
        return own[key](value)
    assert key in _TEXT_KEYS
    if not isinstance(value, str):
        raise ResourceError(key, f"expected text, got {type(value).__name__} {value!r}")
    if not value.strip():
        raise ResourceError(key, "must not be blank")
    if "\x00" in value:
        raise ResourceError(key, "must not contain a NUL byte")
    return value


def _validate_time(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ResourceError(
            "time",
            f"a bare number ({value!r}) is ambiguous (minutes to Slurm, seconds to the Flux "
            "API); give a string such as '30' (minutes), '2:00:00' or '90s', or a timedelta",
        )
    if not isinstance(value, (str, timedelta)):
        raise ResourceError("time", f"expected a string or timedelta, got {value!r}")
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise ResourceError("time", str(exc)) from None


# [B:]SIG[@SECONDS]; R: (a reservation's end) is Slurm's too, read to be refused.
_SIGNAL_FLAGS = re.compile(r"^(?P<flags>[A-Za-z]+):")
_SIGNAL = re.compile(r"^(?:B:)?(?P<sig>[A-Za-z0-9+]+)(?:@(?P<seconds>\d+))?$")
#: the most seconds before the limit Slurm takes (a 16-bit field)
SIGNAL_MOST_SECONDS = 65535


def _validate_signal(value: Any) -> str:
    """``[B:]SIG[@SECONDS]`` as Slurm writes it, the signal by name without ``SIG``."""
    text = value.strip() if isinstance(value, str) else ""
    flags = _SIGNAL_FLAGS.match(text)
    if flags and flags.group("flags").upper() != "B":
        raise ResourceError(
            "signal",
            f"{flags.group('flags')}: is not taken: give [B:]SIG[@SECONDS] - B: signals "
            "your script (through hpcbridge's wrapper), no flag the job's steps",
        )
    match = _SIGNAL.match(text[:2].upper() + text[2:] if flags else text)
    if not match:
        raise ResourceError(
            "signal", f"expected [B:]SIG[@SECONDS], e.g. 'USR1@120' or 'B:TERM', got {value!r}"
        )
    name = signal_name(match.group("sig"))
    if name is None:
        raise ResourceError(
            "signal", f"unknown signal {match.group('sig')!r} (e.g. USR1, TERM, 10)"
        )
    seconds = match.group("seconds")
    if seconds is not None and int(seconds) > SIGNAL_MOST_SECONDS:
        raise ResourceError("signal", f"at most {SIGNAL_MOST_SECONDS} seconds before the limit")
    return ("B:" if flags else "") + name + (f"@{int(seconds)}" if seconds else "")


def signal_forwarded(text: Optional[str]) -> Optional[str]:
    """The signal the wrapper passes on to the script (``B:``), by name, else ``None``."""
    return signal_parts(text)[0] if text and text.startswith("B:") else None


def signal_name(text: str) -> Optional[str]:
    """``USR1`` for ``USR1``, ``SIGUSR1``, ``usr1`` or ``10``; ``None`` for no signal."""
    if text.isdigit():
        try:
            return signals.Signals(int(text)).name[3:]
        except ValueError:
            return None
    name = text.upper()
    name = name if name.startswith("SIG") else "SIG" + name
    return name[3:] if name in signals.Signals.__members__ else None


def signal_parts(text: str) -> Tuple[str, Optional[int]]:
    """A validated signal's name, and the seconds before the limit or None."""
    match = _SIGNAL.match(text)
    assert match, text
    seconds = match.group("seconds")
    return match.group("sig"), int(seconds) if seconds else None
