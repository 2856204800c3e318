"""Many jobs of one jobspec submitted at once, every ``submit_async`` in flight before the
first id is read (``submit_all``): by the native driver in this process, and by the CLI
driver as the bulk helper it runs under ``flux python`` after ``jobspec.py``'s source
(standard library only, no package imports: ``CLIDriver`` sends both files' text).
"""

import errno
import json
import sys
import time
from typing import Any, List, Mapping, Optional, Sequence, Tuple

try:  # in the package; under `flux python -c` jobspec.py's source ran just before
    from .jobspec import KEY_ATTRIBUTE, LOST, build_jobspec, error_text
except ImportError:  # pragma: no cover - only under flux python
    pass


def constraint_parser() -> Any:
    """Flux's ``MiniConstraintParser`` class (``flux.job._utils`` in 0.88, ``flux.cli.base``
    in 0.49), ``None`` where the bindings have none."""
    for module_name in ("flux.job._utils", "flux.cli.base"):
        try:
            return __import__(module_name, fromlist=["MiniConstraintParser"]).MiniConstraintParser
        except (ImportError, AttributeError):
            continue
    return None


_LOST_ERRNOS = (errno.ECONNRESET, errno.ECONNABORTED, errno.EPIPE, errno.ENOTCONN, errno.ETIMEDOUT)


def submit_all(
    handle: Any,
    flux_job: Any,
    params: Mapping[str, Any],
    environments: Sequence[Mapping[str, str]],
    base_environment: Optional[Mapping[str, str]] = None,
    keys: Optional[Sequence[str]] = None,
    timeout: Optional[float] = None,
    names: Optional[Sequence[str]] = None,
) -> List[Tuple[bool, Any]]:
    """One job per entry of ``environments`` (each with its key and name), one jobspec built
    once, every ``submit_async`` in flight before the first id is read; ``(ok, id or
    message)`` each, in order.  Not answered within ``timeout`` (all): ``LOST``."""
    try:
        spec = build_jobspec(flux_job.JobspecV1, params, base_environment, constraint_parser())
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
    ends = None if timeout is None else time.monotonic() + timeout
    for future in futures:
        if isinstance(future, Exception):
            results.append((False, error_text(future)))  # never sent
            continue
        try:
            if ends is not None:
                future.wait_for(max(ends - time.monotonic(), 0.0))
            # submit returns a JobID (0.49+) or an int (0.26): both are ints.
            results.append((True, int(future.get_id())))
        except OSError as exc:
            lost = exc.errno in _LOST_ERRNOS
            results.append((False, (LOST if lost else "") + error_text(exc)))
    return results


def main() -> None:
    """The bulk helper: ``{"job", "environments", "keys", "names"}`` JSON in, ``OK <id>`` or
    ``ERR <message>`` per job out."""
    import flux
    import flux.job

    request = json.load(sys.stdin)
    handle = flux.Flux()
    jobs = request["environments"]
    keys, names = request.get("keys"), request.get("names")
    for ok, value in submit_all(handle, flux.job, request["job"], jobs, keys=keys, names=names):
        if ok:
            sys.stdout.write(f"OK {value}\n")
        else:
            sys.stdout.write("ERR " + " ".join(str(value).split()) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
