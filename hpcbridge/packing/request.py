"""Allocation packing, what it is made of: the ``--pack`` request, an allocation's
resources, and the rules that place tasks and renew allocations (pure).  A pack is
``count`` allocations of ``nodes`` nodes for ``time`` - whole nodes, or ``cpus_per_node``
CPUs of each - each running a Flux instance over exactly what its allocation holds
(``script``), that takes a sweep's tasks as plain Flux jobs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from ..errors import ResourceError
from ..resources import DurationError, Resources, format_slurm_time, parse_duration

#: the job name of every allocation, so that ``squeue`` shows what they are
ALLOCATION_NAME = "hpcbridge-pack"

_KEYS = ("nodes", "time", "count", "partition", "account", "qos", "cpus_per_node", "exclusive")

#: the command's resource keys that are the allocations', not the tasks' (a packed task
#: is a plain Flux job inside an allocation: where and on what terms it runs is the
#: allocation's); the outer scheduler's own options (``--slurm-option``) go there too
ALLOCATION_KEYS = ("partition", "account", "qos", "constraint", "reservation", "exclusive")

_YES, _NO = ("1", "yes", "true"), ("0", "no", "false")

#: the seconds an allocation's Flux instance is given to start: an allocation is reached
#: with its time less that, and must still take a task then (a task that fitted its
#: allocation's whole time to the second was never sent)
INSTANCE_START = 30.0


@dataclass(frozen=True)
class Pack:
    """``--pack "nodes=N,time=T[,count=K][,cpus_per_node=C][,exclusive=1][,partition=P]
    [,account=A][,qos=Q]"``: whole nodes unless ``cpus_per_node`` is given."""

    time: float
    nodes: int = 1
    count: int = 1
    partition: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    #: CPUs of each node, the node shared with other jobs (``None``: whole nodes)
    cpus_per_node: Optional[int] = None
    #: as written (``exclusive=1`` is the default; ``0`` goes with ``cpus_per_node``)
    exclusive: Optional[bool] = None

    @classmethod
    def parse(cls, text: str) -> Pack:
        """The request in ``text``; ``ResourceError`` saying what to write otherwise."""
        given: Dict[str, str] = {}
        for part in (piece.strip() for piece in text.split(",")):
            key, equals, value = part.partition("=")
            key = key.strip()
            if not equals or not value.strip():
                raise _bad(f"{part!r} is not KEY=VALUE")
            if key not in _KEYS:
                raise _bad(f"unknown key {key!r} (known: {', '.join(_KEYS)})")
            if key in given:
                raise _bad(f"{key} given twice")
            given[key] = value.strip()
        if "time" not in given:
            raise _bad("time= is required: how long each allocation holds its nodes")
        try:
            time = parse_duration(given["time"])
        except DurationError as exc:
            raise _bad(f"time={given['time']}: {exc}") from None
        if time == float("inf"):
            raise _bad("time=UNLIMITED: an allocation needs an end to place tasks before it")
        cpus = _positive(given, "cpus_per_node") if "cpus_per_node" in given else None
        exclusive = _flag(given, "exclusive")
        if exclusive and cpus:
            raise _bad(
                "cpus_per_node=N holds N CPUs of a shared node, exclusive=1 whole nodes: "
                "give one of them"
            )
        if exclusive is False and not cpus:
            raise _bad("exclusive=0 needs cpus_per_node=N: how many CPUs of each node to hold")
        return cls(
            time=time,
            nodes=_positive(given, "nodes"),
            count=_positive(given, "count"),
            partition=given.get("partition"),
            account=given.get("account"),
            qos=given.get("qos"),
            cpus_per_node=cpus,
            exclusive=exclusive,
        )

    def text(self) -> str:
        """The request as ``--pack`` takes it (``parse(text())`` gives it back)."""
        parts = [f"nodes={self.nodes}", f"time={format_slurm_time(self.time)}"]
        parts.append(f"count={self.count}")
        parts += [f"{key}={getattr(self, key)}" for key in _KEYS[3:6] if getattr(self, key)]
        if self.cpus_per_node:
            parts.append(f"cpus_per_node={self.cpus_per_node}")
        if self.exclusive is not None:
            parts.append(f"exclusive={int(self.exclusive)}")
        return ",".join(parts)

    def allocation_resources(self, given: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """The resource dict of one allocation (a Slurm job, or a Flux batch job): whole
        nodes (``exclusive``), or one task of ``cpus_per_node`` CPUs on each node; with the
        command's keys that are the allocation's (``given``: see ``split_resources``)."""
        resources: Dict[str, Any] = {
            "nodes": self.nodes,
            "time": format_slurm_time(self.time),
            "job_name": ALLOCATION_NAME,
        }
        if self.cpus_per_node:
            resources.update(ntasks=self.nodes, cpus_per_task=self.cpus_per_node)
        else:
            resources["exclusive"] = True
        for key in ("partition", "account", "qos"):
            if getattr(self, key):
                resources[key] = getattr(self, key)
        for key, value in (given or {}).items():
            if key == "exclusive" and value and self.cpus_per_node:
                raise _bad(
                    f"--exclusive holds whole nodes, cpus_per_node={self.cpus_per_node} CPUs "
                    "of a shared node: give one of them"
                )
            if key == "exclusive":
                continue  # whole nodes: already so
            if key in resources and resources[key] != value:
                raise _bad(
                    f"{key} given twice ({key}={resources[key]} in --pack, {value} as "
                    f"--{key}): give it once"
                )
            resources[key] = value
        return resources


def split_resources(resources: Any, outer_scheduler: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The command's resources (a mapping, or ``Resources``) as the allocations' keys
    (``ALLOCATION_KEYS`` and the options in ``outer_scheduler``'s own words) and the
    tasks' keys (the rest: time, tasks, CPUs, memory...)."""
    if isinstance(resources, Resources):
        resources = resources.to_dict()
    outer: Dict[str, Any] = {}
    tasks: Dict[str, Any] = {}
    for key, value in (resources or {}).items():
        if key == "native" and value:
            native = dict(value)
            if native.get(outer_scheduler):
                outer["native"] = {outer_scheduler: native.pop(outer_scheduler)}
            if native:
                tasks["native"] = native
        elif key in ALLOCATION_KEYS:
            if value is not None and value is not False and value != "":
                outer[key] = value
        else:
            tasks[key] = value
    return outer, tasks


def _bad(message: str) -> ResourceError:
    return ResourceError(
        "pack", f"{message}; write e.g. --pack nodes=1,time=30,count=2", origin="--pack"
    )


def _positive(given: Dict[str, str], key: str) -> int:
    text = given.get(key, "1")
    if not text.isdecimal() or int(text) < 1:  # isdigit takes "²", which int refuses
        raise _bad(f"{key}={text}: a whole number, 1 or more")
    return int(text)


def _flag(given: Dict[str, str], key: str) -> Optional[bool]:
    text = given.get(key)
    if text is None:
        return None
    if text.lower() not in _YES + _NO:
        raise _bad(f"{key}={text}: 1 or 0")
    return text.lower() in _YES


def packed_task_time(task_time: Optional[float], pack: Pack, margin: float) -> float:
    """The time limit of a packed task (``task_time`` seconds), checked: it needs one, to
    be placed only where it ends before its allocation does, and an allocation of the
    pack takes it (``takes_more``) once its instance has started (``INSTANCE_START``);
    ``ResourceError`` saying what to give otherwise."""
    if not task_time or task_time == float("inf"):
        raise ResourceError(
            "time",
            "a packed task needs a time limit, to be placed only where it ends before "
            "its allocation does; give one, e.g. --time 10m",
        )
    if not takes_more(pack.time - INSTANCE_START, task_time, margin):
        needed = format_slurm_time(math.ceil(2 * task_time + margin + INSTANCE_START))
        raise ResourceError(
            "time",
            f"a task of {task_time:.0f} s does not fit an allocation of {pack.time:.0f} s: "
            f"it takes two task times, a {margin:.0f} s margin and {INSTANCE_START:.0f} s "
            f"for the allocation's Flux instance to start; ask for --pack time={needed} or "
            "more, or a shorter --time",
        )
    return float(task_time)


def takes_more(time_left: float, task_time: float, margin: float) -> bool:
    """Whether a task sent now into an instance with ``time_left`` surely ends in it: it
    starts within one task time (two per core at most, see ``room``) and runs one more."""
    return time_left - margin >= 2 * task_time


def due_for_renewal(time_left: float, task_time: float, margin: float, lead: float) -> bool:
    """Whether the next allocation must be asked for now to be ready (``lead``: how long the
    last one took to start) when this one stops taking tasks."""
    return time_left - margin < 2 * task_time + lead


def room(cores: int, in_flight: int) -> int:
    """How many more tasks an instance of ``cores`` takes: two per core, one queued
    behind each running one."""
    return max(2 * max(cores, 1) - in_flight, 0)
