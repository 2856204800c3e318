"""An allocation's batch script (pure): in Slurm, a Flux instance over what the allocation
holds, one broker per node bound to that node's CPUs of it, the brokers joined through
Slurm's PMI; in Flux, a batch job kept alive (it is an instance already)."""

from __future__ import annotations

import shlex
from typing import Optional

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
    # CPUs (one by default), and a broker bound to one CPU gives its instance one core.
    # --mpi=pmi2: the brokers of several nodes find each other through Slurm's PMI (with
    # --mpi=none each would start an instance of its own node); one broker needs none.
    mpi = "pmi2" if nodes > 1 else "none"
    step = f"--nodes={nodes} --ntasks-per-node=1 --cpu-bind=none --mpi={mpi}"
    return step + (f" --cpus-per-task={cpus_per_node}" if cpus_per_node else "")
