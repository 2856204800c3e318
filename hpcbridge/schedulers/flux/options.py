"""Options in Flux's own words (the ``native`` resource), judged by Flux: a ``--dry-run`` bare
and one with the option; what it changed in the jobspec's attributes every job gets, leaf by
leaf (``--setattr`` of one JSON value: 0.26 refuses an object).  Pure.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple

from ...errors import ResourceError
from ..native_options import check_options, owned_table

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
    """``ResourceError`` for an option hpcbridge owns (a prefix too: 0.49 takes shortened names)."""
    check_options("flux", options, OWNED_OPTIONS)


def option_attributes(option: str, bare: str, given: str) -> Attributes:
    """What ``option`` changed from the bare jobspec; ``ResourceError`` for what cannot pass."""
    before, after = _jobspec(option, bare), _jobspec(option, given)
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


def _jobspec(option: str, text: str) -> Dict[str, Any]:
    """A dry run's jobspec; ``ResourceError`` when it printed none (not a JSON object)."""
    try:
        spec = json.loads(text)
    except ValueError:
        spec = None
    if not isinstance(spec, dict):
        raise ResourceError(
            "native", f"flux: {option!r}: its dry run printed no jobspec; check it with --dry-run"
        )
    return spec


def _leaves(value: Mapping[str, Any], path: str = "") -> Dict[str, Any]:
    """``{"a.b": 1}`` of ``{"a": {"b": 1}}``; an empty object is a leaf of its own."""
    if not isinstance(value, dict):  # attributes that are no object: one leaf
        return {path: value}
    leaves: Dict[str, Any] = {}
    for key, item in value.items():
        here = f"{path}.{key}" if path else str(key)
        if isinstance(item, dict) and item:
            leaves.update(_leaves(item, here))
        else:
            leaves[here] = item
    return leaves


class JudgedOptions:
    """What native options set, by job kind, judged once each by dry runs (a bare job's,
    then one per option) and remembered."""

    def __init__(self) -> None:
        #: what each option sets, by job kind (batch or not) and option
        self._set: Dict[Tuple[bool, str], Attributes] = {}
        #: the bare job's dry-run jobspec each option's is compared with, by job kind
        self._bare: Dict[bool, str] = {}

    def attributes(
        self, batch: bool, options: Sequence[str], dry_run: Callable[[Sequence[str]], str]
    ) -> Attributes:
        """What ``options`` set; ``dry_run(options)``: the jobspec Flux builds with them;
        ``ResourceError`` for an option hpcbridge owns or one that cannot pass."""
        check_names(options)
        found: List[Tuple[str, Any]] = []
        for option in options:
            if (batch, option) not in self._set:
                if batch not in self._bare:
                    self._bare[batch] = dry_run(())
                self._set[batch, option] = option_attributes(
                    option, self._bare[batch], dry_run((option,))
                )
            found.extend(self._set[batch, option])
        return tuple(found)
