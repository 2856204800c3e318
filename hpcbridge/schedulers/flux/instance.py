"""Asking an instance about itself: version, attributes, configuration, expiration, URIs.

Pure argv builders and parsers; ``cli.py`` runs them, ``queues.py`` and
``versions.py`` parse the queue and version answers.
"""

from __future__ import annotations

import json
from typing import List, Optional


def version_argv(flux: str) -> List[str]:
    return [flux, "version"]


def getattr_argv(flux: str, name: str) -> List[str]:
    return [flux, "getattr", name]


def config_get_argv(flux: str) -> List[str]:
    return [flux, "config", "get"]


def queue_list_argv(flux: str) -> List[str]:
    return [flux, "queue", "list"]


def resource_r_argv(flux: str) -> List[str]:
    # A C subcommand (fast) present in every release; holds R with the
    # instance's execution.expiration when it runs inside a time-limited job.
    return [flux, "kvs", "get", "resource.R"]


def uri_argv(flux: str, target: str) -> List[str]:
    return [flux, "uri", "--remote", target]


def hostname_argv() -> List[str]:
    return ["uname", "-n"]


def parse_expiration(resource_r: str) -> Optional[float]:
    """``execution.expiration`` of an R document; ``None`` when unlimited (0)."""
    data = json.loads(resource_r)
    expiration = float(((data or {}).get("execution") or {}).get("expiration") or 0.0)
    return expiration if expiration > 0 else None


def parse_uri_output(stdout: str) -> Optional[str]:
    """The URI ``flux uri`` printed (its last line), if any."""
    lines = stdout.strip().splitlines()
    return lines[-1].strip() if lines and lines[-1].strip() else None
