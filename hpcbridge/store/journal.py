"""Job records as files in a shared folder, for a store kept on a local disk: one JSON file
per job, ``<shared>/<writer>/<key>.json``, written whole and renamed (atomic on NFS, Lustre,
GPFS, sshfs) by its one writer, so no lock is needed; the other writers' files are read."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterable, List, Optional

from .records import COLUMNS, JobRecord, decode_row, encode_record

log = logging.getLogger("hpcbridge")

#: least seconds between two looks at the other writers' folders
LOOK_EVERY = 1.0
#: seconds within which a file or folder time may not yet show a change (coarse clocks)
SETTLED = 2.0


def writer_name(database: Path) -> str:
    """This host and this database (two mounts of one folder are two writers)."""
    digest = hashlib.sha256(str(database).encode()).hexdigest()[:10]
    return f"{socket.gethostname()}-{digest}"


def file_name(scheduler: str, host: str, job_id: str) -> str:
    """A file name for one job: readable, and unique per (scheduler, host, id)."""
    digest = hashlib.sha256(f"{scheduler}\0{host}\0{job_id}".encode()).hexdigest()[:12]
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in job_id)[:40]
    return f"{scheduler}-{safe}-{digest}.json"


def encode(record: JobRecord) -> str:
    """A record as a JSON object: its columns by name, as the database holds them."""
    return json.dumps(dict(zip(COLUMNS, encode_record(record))), ensure_ascii=False)


def decode(text: str) -> JobRecord:
    """The record of ``encode`` (a column it lacks: ``None``; one it does not know: left)."""
    data = json.loads(text)
    return decode_row([data.get(name) for name in COLUMNS])


class Journal:
    """The shared folder of one relocated store: write ours, read the others'."""

    def __init__(self, folder: Path, database: Path) -> None:
        self.folder = folder
        self.writer = writer_name(database)
        self.mine = folder / self.writer
        #: folder name -> the modification time it had when last read
        self._seen: Dict[str, float] = {}
        self._looked = -float("inf")

    def write(self, records: Iterable[JobRecord]) -> None:
        """Each record as its own file (replaced whole); a failure is logged, not raised:
        the local database already holds the record."""
        try:
            self.mine.mkdir(parents=True, exist_ok=True)
            for record in records:
                target = self.mine / file_name(record.scheduler, record.host, record.job_id)
                handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=self.mine)
                with os.fdopen(handle, "w", encoding="utf-8") as stream:
                    stream.write(encode(record))
                os.replace(temporary, target)
        except OSError as exc:
            log.warning("cannot write job records to %s: %s", self.folder, exc)

    def others(self, force: bool = False) -> List[JobRecord]:
        """The records of the other writers whose folder changed since the last look."""
        now = time.monotonic()
        if not force and now - self._looked < LOOK_EVERY:
            return []
        self._looked = now
        found: List[JobRecord] = []
        try:
            writers = [entry for entry in os.scandir(self.folder) if entry.is_dir()]
        except OSError:
            return []
        for writer in writers:
            if writer.name == self.writer:
                continue
            try:
                changed = writer.stat().st_mtime
            except OSError:
                continue
            seen = self._seen.get(writer.name)
            # A change within the clock's resolution of the last look may not move the
            # folder's time: such a folder is read again.
            if seen is not None and changed <= seen and time.time() - changed > SETTLED:
                continue
            found.extend(self._read(Path(writer.path), seen))
            self._seen[writer.name] = changed
        return found

    def _read(self, folder: Path, since: Optional[float]) -> List[JobRecord]:
        """The records of ``folder`` changed since ``since`` (all, the first time)."""
        records = []
        try:
            entries = [e for e in os.scandir(folder) if e.name.endswith(".json")]
        except OSError:
            return []
        for entry in entries:
            try:
                if since is not None and entry.stat().st_mtime < since - SETTLED:
                    continue
                with open(entry.path, encoding="utf-8") as stream:
                    records.append(decode(stream.read()))
            except (OSError, ValueError, TypeError) as exc:
                log.debug("skipping job record %s: %s", entry.path, exc)
        return records


def journal_for(shared: Optional[Path], database: Path) -> Optional[Journal]:
    return Journal(shared, database) if shared is not None else None
