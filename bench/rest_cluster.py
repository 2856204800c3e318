"""Slurm 25.11 behind slurmrestd, on a cluster of the bench's own: the REST rows (issue 49).

``rest_cluster()`` starts a Slurm 25.11 cluster of its own (tests/support's ``own_cluster``:
``rbench``, ports 17300-17302, auth/jwt, accounting in a slurmdbd and MariaDB of its own),
then slurmrestd with the project's ``containers/slurmrestd/start.sh`` (as ``hpcbtest``:
rest_auth/local on a Unix socket, rest_auth/jwt on 127.0.0.1:17303), and makes root a
token.  The bench runs as root and rest_auth/local answers only the daemon's own user, so
the REST rows are measured over JWT on 127.0.0.1.  slurmrestd, then the cluster, are
stopped at the end.  The raw, CLI and pyslurm rows of the same group run on that cluster
too: every ratio is taken on one controller.

``group_rows`` measures a scenario's 25.11 group in a child process
(``python -m bench.rest_cluster MODULE.FUNCTION QUICK WORKDIR``): libslurm reads one
slurm.conf per process, and the bench's own process may hold pyslurm for the shared
25.11 cluster.

``HPCBRIDGE_BENCH_REST``: unset - these groups run in a full run and are skipped in
``--quick`` (the cluster's start and stop take ~10 s: the smoke test's 4-5 s would become
~12); ``1`` - in ``--quick`` too; ``0`` - never; ``only`` - only these groups (the
scenario's other clusters are skipped).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Tuple

from .common import REPO, SLURM_PREFIX, Skip, skipped_row

#: the bench's own cluster: its name, first port, and slurmrestd's JWT listener
CLUSTER, PORT = "rbench", 17300
LISTEN = f"127.0.0.1:{PORT + 3}"
#: the ordinary user slurmrestd runs as (it refuses root and SlurmUser)
USER = "hpcbtest"
#: root's token (``scontrol token``): longer than any scenario
TOKEN_SECONDS = 4 * 3600
#: the group's label in the tables
LABEL = "25.11"
#: the drivers its rows compare: driver -> the rows' suffix
DRIVERS = {"cli": "CLI driver", "native": "pyslurm driver", "rest": "REST driver"}
#: what the notes say was measured
LISTENER = (
    f"slurmrestd 25.11 started by containers/slurmrestd/start.sh as {USER} on a Slurm 25.11 "
    f"cluster of the bench's own; the REST driver measured over JWT (rest_auth/jwt, root's "
    f"token from scontrol token) on http://{LISTEN}, not over the Unix socket (rest_auth/local "
    "answers only the daemon's user; the bench runs as root)"
)

#: (group, contender, kind) of the rows a group would have made, for its skipped rows
Planned = Sequence[Tuple[str, str, str]]


def wanted(quick: bool) -> str:
    """Why the REST groups are not run now; empty when they are."""
    mode = os.environ.get("HPCBRIDGE_BENCH_REST", "")
    if mode == "0":
        return "HPCBRIDGE_BENCH_REST=0"
    if quick and mode not in ("1", "only"):
        return "--quick: the 25.11 REST group starts a cluster of its own (HPCBRIDGE_BENCH_REST=1)"
    return ""


def only() -> bool:
    """The REST groups alone (``HPCBRIDGE_BENCH_REST=only``): the other clusters skipped."""
    return os.environ.get("HPCBRIDGE_BENCH_REST") == "only"


def _absent() -> str:
    restd = Path(SLURM_PREFIX) / "sbin" / "slurmrestd"
    if not restd.exists():
        return f"no slurmrestd under {SLURM_PREFIX} (scripts/build-schedulers.sh builds it)"
    if os.geteuid() != 0:
        return "a cluster of the bench's own and slurmrestd need root"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return f"no user {USER} to run slurmrestd as"
    return ""


def _restd(action: str, variables: Dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(REPO / "containers" / "slurmrestd" / action)],
        env={**os.environ, **variables},
        capture_output=True,
        text=True,
        timeout=180,
    )


@contextlib.contextmanager
def rest_cluster() -> Iterator[Dict[str, str]]:
    """The cluster's environment (SLURM_CONF, its commands first on PATH) with
    ``HPCBRIDGE_SLURM_REST_URL`` and root's ``SLURM_JWT``; ``Skip`` saying why not."""
    reason = _absent()
    if reason:
        raise Skip(reason)
    import pytest

    from tests.support.slurm_clusters import own_cluster

    started_at = time.perf_counter()
    with contextlib.ExitStack() as stack:
        try:
            env = stack.enter_context(
                own_cluster(CLUSTER, PORT, prefix=SLURM_PREFIX, jwt=True, accounting=True)
            )
        except pytest.skip.Exception as exc:
            raise Skip(str(exc)) from exc
        except AssertionError as exc:
            raise Skip(f"the bench's own 25.11 cluster did not start: {exc}"[:600]) from exc
        variables = {
            "HPCBRIDGE_SLURM_PREFIX": SLURM_PREFIX,
            "HPCBRIDGE_SLURM_STATE": env["HPCBRIDGE_SLURM_STATE"],
            "HPCBRIDGE_SLURMRESTD_LISTEN": LISTEN,
        }
        started = _restd("start.sh", variables)
        stack.callback(_restd, "stop.sh", variables)
        if started.returncode != 0:
            said = (started.stdout + started.stderr).strip()[-600:]
            raise Skip(f"containers/slurmrestd/start.sh failed: {said}")
        url = (Path(env["HPCBRIDGE_SLURM_STATE"]) / "restd" / "tcp_url").read_text().strip()
        made = subprocess.run(
            ["scontrol", "token", "username=root", f"lifespan={TOKEN_SECONDS}"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        if made.returncode != 0 or "SLURM_JWT=" not in made.stdout:
            raise Skip(f"scontrol token failed: {made.stderr.strip()[:300]}")
        env["SLURM_JWT"] = made.stdout.strip().partition("=")[2]
        env["HPCBRIDGE_SLURM_REST_URL"] = url
        env["HPCBRIDGE_BENCH_REST_SETUP_S"] = f"{time.perf_counter() - started_at:.1f}"
        yield env


def group_rows(function: str, quick: bool, workdir: Path, planned: Planned) -> List[Dict]:
    """The rows ``bench.scenarios.<function>(quick, workdir)`` measures on the bench's own
    25.11 cluster, in a child process; the planned rows skipped, with the reason, where it
    cannot run."""
    try:
        reason = wanted(quick)
        if reason:
            raise Skip(reason)
        with rest_cluster() as env:
            return _in_child(function, quick, workdir, env)
    except Skip as exc:
        return [
            skipped_row(name, str(exc), group=group, kind=kind) for group, name, kind in planned
        ]


def _in_child(function: str, quick: bool, workdir: Path, env: Dict[str, str]) -> List[Dict]:
    python_path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "bench.rest_cluster", function, str(int(quick)), str(workdir)],
        cwd=REPO,
        env={**os.environ, **env, "PYTHONPATH": python_path},
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise Skip(f"the 25.11 group's process failed: {done.stderr.strip()[-600:]}")
    found = json.loads(lines[-1])
    if "skip" in found:
        raise Skip(found["skip"])
    setup = float(env["HPCBRIDGE_BENCH_REST_SETUP_S"])
    for item in found["rows"]:
        item["cluster_setup_s"] = setup
    return found["rows"]


def _child(function: str, quick: bool, workdir: Path) -> Dict[str, Any]:
    module, _, name = function.rpartition(".")
    measure = getattr(importlib.import_module(f"bench.scenarios.{module}"), name)
    try:
        return {"rows": measure(quick, workdir)}
    except Skip as exc:
        return {"skip": str(exc)}


if __name__ == "__main__":  # one 25.11 group: MODULE.FUNCTION QUICK WORKDIR
    print(json.dumps(_child(sys.argv[1], sys.argv[2] == "1", Path(sys.argv[3]))))
