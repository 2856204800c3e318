"""Allocation packing, what it is made of: the ``--pack`` request, an allocation's batch
script and resources, and the rules that place tasks and renew allocations (pure).  A pack
is ``count`` allocations of ``nodes`` nodes for ``time`` - whole nodes, or
``cpus_per_node`` CPUs of each - each running a Flux instance over exactly what its
allocation holds, that takes a sweep's tasks as plain Flux jobs."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from .errors import ResourceError
from .resources import DurationError, Resources, format_slurm_time, parse_duration

#: the job name of every allocation, so that ``squeue`` shows what they are
ALLOCATION_NAME = "hpcbridge-pack"

_KEYS = ("nodes", "time", "count", "partition", "account", "qos", "cpus_per_node", "exclusive")

#: the command's resource keys that are the allocations', not the tasks' (a packed task
#: is a plain Flux job inside an allocation: where and on what terms it runs is the
#: allocation's); the outer scheduler's own options (``--slurm-option``) go there too
ALLOCATION_KEYS = ("partition", "account", "qos", "constraint", "reservation", "exclusive")

_YES, _NO = ("1", "yes", "true"), ("0", "no", "false")


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


#: each broker's CPUs (awk over /proc/self/status): its node's count in
#: SLURM_JOB_CPUS_PER_NODE ("8(x2),4": 8, 8 and 4 on nodes 0-2), taken from the first CPUs
#: the broker may run on - all of the machine's where slurmd does not confine a job to its
#: CPUs (task/none), else the allocation's own
_BROKER_CPUS = r"""
/^Cpus_allowed_list:/ {
    n = split(given, parts, ","); k = 0; want = 0
    for (i = 1; i <= n; i++) {
        count = parts[i]; times = 1
        if (match(count, /\(x[0-9]+\)/)) {
            times = substr(count, RSTART + 2, RLENGTH - 3); count = substr(count, 1, RSTART - 1)
        }
        for (j = 0; j < times; j++) { if (k == node) want = count; k++ }
    }
    m = split($2, spans, ","); out = ""; taken = 0
    for (i = 1; i <= m && taken < want; i++) {
        low = spans[i]; high = low; dash = index(low, "-")
        if (dash) { high = substr(low, dash + 1); low = substr(low, 1, dash - 1) }
        for (cpu = low + 0; cpu <= high + 0 && taken < want; cpu++) {
            out = out (taken ? "," : "") cpu; taken++
        }
    }
    print out
}
"""

#: one broker of an allocation's instance (``sh -c BROKER hpcbridge-pack FLUX``), bound to
#: the CPUs Slurm gave its node: Flux takes its cores from the broker's CPU affinity
#: (hwloc restricted to it, flux-config-resource(5) ``norestrict``), so its R never holds
#: more than the allocation does
BROKER = (
    'cpus=$(awk -v given="$SLURM_JOB_CPUS_PER_NODE" -v node="${SLURM_NODEID:-0}" '
    + shlex.quote(_BROKER_CPUS)
    + """ /proc/self/status)
if [ -z "$cpus" ]; then
    echo "hpcbridge pack: no CPU of this allocation found on $(hostname)" >&2
    exit 1
fi
if ! command -v taskset >/dev/null; then
    echo "hpcbridge pack: taskset (util-linux) not found on $(hostname)" >&2
    exit 1
fi
exec taskset -c "$cpus" "$1" start sleep inf
"""
)


def allocation_script(
    flux_command: str, nodes: int, inside: str = "slurm", cpus_per_node: Optional[int] = None
) -> str:
    """The batch script of one allocation, holding its nodes until it is cancelled: in
    Slurm, a Flux instance over them (one broker per node, on its node's CPUs of the
    allocation - see ``BROKER``); in Flux, the batch job is an instance already, over
    exactly what it was given - the script only keeps it alive."""
    if inside == "flux":
        return (
            "#!/bin/sh\n"
            "# hpcbridge pack: this batch job's Flux instance takes tasks until it is cancelled\n"
            "exec sleep inf\n"
        )
    flux = shlex.quote(flux_command)
    return (
        "#!/bin/sh\n"
        "# hpcbridge pack: a Flux instance over this allocation until it is cancelled, each\n"
        "# broker on the CPUs Slurm gave its node\n"
        f"exec srun {_step(nodes, cpus_per_node)} sh -c {shlex.quote(BROKER)} hpcbridge-pack "
        f"{flux}\n"
    )


def allocation_runs(
    flux_command: str, nodes: int, inside: str = "slurm", cpus_per_node: Optional[int] = None
) -> str:
    """What ``allocation_script`` runs, in one line (a dry run shows it)."""
    if inside == "flux":
        return "exec sleep inf"
    flux = shlex.quote(flux_command)
    binding = "taskset -c <the CPUs of the allocation on its node>"
    return f"srun {_step(nodes, cpus_per_node)} {binding} {flux} start sleep inf"


def _step(nodes: int, cpus_per_node: Optional[int]) -> str:
    # --cpu-bind=none: Slurm's task/affinity binds a step's task to its --cpus-per-task
    # CPUs (one by default), and a broker bound to one CPU gives its instance one core
    step = f"--nodes={nodes} --ntasks-per-node=1 --cpu-bind=none --mpi=none"
    return step + (f" --cpus-per-task={cpus_per_node}" if cpus_per_node else "")


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
