"""Why a scheduler the tests run against is absent, in the words of the build that made it.

``scripts/build-schedulers.sh`` builds the schedulers no registry has (flux-core
0.88, 0.49 and 0.26, Slurm 25.11, pyslurm, Spack) from the source archives in
``HPCBRIDGE_TEST_SOURCES``.  For each one it could not build it writes one line
under ``$HPCBRIDGE_TEST_BUILD_DIR/status/<component>``: the archive that is
missing, the checksum that differs, or the end of a failed build's log.  A test
that needs the component skips with that line; where the script never ran, the
reason says how to provide the component.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the components ``scripts/build-schedulers.sh`` knows, and what each archive is
ARCHIVES = {
    "flux-0.88": "flux-core-0.88.0.tar.gz",
    "flux-0.49": "flux-core-0.49.0.tar.gz",
    "flux-0.26": "flux-core-0.26.0.tar.gz",
    "slurm-25.11": "slurm-25.11.7.tar.gz",
    "pyslurm": "slurm-25.11.7.tar.gz",
    "spack": "spack-1.1.0.tar.gz",
}


def status_dir() -> Path:
    return Path(os.environ.get("HPCBRIDGE_TEST_BUILD_DIR", "/var/tmp/hpcbridge-build")) / "status"


def absent_reason(component: str, what: str) -> str:
    """Why ``component`` (e.g. ``flux-0.26``) is not there, for a skip; ``what`` names
    what the test looked for (``no flux under /opt/flux-0.26``)."""
    recorded = status_dir() / component
    try:
        text = recorded.read_text(encoding="utf-8").strip()
    except OSError:
        text = ""
    if text:
        return f"{what}: {text}"
    archive = ARCHIVES.get(component, component)
    return (
        f"{what}: {component} was never built here; put {archive} in HPCBRIDGE_TEST_SOURCES "
        f"(default ../shared/vendor) and run, as root, bash scripts/build-schedulers.sh {component}"
    )
