"""Options in Flux's own words (the ``native`` resource), judged by Flux's own option
handling.  Pure: ``commands.FluxCommands.native_attributes`` runs the dry runs.

hpcbridge builds each job's jobspec itself (``jobspec``), so an option cannot be
handed to Flux as it was written.  Instead Flux's command builds the jobspec
twice without submitting anything (``flux submit --dry-run``, ``flux batch
--dry-run``; ``flux mini ...`` on 0.26) - once bare, once with the option - and
what the option changed in the jobspec's attributes is what every job gets, set
leaf by leaf (``--setattr`` of one value takes JSON in every release; 0.26's
refuses an object).  So an option the release lacks, or a bad value, is refused
by Flux's own parser before anything is staged; one that changes the job's
resources or command, or what hpcbridge sets (output, environment, the key),
is refused naming the key to use; one that changes nothing in the jobspec (a
submission flag such as ``--urgency``, how the command talks) is refused
rather than lost.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ...errors import ResourceError
from ...native_options import check_options, owned_table

#: what one option sets in the jobspec's attributes: (dotted path, value) leaves
Attributes = Tuple[Tuple[str, Any], ...]

#: Flux options hpcbridge sets itself, by their names in 0.26 .. 0.88, and what to use
OWNED_OPTIONS = owned_table(
    [
        (("--output", "--error"), "give the output key (--output)"),
        (("--cwd",), "the job runs in its staged folder; choose it with remote_dir (--remote-dir)"),
        (("--env", "--env-remove", "--env-file"), "give variables with environment (--env)"),
        (("--dependency",), "give the parents with depends_on (--after)"),
        (("--wrap",), "hpcbridge submits your script in its wrapper; give the script"),
        (("--cc", "--bcc"), "submit many with submit_many (submit-many)"),
        (("--dry-run",), "use describe_submission (--dry-run)"),
        (("--wait", "--wait-event", "--watch"), "wait with hpcbridge (wait, or --wait)"),
        *(
            (names, f"the {key} key says it (--{key.replace('_', '-')}); give it there")
            for key, names in (
                ("nodes", ("-N", "--nodes")),
                ("ntasks", ("-n", "--ntasks", "--nslots")),
                ("cpus_per_task", ("-c", "--cores-per-task", "--cores-per-slot")),
                ("gpus_per_task", ("-g", "--gpus-per-task", "--gpus-per-slot")),
                ("gpus_per_node", ("--gpus-per-node",)),
                ("time", ("-t", "--time-limit")),
                ("qos", ("-q", "--queue")),
                ("account", ("-B", "--bank")),
                ("constraint", ("--requires",)),
                ("job_name", ("--job-name",)),
                ("exclusive", ("--exclusive",)),
                ("begin", ("--begin-time",)),
                ("signal", ("--signal",)),
            )
        ),
    ]
)

#: attributes hpcbridge sets, and what says them
OWNED_PATHS: Mapping[str, str] = {
    "system.duration": "the time key",
    "system.queue": "the qos key",
    "system.bank": "the account key",
    "system.constraints": "the constraint key",
    "system.job.name": "the job_name key",
    "system.dependencies": "depends_on",
    "system.cwd": "remote_dir",
    "system.environment": "environment",
    "system.shell.options.output": "the output key",
    "user.hpcbridge_key": "nothing: it is the submission's key",
}


def check_names(options: Sequence[str]) -> None:
    """``ResourceError`` for an option that names what hpcbridge owns; the release's
    parser judges the rest (``dry_run_argv``).  0.49's takes a shortened long name,
    so a prefix of an owned name is refused too."""
    check_options("flux", options, OWNED_OPTIONS)


def dry_run_argv(
    flux: str, command: Sequence[str], batch: bool, options: Sequence[str]
) -> List[str]:
    """The command that builds, without submitting, the jobspec of a bare job of this
    kind with ``options``: ``command`` is the release's ``flux batch`` or ``flux submit``."""
    if batch:
        return [flux, *command, "--dry-run", "-n1", *options, "--wrap", "true"]
    return [flux, *command, "--dry-run", *options, "true"]


def option_attributes(option: str, bare: str, given: str) -> Attributes:
    """What ``option`` changed between the bare jobspec and the one built with it (both
    ``--dry-run`` JSON); ``ResourceError`` for a change hpcbridge cannot pass on."""
    before, after = json.loads(bare), json.loads(given)
    for part in sorted(set(before) | set(after)):
        if part != "attributes" and before.get(part) != after.get(part):
            raise ResourceError(
                "native",
                f"flux: {option!r} changes the job's {part}, which hpcbridge builds: ask "
                "with the keys (nodes, ntasks, cpus_per_task, gpus_per_task, exclusive)",
            )
    old = _leaves(before.get("attributes") or {})
    new = _leaves(after.get("attributes") or {})
    changed = [(path, value) for path, value in new.items() if old.get(path, _MISSING) != value]
    gone = [path for path in old if path not in new]
    for path in [path for path, _ in changed] + gone:
        for owned, use in OWNED_PATHS.items():
            if path == owned or path.startswith(owned + "."):
                raise ResourceError(
                    "native", f"flux: {option!r} sets {owned}, which hpcbridge sets: use {use}"
                )
        if path in gone or not path.startswith(("system.", "user.")):
            raise ResourceError(
                "native", f"flux: {option!r} changes {path} in a way hpcbridge cannot pass on"
            )
    if not changed:
        raise ResourceError(
            "native",
            f"flux: {option!r} changes nothing in the jobspec; hpcbridge sends the jobspec, "
            "so it would be lost (submission flags such as --urgency are not passed on)",
        )
    return tuple(sorted(changed))


_MISSING = object()


def _leaves(value: Mapping[str, Any], path: str = "") -> Dict[str, Any]:
    """``{"a.b": 1}`` of ``{"a": {"b": 1}}``; an empty object is a leaf of its own."""
    leaves: Dict[str, Any] = {}
    for key, item in value.items():
        here = f"{path}.{key}" if path else str(key)
        if isinstance(item, dict) and item:
            leaves.update(_leaves(item, here))
        else:
            leaves[here] = item
    return leaves
