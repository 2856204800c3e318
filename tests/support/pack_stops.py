"""Packs stopped every way their client can be - what the Slurm and Flux pack tests share.

Each way has a client of its own (``submit-many --pack`` of three tasks, no name given:
the one it is given is read from its stderr), all running at once: INT, TERM and HUP stop
the client, which releases its allocation itself; after SIGKILL, ``hpcbridge cancel NAME``
or ``hpcbridge wait NAME`` (which goes on with the pack to its end) does.  Each way, the
allocation is gone from the scheduler's queue within ``RELEASED_WITHIN`` seconds of the
signal (SIGKILL: of the end of ``cancel``/``wait``)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Dict, List, Optional, Tuple

from tests.support.cli import stoppable
from tests.support.flux_cases import write_script

#: each way out, and the client's exit code (SIGKILL: none of its own)
WAYS: Dict[str, Optional[int]] = {
    "INT": 130,
    "TERM": 143,
    "HUP": 129,
    "KILL-cancel": None,
    "KILL-wait": None,
}

#: seconds from the signal (SIGKILL: from the end of cancel/wait) to no allocation left
RELEASED_WITHIN = 10.0

TASKS = 3

#: the client's command and environment for a task script (``--pack`` and ``-v`` added)
Command = Callable[[Path, str], Tuple[List[str], Dict[str, str]]]


@dataclass
class Client:
    way: str
    folder: Path
    env: Dict[str, str]
    process: subprocess.Popen[bytes]
    stderr: IO[str]

    def said(self) -> str:
        return (self.folder / "stderr").read_text()

    def name_and_allocation(self) -> Tuple[str, str]:
        said = self.said()
        named = re.search(r"hpcbridge: pack (pack-[0-9a-f]{8}): ", said)
        asked = re.search(r"pack: allocation (\S+) asked for", said)
        assert named and asked, said
        return named.group(1), asked.group(1)


def start(command: Command, root: Path, pack: str) -> List[Client]:
    """One client per way, each of ``TASKS`` tasks that run until their ``go`` file is
    there; once each has a task running (its allocation holds its instance)."""
    clients = []
    for way in WAYS:
        folder = root / way
        go, ran = folder / "go", folder / "ran"
        task = write_script(
            folder, "task.sh", f'echo "$1" >> {ran}\nwhile [ ! -e {go} ]; do sleep 0.2; done\n'
        )
        argv, env = command(folder, task)
        stderr = open(folder / "stderr", "w")  # noqa: SIM115 - closed in stop_each
        process = subprocess.Popen(
            [*argv, "-v", "--pack", pack],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            preexec_fn=stoppable,
        )
        clients.append(Client(way, folder, env, process, stderr))
    deadline = time.monotonic() + 240
    for client in clients:
        while not (client.folder / "ran").exists():
            assert client.process.poll() is None, client.said()
            assert time.monotonic() < deadline, f"{client.way}: no task ran\n{client.said()}"
            time.sleep(0.2)
    return clients


def stop_each(clients: List[Client], gone: Callable[[str], bool]) -> Dict[str, float]:
    """Stop each client its way and check its allocation is released in time; for each
    way, how many seconds that took."""
    signalled = time.monotonic()
    for client in clients:
        client.process.send_signal(getattr(signal, "SIG" + client.way.split("-")[0]))
    took = {}
    try:
        for client in clients:
            client.process.wait(timeout=60)
            name, allocation = client.name_and_allocation()
            expected = WAYS[client.way]
            since = signalled
            if expected is not None:
                assert client.process.returncode == expected, (
                    f"{client.way}: exit {client.process.returncode}\n{client.said()}"
                )
                assert f"interrupted by SIG{client.way}" in client.said()
            else:
                assert client.process.returncode == -signal.SIGKILL, client.said()
                assert not gone(allocation), f"{client.way}: its allocation went with it"
                _after_kill(client, name)
                since = time.monotonic()
            while not gone(allocation):
                assert time.monotonic() < since + RELEASED_WITHIN, (
                    f"{client.way}: allocation {allocation} of pack {name} still there "
                    f"{RELEASED_WITHIN:.0f} s on\n{client.said()}"
                )
                time.sleep(0.2)
            took[client.way] = time.monotonic() - since
    finally:
        for client in clients:
            if client.process.poll() is None:
                client.process.kill()
                _release_left(client)  # a failed case holds no node the next case needs
            client.stderr.close()
            # a test broker has no cgroup: the tasks of a released Flux batch job can
            # outlive it, orphaned - let them end
            (client.folder / "go").touch()
    return took


def _release_left(client: Client) -> None:
    """``hpcbridge cancel NAME`` of a client the case had to kill, whatever it answers."""
    named = re.search(r"hpcbridge: pack (pack-[0-9a-f]{8}): ", client.said())
    if named:
        subprocess.run(
            [sys.executable, "-m", "hpcbridge", "cancel", named.group(1)],
            env=client.env,
            capture_output=True,
            timeout=120,
        )


def _after_kill(client: Client, name: str) -> None:
    """``cancel NAME``, or ``wait NAME`` with the tasks let go: it finishes the pack."""
    hpcbridge = [sys.executable, "-m", "hpcbridge"]
    if client.way == "KILL-cancel":
        done = subprocess.run(
            [*hpcbridge, "cancel", name],
            env=client.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert f"pack {name} cancelled: 1 allocation(s) released" in done.stdout
        return
    (client.folder / "go").touch()
    done = subprocess.run(
        [*hpcbridge, "wait", name, "--poll-interval", "0.5"],
        env=client.env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    assert [line.split()[-1] for line in done.stdout.splitlines()] == ["COMPLETED"] * TASKS
