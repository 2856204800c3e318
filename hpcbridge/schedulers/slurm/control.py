"""scancel and scontrol (a job's record, the cluster's config, the version). Pure, no I/O."""

from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple


def scancel_argv(job_ids: Sequence[str]) -> List[str]:
    """scancel takes plain ids and array tasks; unknown or finished ids exit 0."""
    return ["scancel", *dict.fromkeys(job_ids)]


def scontrol_show_job_argv(job_id: str) -> List[str]:
    return ["scontrol", "--oneliner", "show", "job", job_id]


def parse_scontrol_record(text: str) -> Dict[str, str]:
    """``Key=Value`` pairs of a ``scontrol show`` record (one-line or not).

    Values may hold spaces only in a few fields (e.g. ``Comment``); the pairs
    are split at each `` Key=`` boundary.
    """
    pairs: Dict[str, str] = {}
    for match in re.finditer(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=(\S*)", text):
        pairs.setdefault(match.group(1), match.group(2))
    return pairs


def output_of_record(fields: Mapping[str, str]) -> Optional[str]:
    """A job's output file from its ``scontrol show job`` record, if it has one."""
    path = fields.get("StdOut")
    return path if path and path != "(null)" else None


def scontrol_config_argv() -> List[str]:
    return ["scontrol", "show", "config"]


def parse_scontrol_config(text: str) -> Dict[str, str]:
    """``scontrol show config``: ``Name = value`` lines."""
    values: Dict[str, str] = {}
    for line in text.splitlines():
        name, separator, value = line.partition("=")
        if separator and name.strip() and " " not in name.strip():
            values[name.strip()] = value.strip()
    return values


def max_array_size(config: Mapping[str, str], default: int = 1001) -> int:
    """``MaxArraySize``: an array may use indices 0 .. MaxArraySize-1."""
    text = config.get("MaxArraySize", "")
    match = re.match(r"\d+", text)
    return int(match.group(0)) if match else default


def scontrol_version_argv() -> List[str]:
    return ["scontrol", "--version"]


def parse_version(text: str) -> Optional[Tuple[int, ...]]:
    """``slurm-wlm 22.05.8`` / ``slurm 23.11.1`` -> ``(22, 5, 8)``."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        return None
    return tuple(int(part) for part in match.groups() if part is not None)


def format_version(version: Tuple[int, ...]) -> str:
    """``(22, 5, 8)`` -> ``22.05.8``, Slurm's own spelling."""
    parts = [str(version[0])] + [f"{version[1]:02d}"] + [str(p) for p in version[2:]]
    return ".".join(parts)
