"""The ``JobspecV1`` of a batch job (a nested instance running our wrapper) or a plain job (the
wrapper as the tasks), built from a request's parameters (``jobspec_params``) with the class of
the bindings handed in, and many of them submitted at once, pipelined, through those bindings
(``submit_all``).  Standalone (standard library only, no package imports, no imports of the
bindings): the native driver calls it in-process, the CLI driver runs this source under
``flux python`` before ``bulk_helper.py``'s, which imports the bindings.
"""

import errno
import os
import shlex
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

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


def jobspec_params(request: Any) -> Dict[str, Any]:
    """The parameters ``build_jobspec`` takes, of a ``request.SubmitRequest``."""
    return {
        "kind": request.kind.value,
        "script": batch_script(request.wrapper_path),
        "command": [request.wrapper_path],
        "jobname": request.job_name,
        "num_slots": request.nslots,
        "cores_per_slot": request.cores_per_slot,
        "gpus_per_slot": request.gpus_per_slot,
        "num_nodes": request.nodes,
        "duration": request.duration or 0,
        "cwd": request.cwd,
        "output": request.output,
        "queue": request.queue,
        "bank": request.bank,
        "requires": request.requires,
        "dependencies": list(request.dependencies),
        "exclusive": request.exclusive,
        "begin": request.begin,
        "signal": list(request.signal) if request.signal else None,
        "environment": dict(request.environment),
        "attributes": [list(pair) for pair in request.attributes],
        "key": request.key,
    }


# Flux's canonical job id: F58 (base 58 with this alphabet) after the prefix "ƒ".
F58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
F58_PREFIX = "\u0192"


def f58(value: int, prefix: str = F58_PREFIX) -> str:
    """The F58 text of a job id Flux gave (``7381975040`` -> ``ƒCFKYzj``)."""
    digits = []
    while True:
        value, remainder = divmod(value, 58)
        digits.append(F58_ALPHABET[remainder])
        if not value:
            return prefix + "".join(reversed(digits))


_LOST_ERRNOS = (errno.ECONNRESET, errno.ECONNABORTED, errno.EPIPE, errno.ENOTCONN, errno.ETIMEDOUT)


def submit_all(
    handle: Any,
    flux_job: Any,
    params: Mapping[str, Any],
    environments: Sequence[Mapping[str, str]],
    base_environment: Optional[Mapping[str, str]] = None,
    keys: Optional[Sequence[str]] = None,
    remaining: Optional[Callable[[], float]] = None,
    names: Optional[Sequence[str]] = None,
    constraint_parser: Any = None,
) -> List[Tuple[bool, Any]]:
    """One job per entry of ``environments`` (each with its key and name), one jobspec built
    once, every ``submit_async`` through the bindings handed in (``handle``, ``flux_job``) in
    flight before the first id is read; ``(ok, id or message)`` each, in order.  Not
    answered while ``remaining()`` seconds were left: ``LOST``."""
    try:
        spec = build_jobspec(flux_job.JobspecV1, params, base_environment, constraint_parser)
    except (ValueError, TypeError, KeyError) as exc:
        return [(False, "cannot build the Flux jobspec: " + str(exc))] * len(environments)
    shared = dict(spec.environment)
    futures: List[Any] = []
    for index, own in enumerate(environments):
        spec.environment = dict(shared, **own)
        if keys:
            spec.setattr(KEY_ATTRIBUTE, str(keys[index]))
        if names:
            # Both kinds keep their name there (from_batch_command sets it too).
            spec.setattr("system.job.name", str(names[index]))
        try:
            futures.append(flux_job.submit_async(handle, spec.dumps()))
        except OSError as exc:
            futures.append(exc)
    results: List[Tuple[bool, Any]] = []
    for future in futures:
        if isinstance(future, Exception):
            results.append((False, error_text(future)))  # never sent
            continue
        try:
            if remaining is not None:
                future.wait_for(max(remaining(), 0.0))
            # submit returns a JobID (0.49+) or an int (0.26): both are ints.
            results.append((True, int(future.get_id())))
        except OSError as exc:
            lost = exc.errno in _LOST_ERRNOS
            results.append((False, (LOST if lost else "") + error_text(exc)))
    return results


def with_on_path(environment: Dict[str, str], directory: Optional[str]) -> Dict[str, str]:
    """``environment`` with ``directory`` first on its PATH (a batch job runs ``flux broker``:
    the ``flux`` directory must be there, which bindings loaded from elsewhere do not add)."""
    parts = environment.get("PATH", "").split(os.pathsep)
    if directory and directory not in parts:
        environment["PATH"] = os.pathsep.join([directory, *[part for part in parts if part]])
    return environment


def submit_call(spec: Any, uri: Optional[str]) -> str:
    """What submitting ``spec`` through the bindings is (a dry run shows it), without the
    submitting process's environment."""
    spec.environment = {"...": "(the submitting process's environment)"}
    return f"flux.job.submit(Flux({uri or ''!s}), {spec.dumps()})"
