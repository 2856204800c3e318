"""Every scheduler and transport the command-level tests run ``hpcbridge`` against.

A ``Place`` is the environment one ``python -m hpcbridge`` process gets to use
one scheduler one way - the mock; Debian's Slurm 22.05 locally and over SSH
(the CLI driver; over SSH by paramiko to containers/sshd, and by the OpenSSH
backend to containers/sshd-totp after one ``hpcbridge login``); flux-core (the
release ``tests.support.flux_cases`` picks) through its bindings and through its
commands - and how to see, without hpcbridge, which jobs that scheduler has and
which folders were staged.  A place whose component is absent skips with the
reason.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

from tests.support.slurm_clusters import DEBIAN_STATE, cluster_env, controller_up, jobs_named

#: one id per place, in the order the tests run them
PLACES = ("mock", "slurm-local", "slurm-ssh", "slurm-openssh", "flux-native", "flux-cli")


@dataclass
class Place:
    """One way to run the command, and what the scheduler there holds."""

    label: str
    scheduler: str
    #: variables on top of the test process's environment for each command
    env: Dict[str, str]
    #: the ids of the jobs named NAME the scheduler has (queue and history)
    named: Callable[[str], List[str]]
    #: the folders staged under the place's work folder
    folders: Callable[[], List[str]]
    #: an id this scheduler never had
    never: str = "987654321"
    extra: Dict[str, Any] = field(default_factory=dict)


def _local_folders(root: Path) -> Callable[[], List[str]]:
    return lambda: sorted(path.name for path in root.iterdir()) if root.is_dir() else []


def mock_place(state_dir: Path) -> Place:
    jobs = state_dir / "mock" / "jobs"

    def named(name: str) -> List[str]:
        found = []
        for spec in sorted(jobs.glob("*/spec.json")) if jobs.is_dir() else []:
            if json.loads(spec.read_text()).get("job_name") == name:
                found.append(spec.parent.name)
        return found

    env = {"HPCBRIDGE_SCHEDULER": "mock", "HPCBRIDGE_STATE_DIR": str(state_dir)}
    return Place("mock", "mock", env, named, _local_folders(state_dir / "jobs"))


def slurm_place(transport: str, request: pytest.FixtureRequest, tmp: Path) -> Iterator[Place]:
    """Debian's Slurm 22.05 (containers/slurm), its cluster's variables set in the process."""
    cluster = cluster_env(DEBIAN_STATE)
    if cluster is None or not controller_up(cluster):
        pytest.skip("Slurm test cluster not running: start containers/slurm/start.sh")
    env = {"HPCBRIDGE_SCHEDULER": "slurm", "HPCBRIDGE_SLURM_DRIVER": "cli"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in cluster.items():
            patch.setenv(name, value)  # the command and the checks here see the cluster
        if transport == "local":
            workdir = tmp / "jobs"
            env["HPCBRIDGE_REMOTE_WORKDIR"] = str(workdir)
            yield Place("slurm-local", "slurm", env, jobs_named, _local_folders(workdir))
            return
        if transport == "openssh":  # the TOTP sshd, through the session's one login
            login = request.getfixturevalue("totp_login")
            executor, server = login.executor, login.server
            made = executor.run(["mktemp", "-d", "/tmp/hpcbridge-test.XXXXXXXX"])
            assert made.ok, made.stderr
            workdir_text = made.stdout.strip()
            request.addfinalizer(lambda: executor.run(["rm", "-rf", "--", workdir_text]))
            env.update(login.env)
        else:
            executor = request.getfixturevalue("ssh_executor")
            server = request.getfixturevalue("ssh_server")
            workdir_text = request.getfixturevalue("ssh_remote_dir")
            env.update(ssh_env(server))
        env["HPCBRIDGE_COMMAND_ENV"] = f"SLURM_CONF={cluster['SLURM_CONF']}"
        env["HPCBRIDGE_REMOTE_WORKDIR"] = workdir_text

        def folders() -> List[str]:
            found = executor.run(["find", workdir_text, "-mindepth", "1", "-maxdepth", "1"])
            return sorted(line for line in found.stdout.splitlines() if line)

        label = f"slurm-{transport}"
        yield Place(label, "slurm", env, jobs_named, folders, extra={"server": server})


def ssh_env(server: Any) -> Dict[str, str]:
    """The variables that reach the sshd test server as its unprivileged user."""
    return {
        "HPCBRIDGE_TRANSPORT": "ssh",
        "HPCBRIDGE_SSH_HOST": server.host,
        "HPCBRIDGE_SSH_PORT": str(server.port),
        "HPCBRIDGE_SSH_USER": server.user,
        "HPCBRIDGE_SSH_KEY": server.key,
        "HPCBRIDGE_SSH_KNOWN_HOSTS": server.known_hosts,
    }


def flux_place(driver: str, broker: Any, tmp: Path) -> Place:
    """A broker of the tests' own, through the bindings (``native``) or the commands."""
    if driver == "native":
        from tests.support.flux_cases import native_bindings_or_skip

        native_bindings_or_skip(broker.flux)
    workdir = tmp / "jobs"
    env = {
        "HPCBRIDGE_SCHEDULER": "flux",
        "HPCBRIDGE_FLUX_URI": str(broker.uri),
        "HPCBRIDGE_FLUX_COMMAND": broker.flux,
        "HPCBRIDGE_FLUX_DRIVER": driver,
        "HPCBRIDGE_REMOTE_WORKDIR": str(workdir),
    }

    def named(name: str) -> List[str]:
        listed = broker.check(["jobs", "-a", "-n", "-o", "{id.f58} {name}"])
        return sorted(line.split()[0] for line in listed.splitlines() if line.split()[1:] == [name])

    return Place(f"flux-{driver}", "flux", env, named, _local_folders(workdir))


def clean_environment(patch: pytest.MonkeyPatch) -> None:
    """No HPCBRIDGE_/EXAMLOPS_/FLUX_URI setting of the test process reaches a command."""
    for name in list(os.environ):
        if name.startswith(("HPCBRIDGE_", "EXAMLOPS_")) or name == "FLUX_URI":
            patch.delenv(name)
    # the test clusters are the tests' own: no floor under the rounds a test asks for
    patch.setenv("HPCBRIDGE_MIN_POLL_INTERVAL", "0")
