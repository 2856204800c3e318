"""Native options: sbatch's own words (the ``native`` key), checked by name against the
options hpcbridge sets itself and those the running sbatch lists.  Pure, no I/O."""

from __future__ import annotations

from typing import Mapping, Optional

from ...resources import Resources
from ..native_options import check_options, owned_table

#: sbatch options hpcbridge sets itself, by every name sbatch takes, and what to use
OWNED_OPTIONS = owned_table(
    [
        (("-o", "--output", "-e", "--error", "--open-mode"), "give the output key (--output)"),
        (("--parsable",), "hpcbridge reads sbatch's answer itself; leave it out"),
        (("--wrap",), "hpcbridge submits your script in its wrapper; give the script"),
        (
            ("-a", "--array"),
            "submit many with submit_many (submit-many): hpcbridge makes the arrays",
        ),
        (
            ("-d", "--dependency", "--kill-on-invalid-dep"),
            "give the parents with depends_on (--after)",
        ),
        (
            ("--comment",),
            "the comment carries the key a lost answer is found by; name the job with job_name",
        ),
        (
            ("-D", "--chdir"),
            "the job runs in its staged folder; choose it with remote_dir (--remote-dir)",
        ),
        (
            ("--export", "--export-file", "--get-user-env"),
            "give variables with environment (--env NAME=VALUE)",
        ),
        (("-W", "--wait"), "wait with hpcbridge (wait, or --wait)"),
        (
            ("-M", "--clusters"),
            "hpcbridge follows the cluster its slurm.conf names: "
            "set SLURM_CONF to the other cluster's",
        ),
        (("--test-only",), "use describe_submission (--dry-run)"),
        *(
            (names, f"the {key} key says it (--{key.replace('_', '-')}); give it there")
            for key, names in (
                ("partition", ("-p", "--partition")),
                ("qos", ("-q", "--qos")),
                ("account", ("-A", "--account")),
                ("constraint", ("-C", "--constraint")),
                ("time", ("-t", "--time")),
                ("nodes", ("-N", "--nodes")),
                ("ntasks", ("-n", "--ntasks")),
                ("cpus_per_task", ("-c", "--cpus-per-task")),
                ("mem", ("--mem",)),
                ("gpus", ("-G", "--gpus")),
                ("job_name", ("-J", "--job-name")),
                ("gpus_per_node", ("--gpus-per-node",)),
                ("gpus_per_task", ("--gpus-per-task",)),
                ("gres", ("--gres",)),
                ("mem_per_cpu", ("--mem-per-cpu",)),
                ("exclusive", ("--exclusive",)),
                ("reservation", ("--reservation",)),
                ("signal", ("--signal",)),
                ("requeue", ("--requeue", "--no-requeue")),
                ("begin", ("-b", "--begin")),
            )
        ),
    ]
)


def check_native(resources: Resources, known: Optional[Mapping[str, str]], where: str) -> None:
    """``ResourceError`` for a native sbatch option this release lacks (``known``: those
    ``sbatch --help`` lists; sbatch takes an unambiguous prefix of a long one) or one that
    sets what hpcbridge owns - before anything is staged."""
    options = resources.native_options("slurm")
    if options:
        check_options("sbatch", options, OWNED_OPTIONS, known, where)
