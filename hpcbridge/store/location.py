"""Where the job store lives: SQLite's locks do not hold across hosts on a network
filesystem, so a database asked for there goes to a local disk instead
(``HPCBRIDGE_LOCAL_STATE_DIR``, default ``/var/tmp/hpcbridge-<uid>``), each record also
written as a file into the asked place (``journal``) for the other hosts."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

#: filesystem types (as ``/proc/self/mountinfo`` names them) shared between hosts
NETWORK_FILESYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "lustre",
        "gpfs",
        "beegfs",
        "cifs",
        "smb3",
        "smbfs",
        "ceph",
        "glusterfs",
        "9p",
        "afs",
        "panfs",
        "pvfs2",
        "orangefs",
        "wekafs",
    }
)


@dataclass(frozen=True)
class StoreLocation:
    """The database file used, the place asked for, and why they differ (or not)."""

    #: the SQLite file hpcbridge opens
    path: Path
    #: the place the settings name
    asked: Path
    #: the filesystem type of the asked place ("" when unknown)
    filesystem: str
    #: the folder of the asked place, where each record is also written (network only)
    shared: Optional[Path]

    @property
    def relocated(self) -> bool:
        return self.shared is not None

    def describe(self) -> str:
        """One line for ``hpcbridge doctor``."""
        if self.relocated:
            return (
                f"{self.path} on a local disk: {self.asked.parent} is on {self.filesystem}, "
                "where SQLite's locks do not hold across hosts; each record is also written "
                f"to {self.shared}, which other hosts read"
            )
        return f"{self.path} (on {self.filesystem or 'a local filesystem'}: used in place)"


def mounts(text: str) -> List[Tuple[str, str]]:
    """``(mount point, filesystem type)`` of each line of ``/proc/self/mountinfo``.

    A line is ``id parent major:minor root mountpoint options [tags] - fstype ...``;
    spaces in a mount point are written ``\\040``.
    """
    found: List[Tuple[str, str]] = []
    for line in text.splitlines():
        fields, separator, rest = line.partition(" - ")
        words = fields.split()
        if not separator or len(words) < 5 or not rest.split():
            continue
        point = words[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        found.append((point, rest.split()[0]))
    return found


def filesystem_of(path: Path, mount_table: Optional[str] = None) -> str:
    """The filesystem type of the mount holding ``path`` (its nearest existing parent)."""
    if mount_table is None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8") as handle:
                mount_table = handle.read()
        except OSError:
            return ""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    real = os.path.realpath(existing)
    best, kind = "", ""
    for point, fstype in mounts(mount_table):
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fstype
    return kind


def is_network(filesystem: str) -> bool:
    return filesystem in NETWORK_FILESYSTEMS or filesystem.startswith(("fuse", "nfs"))


def local_state_root(env: Optional[Mapping[str, str]] = None) -> Path:
    """Where state moved off a network filesystem goes."""
    env = os.environ if env is None else env
    named = env.get("HPCBRIDGE_LOCAL_STATE_DIR")
    return Path(named) if named else Path("/var/tmp") / f"hpcbridge-{os.getuid()}"


def local_folder_for(asked_folder: Path, env: Optional[Mapping[str, str]] = None) -> Path:
    """The local folder standing in for ``asked_folder`` (one per asked place)."""
    digest = hashlib.sha256(os.path.abspath(asked_folder).encode()).hexdigest()[:12]
    return local_state_root(env) / f"{asked_folder.name or 'state'}-{digest}"


def choose(asked: Path, mount_table: Optional[str] = None) -> StoreLocation:
    """The database to open for the place asked for (see the module docstring)."""
    asked = Path(os.path.abspath(asked))
    filesystem = filesystem_of(asked.parent, mount_table)
    if not is_network(filesystem):
        return StoreLocation(asked, asked, filesystem, None)
    local = local_folder_for(asked.parent) / asked.name
    return StoreLocation(local, asked, filesystem, asked.parent / "records")


def machine_folder(folder: Path, mount_table: Optional[str] = None) -> Path:
    """``folder`` itself on a local disk, else one folder of this machine's local disk
    by its name (``<local root>/<name>``): the state of something that belongs to the
    machine (the mock scheduler, whose ids are unique per machine), whatever shared
    place - or mount of it - asked for it."""
    folder = Path(os.path.abspath(folder))
    if is_network(filesystem_of(folder, mount_table)):
        return local_state_root() / folder.name
    return folder
