"""The CLI driver's bulk helper: run under ``flux python`` after ``jobspec.py``'s source (the
CLI driver sends both files' text), it submits every job of a request read from stdin with
``jobspec.submit_all`` and prints ``OK <id>`` or ``ERR <message>`` per job.  Standard
library and the bindings only, no package imports.
"""

import json
import sys
from typing import Any

try:  # in the package; under `flux python -c` jobspec.py's source ran just before
    from .jobspec import submit_all
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


def main() -> None:
    """The bulk helper: ``{"job", "environments", "keys", "names"}`` JSON in, ``OK <id>`` or
    ``ERR <message>`` per job out."""
    import flux
    import flux.job

    request = json.load(sys.stdin)
    handle = flux.Flux()
    jobs = request["environments"]
    keys, names = request.get("keys"), request.get("names")
    parser = constraint_parser()
    sent = submit_all(
        handle, flux.job, request["job"], jobs, keys=keys, names=names, constraint_parser=parser
    )
    for ok, value in sent:
        if ok:
            sys.stdout.write(f"OK {value}\n")
        else:
            sys.stdout.write("ERR " + " ".join(str(value).split()) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
