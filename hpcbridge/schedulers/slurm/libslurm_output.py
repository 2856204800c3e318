"""What libslurm writes to the process's stderr while pyslurm calls it, caught.

libslurm logs its own errors straight to file descriptor 2 (``python: error:
invalid partition specified: nosuchpart``), beside the exception pyslurm
raises: on a user's terminal, next to hpcbridge's one-line error.  ``caught``
points fd 2 at a temporary file around one call and hands back libslurm's
lines (``<program>: error: ...``) for the log or the raised error's message.

fd 2 belongs to the whole process: one call is caught at a time (a lock), and
whatever else is written meanwhile - another thread's output, which cannot be
told apart by its writer - is written on to the real stderr once the call
returns, late but not lost.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from contextlib import contextmanager
from typing import IO, Iterator, List, Optional, Tuple

#: a line of libslurm's log: the program's name, the level, the message
_LOG_LINE = re.compile(r"^\S+: (?:error|fatal|warning|info|verbose|debug\d*): (?P<message>.*)$")

_lock = threading.Lock()
#: one temporary file per process, emptied before each call
_sink: Optional[IO[bytes]] = None


def split(text: str) -> Tuple[List[str], str]:
    """libslurm's messages (their level and program name stripped), and the rest of
    ``text`` as it was written.  Pure."""
    messages: List[str] = []
    rest: List[str] = []
    for line in text.splitlines(keepends=True):
        match = _LOG_LINE.match(line.rstrip("\n"))
        if match:
            messages.append(match.group("message").strip())
        else:
            rest.append(line)
    return messages, "".join(rest)


@contextmanager
def caught(messages: List[str]) -> Iterator[None]:
    """Run the block with fd 2 caught; libslurm's lines are appended to ``messages``
    when it ends (raised or not).  Where fd 2 cannot be redirected (closed), the
    block runs as it is."""
    global _sink
    with _lock:
        try:
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):  # no stderr, or a closed one
            pass
        try:
            if _sink is None:
                _sink = tempfile.TemporaryFile()  # noqa: SIM115 - kept for the process's life
            sink = _sink.fileno()
            os.ftruncate(sink, 0)
            os.lseek(sink, 0, os.SEEK_SET)
            saved: Optional[int] = os.dup(2)
        except OSError:
            saved = None
        if saved is None:
            yield
            return
        os.dup2(sink, 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()  # another thread's Python output, into the file too
            except (AttributeError, OSError, ValueError):
                pass
            os.dup2(saved, 2)
            os.close(saved)
            os.lseek(sink, 0, os.SEEK_SET)
            text = _read_all(sink).decode("utf-8", errors="replace")
            found, rest = split(text)
            messages.extend(found)
            if rest:
                _write_all(2, rest.encode("utf-8", errors="replace"))


def _read_all(fd: int) -> bytes:
    chunks: List[bytes] = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _write_all(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # the real stderr is gone: nothing to write to
