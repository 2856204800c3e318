"""The cap on queued jobs kept in the state folder (``store/caps.py``): shared by
processes, whole under concurrent writers, forgotten after its time."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List

from hpcbridge.store.caps import TTL, LimitCache
from tests.conftest import REPO


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_an_answer_is_kept_for_its_time_then_forgotten(tmp_path: Path) -> None:
    clock = Clock()
    cache = LimitCache(tmp_path, ttl=60, clock=clock)
    assert cache.get("k") == (False, None)
    cache.put("k", 50)
    cache.put("none", None)
    assert cache.get("k") == (True, 50)
    assert cache.get("none") == (True, None)  # no cap is an answer too
    clock.now += 59
    assert cache.get("k") == (True, 50)
    clock.now += 1
    assert cache.get("k") == (False, None)
    clock.now -= 3600  # read "in the future" (a clock set back): not trusted
    assert cache.get("k") == (False, None)
    assert TTL >= 60


def test_what_cannot_be_trusted_is_a_miss(tmp_path: Path) -> None:
    cache = LimitCache(tmp_path)
    for text in ("", "{", '{"key": "k"}', '{"key": "k", "cap": "50", "read": 1e12}', "[]"):
        cache.path("k").write_text(text)
        assert cache.get("k") == (False, None), text
    other = json.dumps({"key": "another", "cap": 5, "read": 1e12})
    cache.path("k").write_text(other)
    assert cache.get("k") == (False, None)


def test_a_folder_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    cache = LimitCache(blocked / "cache")
    cache.put("k", 5)
    assert cache.get("k") == (False, None)


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from hpcbridge.store.caps import LimitCache
    folder, cap, times = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    cache = LimitCache(folder)
    for _ in range(times):
        cache.put("cluster|me|acct", cap)
    print("done")
    """
)


def writers(folder: Path, caps: List[int], times: int) -> List[subprocess.Popen]:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    argv = [sys.executable, "-c", WRITER, str(folder)]
    return [
        subprocess.Popen([*argv, str(cap), str(times)], env=env, stdout=subprocess.PIPE)
        for cap in caps
    ]


def test_another_process_reads_what_one_wrote(tmp_path: Path) -> None:
    [writer] = writers(tmp_path, [42], 1)
    assert writer.communicate(timeout=60)[0].strip() == b"done"
    assert LimitCache(tmp_path).get("cluster|me|acct") == (True, 42)


def test_concurrent_writers_leave_one_whole_answer_at_every_read(tmp_path: Path) -> None:
    cache = LimitCache(tmp_path)
    running = writers(tmp_path, [1, 2, 3, 4], 300)
    seen: List[object] = []  # every read once the first answer is there: never a miss
    while any(process.poll() is None for process in running):
        found, cap = cache.get("cluster|me|acct")
        if found or seen:
            seen.append(cap if found else "a miss: a file read half written")
    for process in running:
        assert process.communicate(timeout=60)[0].strip() == b"done"
        assert process.returncode == 0
    assert set(seen) <= {1, 2, 3, 4}, set(seen)
    assert cache.get("cluster|me|acct")[1] in {1, 2, 3, 4}
    assert [path.name for path in tmp_path.iterdir()] == [cache.path("cluster|me|acct").name]
