"""The scheduler-neutral resource request and its validation (wall times: ``times/durations.py``,
start times: ``times/begins.py``, options in a scheduler's own words: ``native_options.py``)."""

from __future__ import annotations

import difflib
import math
import re
import signal as signals
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timedelta
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from .errors import ResourceError
from .native_options import joined_native, native_form
from .times.begins import BeginError, format_begin, parse_begin
from .times.durations import DurationError, parse_duration

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

# Slurm's --mem: an integer with an optional unit K, M (default), G or T.
_MEM = re.compile(r"^(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?)(?:I?B)?$", re.IGNORECASE)
_MEM_STEP = {"K": 1, "M": 1024, "G": 1024**2, "T": 1024**3}  # in KiB


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
        return _validate_count(key, value, minimum=1 if key in _POSITIVE_COUNTS else 0)
    if key in _MEMORIES:
        return _validate_mem(value, key)
    if key in _FLAGS:
        return _validate_flag(key, value)
    own: Dict[str, Callable[[Any], Any]] = {
        "time": _validate_time,
        "gres": _validate_gres,
        "signal": _validate_signal,
        "begin": _validate_begin,
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


def _validate_count(key: str, value: Any, minimum: int) -> int:
    number: Optional[int] = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif (
        isinstance(value, float)
        and value.is_integer()
        or isinstance(value, str)
        and re.fullmatch(r"\s*[+-]?\d+\s*", value)
    ):
        number = int(value)
    if number is None:
        raise ResourceError(key, f"expected a whole number, got {value!r}")
    if number < minimum:
        bound = "positive" if minimum == 1 else "zero or more"
        raise ResourceError(key, f"must be {bound}, got {number}")
    return number


def _validate_mem(value: Any, key: str = "mem") -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ResourceError(key, f"expected e.g. '4G' or '500M', got {value!r}")
    match = _MEM.match(str(value).strip())
    if not match:
        raise ResourceError(key, f"malformed memory {value!r}; expected e.g. '4G', '500M', '1T'")
    unit = (match.group("unit") or "M").upper()
    number = float(match.group("number"))
    if number <= 0:
        raise ResourceError(key, f"must be positive, got {value!r}")
    if number.is_integer():
        return f"{int(number)}{unit}"
    # Slurm takes whole numbers only: 1.5G is written as 1536M.
    kib = int(number * _MEM_STEP[unit])
    if kib < 1:  # 0 would be Slurm's "all the node's memory"
        raise ResourceError(key, f"{value!r} is below 1K, the least Slurm takes: give 1K or more")
    for smaller in ("T", "G", "M", "K"):
        if kib % _MEM_STEP[smaller] == 0:
            return f"{kib // _MEM_STEP[smaller]}{smaller}"
    return f"{kib}K"  # pragma: no cover - K divides everything


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _validate_flag(key: str, value: Any) -> bool:
    """``True``/``False``, or the words a setting gives (``yes``, ``0``...)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, (str, int)) else None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ResourceError(key, f"expected true or false (yes/no, 1/0), got {value!r}")


# Slurm's --gres: name[:type][:count], comma-separated (gpu:a100:2,shard:1).
_GRES = re.compile(r"^[A-Za-z][\w.-]*(?::[\w.-]+){0,2}(?:,[A-Za-z][\w.-]*(?::[\w.-]+){0,2})*$")


def _validate_gres(value: Any) -> str:
    if not isinstance(value, str) or not _GRES.match(value.strip()):
        raise ResourceError(
            "gres",
            f"expected name[:type][:count], comma-separated (e.g. 'gpu:a100:2'), got {value!r}",
        )
    return value.strip()


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


def _validate_begin(value: Any) -> float:
    """Whole epoch seconds of ``value``: a ``datetime`` (naive: local time) or text in one
    of ``BEGIN_FORMS`` (``parse_begin``), read now."""
    if isinstance(value, datetime):
        return float(math.ceil(value.timestamp()))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ResourceError(
            "begin",
            f"a bare number ({value!r}) is ambiguous; give 'now+{value}' (seconds), "
            f"'+{value}m' or '2026-12-05T10:00'",
        )
    if not isinstance(value, str):
        raise ResourceError("begin", f"expected text or a datetime, got {value!r}")
    try:
        return float(math.ceil(parse_begin(value, datetime.now())))
    except BeginError as exc:
        raise ResourceError("begin", str(exc)) from None
