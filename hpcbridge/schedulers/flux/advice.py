"""What to do when Flux's Python bindings cannot be used: the command that fixes it.

Pure: from the import error's text and the releases seen, one next step.
"""

from __future__ import annotations

import re
from typing import Optional

#: modules the bindings import, and the PyPI package that provides each
_PACKAGE_OF = {
    "_cffi_backend": "cffi",
    "cffi": "cffi",
    "ply": "ply",
    "yaml": "pyyaml",
    "jsonschema": "jsonschema",
}

_MISSING = re.compile(r"No module named '([\w.]+)'")


def flux_python_line(broker_version: Optional[str]) -> str:
    """The pip line for the bindings of the broker's release."""
    if broker_version:
        return f"pip install flux-python=={broker_version}"
    return "pip install flux-python==<the broker's version, from 'flux version'>"


def bindings_advice(error: str, broker_version: Optional[str]) -> str:
    """The next step for bindings that failed to import with ``error``."""
    missing = _MISSING.findall(error)
    # The last name is the deepest: "No module named 'flux'; with <dir>: No module named 'ply'"
    # means the bindings beside flux were found and lack ply.
    name = missing[-1] if missing else ""
    top = name.split(".")[0]
    if top in _PACKAGE_OF:
        return (
            f"pip install {_PACKAGE_OF[top]} (the bindings installed beside flux need it; "
            f"or {flux_python_line(broker_version)})"
        )
    if top in ("flux", "_flux"):
        return flux_python_line(broker_version)
    if "libflux" in error or "cannot open shared object" in error:
        return (
            f"{flux_python_line(broker_version)}, or add flux-core's lib directory to "
            "LD_LIBRARY_PATH"
        )
    if "driver='cli'" in error or "transport is" in error:
        return ""  # not a failure: the CLI is the way here
    return f"{flux_python_line(broker_version)} into this Python"


def release_advice(label: str, other: str, broker: str) -> str:
    """Releases that disagree: say both and how to align them."""
    fix = (
        flux_python_line(broker)
        if label == "the Python bindings"
        else (f"set HPCBRIDGE_FLUX_COMMAND to the flux of release {broker}")
    )
    return (
        f"{label} are {other} but the broker is {broker}: mixed releases fail with "
        f"'Protocol error' or 'invalid payload', or hang; {fix}"
    )
