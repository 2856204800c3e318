"""The Slurm test clusters the integration tests run against, found like flux-core is.

* Debian's Slurm 22.05 (``containers/slurm/start.sh``, state ``HPCBRIDGE_SLURM_STATE``,
  default ``/tmp/hpcbridge-slurm``): the CLI driver, locally and over SSH.
* A Slurm built under a prefix (``HPCBRIDGE_TEST_SLURM_PREFIX``, default
  ``/opt/slurm-25.11``; started with ``HPCBRIDGE_SLURM_PREFIX=<prefix> start.sh``,
  state ``HPCBRIDGE_TEST_SLURM_PREFIX_STATE``, default ``/tmp/hpcbridge-slurm-2511``):
  the pyslurm driver and the CLI driver, locally, and the CLI driver over the OpenSSH
  backend.  Its own commands come first on ``PATH`` (a 22.05 ``sbatch`` cannot talk to a
  25.11 controller), over SSH too (``remote_command_env``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import pwd
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from hpcbridge.settings.config import Settings
from hpcbridge.store.jobs import JobStore
from hpcbridge.transports.local import LocalExecutor
from tests.support.components import absent_reason

SKIP = "Slurm test cluster not running: start containers/slurm/start.sh"

PREFIX = os.environ.get("HPCBRIDGE_TEST_SLURM_PREFIX", "/opt/slurm-25.11")
#: the state folder start.sh gives that prefix: /tmp/hpcbridge-slurm-<digits of its name>
PREFIX_STATE = os.environ.get(
    "HPCBRIDGE_TEST_SLURM_PREFIX_STATE",
    "/tmp/hpcbridge-slurm-" + "".join(ch for ch in Path(PREFIX).name if ch.isdigit()),
)


@dataclass(frozen=True)
class Target:
    """One cluster, the driver and the transport the tests use with it."""

    label: str
    #: the folder holding the cluster's env.sh
    state: str
    driver: str
    #: "local", "ssh" (paramiko) or "openssh" (the OpenSSH backend, after one login);
    #: over SSH a prefix's commands are put first on PATH (``remote_command_env``)
    transport: str = "local"


DEBIAN_STATE = os.environ.get("HPCBRIDGE_SLURM_STATE", "/tmp/hpcbridge-slurm")

TARGETS: Dict[str, Target] = {
    "22.05-cli": Target("22.05-cli", DEBIAN_STATE, "cli"),
    "22.05-cli-ssh": Target("22.05-cli-ssh", DEBIAN_STATE, "cli", "ssh"),
    "25.11-native": Target("25.11-native", PREFIX_STATE, "native"),
    "25.11-cli": Target("25.11-cli", PREFIX_STATE, "cli"),
}

#: the clusters over the OpenSSH backend (containers/sshd-totp, after one ``hpcbridge
#: login``), the CLI driver: test_slurm_adapter's cases run on them too
OPENSSH_TARGETS: Dict[str, Target] = {
    "22.05-cli-openssh": Target("22.05-cli-openssh", DEBIAN_STATE, "cli", "openssh"),
    "25.11-cli-openssh": Target("25.11-cli-openssh", PREFIX_STATE, "cli", "openssh"),
}


def remote_command_env(env: Dict[str, str]) -> Dict[str, str]:
    """What a command over SSH needs to reach the cluster of ``env``
    (``HPCBRIDGE_COMMAND_ENV``): its SLURM_CONF, and for a Slurm built under a prefix
    its own commands first on PATH - the SSH test user's are Debian's 22.05, as a site's
    users get another release's commands by a module."""
    wanted = {"SLURM_CONF": env["SLURM_CONF"]}
    if env.get("HPCBRIDGE_SLURM_BIN"):
        wanted["PATH"] = f"{env['HPCBRIDGE_SLURM_BIN']}:/usr/local/bin:/usr/bin:/bin"
    return wanted


def cluster_env(state: Optional[str] = None) -> Optional[Dict[str, str]]:
    """SLURM_CONF (and friends) from the cluster's env file; the process's SLURM_CONF
    wins for the default cluster.  ``PATH`` gets the cluster's own commands first."""
    default = state is None
    state = state or os.environ.get("HPCBRIDGE_SLURM_STATE", "/tmp/hpcbridge-slurm")
    env_file = Path(state) / "env.sh"
    found: Dict[str, str] = {}
    if env_file.exists():
        for line in env_file.read_text().splitlines():
            parts = shlex.split(line, comments=True)
            if len(parts) == 2 and parts[0] == "export" and "=" in parts[1]:
                name, value = parts[1].split("=", 1)
                if "$" not in value:  # PATH="$HPCBRIDGE_SLURM_BIN:$PATH" is built below
                    found[name] = value
    if default and os.environ.get("SLURM_CONF"):
        found["SLURM_CONF"] = os.environ["SLURM_CONF"]
    if found.get("HPCBRIDGE_SLURM_BIN"):
        found["PATH"] = f"{found['HPCBRIDGE_SLURM_BIN']}{os.pathsep}{os.environ.get('PATH', '')}"
    conf = found.get("SLURM_CONF")
    return found if conf and os.path.exists(conf) else None


def run_slurm(argv: list, env: Dict[str, str], timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout
    )


def controller_up(env: Dict[str, str]) -> bool:
    try:
        ping = run_slurm(["scontrol", "ping"], env)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return ping.returncode == 0 and "is UP" in ping.stdout


def unusable_nodes(env: Dict[str, str]) -> str:
    """Nodes drained or down (e.g. "Kill task failed" after an unkillable step)."""
    out = run_slurm(["sinfo", "--noheader", "--Node", "--format=%N %T %E"], env)
    bad = [
        line
        for line in out.stdout.splitlines()
        if any(word in (line.split() + ["", ""])[1] for word in ("drain", "down", "fail"))
    ]
    return "; ".join(bad)


def target_skip_reason(target: Target, env: Optional[Dict[str, str]]) -> Optional[str]:
    """Why this target cannot run here; None when it can."""
    if target.state == PREFIX_STATE and not os.path.isdir(PREFIX):
        return absent_reason("slurm-25.11", f"no Slurm built under {PREFIX}")
    if env is None or not controller_up(env):
        if target.state == PREFIX_STATE:
            return (
                f"the {target.label.split('-')[0]} test cluster is not running: "
                f"HPCBRIDGE_SLURM_PREFIX={PREFIX} bash containers/slurm/start.sh"
            )
        return SKIP
    if target.driver == "native":
        try:
            version = importlib.metadata.version("pyslurm")
        except importlib.metadata.PackageNotFoundError:
            return absent_reason("pyslurm", f"pyslurm not installed for {PREFIX}")
        if not version.startswith(Path(PREFIX).name.split("-")[-1] + "."):
            return f"pyslurm {version} is not built for {PREFIX}"
    return None


# -- what the Slurm test modules share ------------------------------------------------


def cluster_for(target: Target) -> Iterator[Dict[str, str]]:
    env = cluster_env(target.state)
    reason = target_skip_reason(target, env)
    if reason:
        pytest.skip(reason)
    assert env is not None
    bad = unusable_nodes(env)
    if bad:  # every job would stay PENDING: say why at once instead of timing out
        pytest.fail(
            f"Slurm test cluster node not usable: {bad} "
            "(scontrol update nodename=<node> state=resume)"
        )
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)  # the local executor's commands (and pyslurm) see it
        patch.setenv("HPCBRIDGE_SLURM_DRIVER", target.driver)
        yield {**env, "HPCBRIDGE_SLURM_DRIVER": target.driver}


def make_adapter(
    env: Dict[str, str],
    root: Path,
    executor: Any = None,
    remote_workdir: Optional[str] = None,
    **kwargs: Any,
) -> RealSlurmAdapter:
    # Status rounds every second: the cases watch jobs change state (the test cluster is
    # ours; the polite rate has cases of its own).
    settings = Settings.from_env(
        env=dict(env),
        state_dir=str(root / "state"),
        scheduler="slurm",
        poll_interval=1.0,
        min_poll_interval=0.0,  # the test cluster is ours: no floor under the cases' rounds
    )
    made = RealSlurmAdapter(
        executor=executor if executor is not None else LocalExecutor(default_timeout=60),
        remote_workdir=remote_workdir or str(root / "jobs"),
        settings=settings,
        store=JobStore(root / "state" / "jobs.db"),
        **kwargs,
    )
    wanted = env.get("HPCBRIDGE_SLURM_DRIVER")
    session = made.open()
    assert wanted in (None, session.driver.name), session.choice
    return made


def executor_for(kind: str, request: pytest.FixtureRequest) -> Any:
    if kind == "local":
        return LocalExecutor(default_timeout=60)
    return request.getfixturevalue(f"{kind}_executor")  # e.g. an ``ssh_executor`` fixture


def squeue_knows(job_id: str) -> bool:
    out = subprocess.run(
        ["squeue", "--noheader", "--states=all", f"--jobs={job_id},{job_id}", "--format=%i"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return bool(out.stdout.strip())


def sdiag_reset(env: Dict[str, str]) -> None:
    """Zero slurmctld's RPC counters (``sdiag --reset``, as root or SlurmUser)."""
    result = run_slurm(["sdiag", "--reset"], env)
    assert result.returncode == 0, result.stderr


def rpc_counts(env: Dict[str, str]) -> Dict[str, int]:
    """slurmctld's RPC counts by message type since the last reset (``sdiag``)."""
    result = run_slurm(["sdiag"], env)
    assert result.returncode == 0, result.stderr
    counts: Dict[str, int] = {}
    in_types = False
    for line in result.stdout.splitlines():
        if line.startswith("Remote Procedure Call statistics by message type"):
            in_types = True
            continue
        if line.startswith("Remote Procedure Call statistics by user"):
            break
        words = line.split()
        if in_types and words and words[0].startswith(("REQUEST_", "MESSAGE_", "RESPONSE_")):
            count = next((w for w in words if w.startswith("count:")), "count:0")
            counts[words[0]] = int(count.split(":", 1)[1])
    return counts


#: the RPCs a status round costs the controller (squeue of a list, of one id, the light
#: one, and ``squeue --me`` of a user who is not root: its own jobs' info)
JOB_INFO_RPCS = (
    "REQUEST_JOB_INFO",
    "REQUEST_JOB_INFO_SINGLE",
    "REQUEST_JOB_STATE",
    "REQUEST_JOB_USER_INFO",
)


def job_info_rpcs(env: Dict[str, str]) -> int:
    counts = rpc_counts(env)
    return sum(counts.get(name, 0) for name in JOB_INFO_RPCS)


SLURM_DIR = Path(__file__).resolve().parents[2] / "containers" / "slurm"

#: what ``scripts/build-schedulers.sh`` stamps in a prefix: the configure line of its build
CONFIGURE_STAMP = ".hpcbridge-configure"


def several_nodes_absent(prefix: Optional[str]) -> Optional[str]:
    """Why a cluster of several nodes cannot run on this host with the Slurm of
    ``prefix`` (Debian's 22.05 without one); None when it can: several slurmd on one host
    need ``--enable-multiple-slurmd`` in the configure line stamped in the prefix."""
    if not prefix:
        return (
            "Debian's Slurm 22.05 is not built with --enable-multiple-slurmd: "
            "several nodes need a prefix's Slurm"
        )
    try:
        configured = (Path(prefix) / CONFIGURE_STAMP).read_text(encoding="utf-8")
    except OSError:
        configured = ""
    if "--enable-multiple-slurmd" in configured.split():
        return None
    return (
        f"the Slurm under {prefix} is not built with --enable-multiple-slurmd (its "
        f"{CONFIGURE_STAMP} says {configured.strip() or 'nothing'!r}): as root, "
        f"HPCBRIDGE_TEST_SLURM_PREFIX={prefix} bash scripts/build-schedulers.sh slurm-25.11 "
        "rebuilds it"
    )


def read_env_file(state: str) -> Optional[Dict[str, str]]:
    """The variables a cluster's ``env.sh`` exports (``None`` until it is up)."""
    env_file = Path(state) / "env.sh"
    if not env_file.exists():
        return None
    found: Dict[str, str] = {}
    for line in env_file.read_text().splitlines():
        parts = shlex.split(line, comments=True)
        if len(parts) == 2 and parts[0] == "export" and "=" in parts[1]:
            name, value = parts[1].split("=", 1)
            found[name] = value
    return found if found.get("SLURM_CONF") else None


@contextlib.contextmanager
def own_cluster(
    name: str,
    port_base: int,
    *,
    prefix: Optional[str] = None,
    extra_conf: str = "",
    users: str = "",
    cpus: int = 8,
    jwt: bool = False,
    accounting: bool = False,
    nodes: int = 1,
) -> Iterator[Dict[str, str]]:
    """A Slurm cluster of a test module's own, beside the shared ones.

    Its own state folder (``/tmp/hpcbridge-slurm-<name>``), ports (``port_base`` ..
    +1+``nodes``), munge and cluster name: what the module does to it (a restart, a limit,
    counting its RPCs with ``sdiag``) touches no other test; ``cpus``: each node's CPUs
    (jobs are not pinned: more than the machine has run side by side); ``jwt``: auth/jwt
    beside munge (``HPCBRIDGE_SLURM_JWT``, for slurmrestd's tokens); ``accounting``: a
    slurmdbd and a MariaDB of its own (else none); ``nodes``: more than one are ``n1``.. on
    this host, a slurmd each (a ``prefix`` built with ``--enable-multiple-slurmd``).
    Stopped at the end.  Skips, saying why, without root or without the Slurm to run.
    """
    if os.geteuid() != 0:
        pytest.skip("a Slurm cluster of its own needs root (containers/slurm/start.sh)")
    if prefix and not os.path.isdir(prefix):
        pytest.skip(absent_reason("slurm-25.11", f"no Slurm built under {prefix}"))
    if nodes > 1:
        reason = several_nodes_absent(prefix)
        if reason:
            pytest.skip(reason)
    if not prefix and cluster_env(DEBIAN_STATE) is None:
        pytest.skip(SKIP)  # Debian's Slurm is set up by the default cluster's start.sh
    state = f"/tmp/hpcbridge-slurm-{name}"
    variables = {
        "HPCBRIDGE_SLURM_STATE": state,
        "HPCBRIDGE_SLURM_ACCOUNTING": "1" if accounting else "0",
        "HPCBRIDGE_SLURM_CLUSTER": f"hpcb{name}",
        "HPCBRIDGE_SLURM_CTLD_PORT": str(port_base),
        "HPCBRIDGE_SLURM_SLURMD_PORT": str(port_base + 1),  # one port per node from here
        "HPCBRIDGE_SLURM_DBD_PORT": str(port_base + 1 + nodes),
        "HPCBRIDGE_SLURM_NODES": str(nodes),
        "HPCBRIDGE_SLURM_EXTRA_CONF": extra_conf,
        "HPCBRIDGE_SLURM_USERS": users,
        "HPCBRIDGE_SLURM_CPUS": str(cpus),
        "HPCBRIDGE_SLURM_JWT": "1" if jwt else "0",
    }
    if prefix:
        variables["HPCBRIDGE_SLURM_PREFIX"] = prefix

    def script(action: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(SLURM_DIR / action)],
            env={**os.environ, **variables},
            capture_output=True,
            text=True,
            timeout=300,
        )

    # A fresh cluster each time: what an earlier run left in its queue (jobs, a drained
    # node) is not this run's, nor its history (job ids start again at 1).
    script("stop.sh")
    shutil.rmtree(f"{state}/spool/slurmctld", ignore_errors=True)
    shutil.rmtree(f"{state}/mariadb", ignore_errors=True)
    started = script("start.sh")
    try:
        assert started.returncode == 0, f"start.sh failed:\n{started.stdout}\n{started.stderr}"
        env = read_env_file(state)
        assert env is not None, f"no env file in {state}"
        if env.get("HPCBRIDGE_SLURM_BIN"):
            env["PATH"] = f"{env['HPCBRIDGE_SLURM_BIN']}{os.pathsep}{os.environ.get('PATH', '')}"
        yield env
    finally:
        script("stop.sh")


#: the user containers/slurmrestd runs slurmrestd as (it refuses root and SlurmUser)
RESTD_USER = "hpcbtest"


def skip_without_slurmrestd() -> None:
    """Skip, saying why, where the 25.11 prefix has no slurmrestd or no user can run it."""
    if not os.path.exists(f"{PREFIX}/sbin/slurmrestd"):
        pytest.skip(f"no slurmrestd under {PREFIX} (scripts/build-schedulers.sh builds it)")
    try:
        pwd.getpwnam(RESTD_USER)
    except KeyError:
        pytest.skip(f"no user {RESTD_USER} to run slurmrestd as (the SSH tests' user)")


@contextlib.contextmanager
def slurmrestd(state: str, listen: str) -> Iterator[Dict[str, str]]:
    """slurmrestd on the cluster of the state folder ``state`` (containers/slurmrestd, as
    ``RESTD_USER``): its URLs, ``unix`` (its socket, rest_auth/local) and ``tcp`` (JWT on
    ``listen``).  Stopped at the end."""
    variables = {
        "HPCBRIDGE_SLURM_PREFIX": PREFIX,
        "HPCBRIDGE_SLURM_STATE": state,
        "HPCBRIDGE_SLURMRESTD_LISTEN": listen,
    }

    def script(action: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(SLURM_DIR.parent / "slurmrestd" / action)],
            env={**os.environ, **variables},
            capture_output=True,
            text=True,
            timeout=120,
        )

    started = script("start.sh")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        urls = {
            name: Path(f"{state}/restd/{name}").read_text().strip() for name in ("url", "tcp_url")
        }
        yield {"unix": urls["url"], "tcp": urls["tcp_url"]}
    finally:
        stopped = script("stop.sh")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def jobs_named(name: str) -> List[str]:
    """Every job of any user with this name that the cluster knows: queue and history."""
    queue = subprocess.run(
        ["squeue", "--noheader", "--states=all", f"--name={name}", "--format=%i"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    history = subprocess.run(
        ["sacct", "--noheader", "-X", "-a", "-S", "now-1days", f"--name={name}", "-o", "JobID"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return sorted(set(queue.stdout.split()) | set(history.stdout.split()))


def staged_folders(executor: Any, workdir: str) -> List[str]:
    """The folders a submission left in ``workdir`` (where the executor runs)."""
    found = executor.run(["find", workdir, "-mindepth", "1", "-maxdepth", "1"])
    return sorted(line for line in found.stdout.splitlines() if line) if found.ok else []
