"""The ``JobspecV1`` of a batch job (a nested instance running our wrapper) or a plain job (the
wrapper as the tasks), built from ``request.jobspec_params`` with the bindings' own class.
Standalone (standard library only, no package imports): the CLI driver runs this source under
``flux python``, before ``bulk_helper.py``'s.  Pure.
"""

import os
import shlex
from typing import Any, Dict, Mapping, Optional

# The key lives in the jobspec: the instance keeps it with the job and `flux job info
# <id> jobspec` reads it back in every release (the job's name belongs to the user).
KEY_ATTRIBUTE = "user.hpcbridge_key"

#: how the message of a job whose answer never came begins: it may or may not exist
LOST = "its answer was lost: "


def batch_script(wrapper_path: str) -> str:
    """The script text ``from_batch_command`` copies into the jobspec: a stub that execs ours."""
    return "#!/bin/sh\nexec " + shlex.quote(wrapper_path) + "\n"


def build_jobspec(
    jobspec_class: Any,
    params: Mapping[str, Any],
    base_environment: Optional[Mapping[str, str]] = None,
    constraint_parser: Any = None,
) -> Any:
    """The jobspec of one job of ``params["kind"]`` (default "batch"); ``constraint_parser``:
    Flux's ``MiniConstraintParser`` class (``bulk_helper.constraint_parser``), if any."""
    kind = params.get("kind") or "batch"
    # Only the arguments every release's factory takes (0.26 has no exclusive, 0.49's
    # from_command no duration/cwd/environment): the rest is set afterwards.
    shape: Dict[str, Any] = {"num_nodes": params.get("num_nodes") or None}
    if params.get("exclusive"):
        shape["exclusive"] = True
    slots = int(params.get("num_slots") or 1)
    cores = int(params.get("cores_per_slot") or 1)
    # gpus None, not 0: older releases add a zero-count gpu resource otherwise.
    gpus: Optional[int] = max(int(params.get("gpus_per_slot") or 0), 0) or None
    if kind == "batch":
        spec = jobspec_class.from_batch_command(
            params["script"],
            params["jobname"],
            num_slots=slots,
            cores_per_slot=cores,
            gpus_per_slot=gpus,
            **shape,
        )
    elif kind == "plain":
        spec = jobspec_class.from_command(
            list(params["command"]),
            num_tasks=slots,
            cores_per_task=cores,
            gpus_per_task=gpus,
            **shape,
        )
    else:
        raise ValueError("unknown job kind " + repr(kind) + "; known: batch, plain")
    apply_attributes(spec, params, base_environment, constraint_parser)
    return spec


def apply_attributes(
    spec: Any,
    params: Mapping[str, Any],
    base_environment: Optional[Mapping[str, str]],
    constraint_parser: Any = None,
) -> None:
    """What both kinds set the same way: limits, place, environment, output, system.*."""
    # Never duration= in from_batch_command (0.26, 0.49: TypeError); the setter takes seconds.
    duration = params.get("duration")
    if duration:
        spec.duration = float(duration)
    if params.get("cwd"):
        spec.cwd = params["cwd"]
    environment: Dict[str, str] = dict(os.environ if base_environment is None else base_environment)
    environment.update(params.get("environment") or {})
    spec.environment = environment
    if params.get("output"):
        # `stdout`/`stderr` exist in every release (0.88 aliases output/error).
        spec.stdout = params["output"]
        spec.stderr = params["output"]
    # setattr("system.…") works everywhere; the `queue` property is 0.49+.
    if params.get("queue"):
        spec.setattr("system.queue", params["queue"])
    if params.get("bank"):
        spec.setattr("system.bank", params["bank"])
    dependencies = [
        {"scheme": "afterok", "value": str(job_id)} for job_id in params.get("dependencies") or []
    ]
    if params.get("begin"):
        # The begin-time scheme takes its epoch as a string (0.49 refuses a number).
        dependencies.append({"scheme": "begin-time", "value": str(float(params["begin"]))})
    if dependencies:
        spec.setattr("system.dependencies", dependencies)
    if params.get("signal"):
        signum, timeleft = params["signal"]
        spec.setattr("system.shell.options.signal", {"signum": signum, "timeleft": timeleft})
    if params.get("requires"):
        spec.setattr("system.constraints", parse_constraint(params["requires"], constraint_parser))
    if params.get("jobname") and params.get("kind") == "plain":
        # from_batch_command takes the name; a plain job's is set here.
        spec.setattr("system.job.name", params["jobname"])
    for path, value in params.get("attributes") or []:
        spec.setattr(path, value)  # what the native options set (``native``)
    if params.get("key"):
        spec.setattr(KEY_ATTRIBUTE, str(params["key"]))


def parse_constraint(text: str, parser_class: Any = None) -> Any:
    """RFC 35 constraint of ``--requires`` text by Flux's parser class; without it, property
    names only."""
    if parser_class is not None:
        try:
            return parser_class().parse(text)
        except Exception as exc:
            # flux's ConstraintSyntaxError derives from Exception only, not ValueError
            if type(exc).__name__ != "ConstraintSyntaxError":
                raise
            raise ValueError(
                f"flux cannot read the constraint {text!r}: {exc} (write property names, "
                "e.g. 'ssd,bigmem', or RFC 35 terms such as 'host:node1 or rank:0')"
            ) from exc
    words = [word for word in text.replace(",", " ").split() if word]
    if words and all(
        word.replace("-", "").replace("_", "").replace("^", "").isalnum() for word in words
    ):
        return {"properties": words}
    raise ValueError(f"cannot parse constraint {text!r} without flux's constraint parser")


def error_text(exc: BaseException) -> str:
    strerror = getattr(exc, "strerror", None)
    return strerror or str(exc) or type(exc).__name__
