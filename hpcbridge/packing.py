"""Allocation packing, what it is made of: the ``--pack`` request, an allocation's batch
script and resources, and the rules that place tasks and renew allocations (pure).  A pack
is ``count`` allocations of ``nodes`` nodes for ``time``, each running a Flux instance that
takes a sweep's tasks as plain Flux jobs."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Dict, Optional

from .errors import ResourceError
from .resources import DurationError, format_slurm_time, parse_duration

#: the job name of every allocation, so that ``squeue`` shows what they are
ALLOCATION_NAME = "hpcbridge-pack"

_KEYS = ("nodes", "time", "count", "partition", "account", "qos")


@dataclass(frozen=True)
class Pack:
    """``--pack "nodes=N,time=T[,count=K][,partition=P][,account=A][,qos=Q]"``."""

    time: float
    nodes: int = 1
    count: int = 1
    partition: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None

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
        return cls(
            time=time,
            nodes=_positive(given, "nodes"),
            count=_positive(given, "count"),
            partition=given.get("partition"),
            account=given.get("account"),
            qos=given.get("qos"),
        )

    def text(self) -> str:
        """The request as ``--pack`` takes it (``parse(text())`` gives it back)."""
        parts = [f"nodes={self.nodes}", f"time={format_slurm_time(self.time)}"]
        parts.append(f"count={self.count}")
        parts += [f"{key}={getattr(self, key)}" for key in _KEYS[3:] if getattr(self, key)]
        return ",".join(parts)

    def allocation_resources(self) -> Dict[str, Any]:
        """The resource dict of one allocation's Slurm job."""
        resources: Dict[str, Any] = {
            "nodes": self.nodes,
            "time": format_slurm_time(self.time),
            "job_name": ALLOCATION_NAME,
        }
        for key in ("partition", "account", "qos"):
            if getattr(self, key):
                resources[key] = getattr(self, key)
        return resources


def _bad(message: str) -> ResourceError:
    return ResourceError(
        "pack", f"{message}; write e.g. --pack nodes=1,time=30,count=2", origin="--pack"
    )


def _positive(given: Dict[str, str], key: str) -> int:
    text = given.get(key, "1")
    if not text.isdecimal() or int(text) < 1:  # isdigit takes "²", which int refuses
        raise _bad(f"{key}={text}: a whole number, 1 or more")
    return int(text)


def allocation_script(flux_command: str, nodes: int, inside: str = "slurm") -> str:
    """The batch script of one allocation, holding its nodes until it is cancelled: in
    Slurm, a Flux instance over them (one broker per node); in Flux, the batch job is
    an instance already - the script only keeps it alive."""
    if inside == "flux":
        return (
            "#!/bin/sh\n"
            "# hpcbridge pack: this batch job's Flux instance takes tasks until it is cancelled\n"
            "exec sleep inf\n"
        )
    flux = shlex.quote(flux_command)
    return (
        "#!/bin/sh\n"
        "# hpcbridge pack: a Flux instance over this allocation until it is cancelled\n"
        f"exec srun --nodes={nodes} --ntasks-per-node=1 --mpi=none {flux} start sleep inf\n"
    )


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
