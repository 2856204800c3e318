"""What ``hpcbridge doctor`` makes of Slurm's answers (``doctor`` asks): its commands,
its controller, its accounting, and whether ``--pack`` can start Flux in an allocation.
Pure, no I/O."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Tuple

from ...engine.driver import Reply
from ...errors import ConfigurationError
from ...settings.doctor import Check
from .cluster import max_array_size
from .commands import scheduler_message


def sbatch_missing(reply: Reply) -> bool:
    """``sbatch --version`` found no sbatch (127: no such command), rather than failing."""
    return not reply.ok and (reply.returncode == 127 or "not found" in reply.message())


def rest_url(url: Optional[str]) -> str:
    """``url``, or the error saying that the REST driver needs one."""
    if not url:
        raise ConfigurationError(
            "HPCBRIDGE_SLURM_DRIVER=rest needs HPCBRIDGE_SLURM_REST_URL (unix:/path/to/socket "
            "or http://host:port)"
        )
    return url


def rest_reason(
    requested: str, url: Optional[str], sbatch_found: Callable[[], bool], host: str
) -> Optional[str]:
    """Why the REST driver is the one, or ``None``: it was asked for, or ``auto`` with a
    REST URL set and no ``sbatch`` found (``sbatch_found`` asked only then) on ``host``."""
    if requested == "rest":
        return f"slurmrestd at {url} was asked for"
    if requested != "auto" or not url or sbatch_found():
        return None
    return f"no sbatch on {host} and HPCBRIDGE_SLURM_REST_URL is set: slurmrestd at {url}"


def commands_check(reply: Reply, where: str, selected: bool) -> Check:
    """``sbatch --version``'s answer: Slurm's commands are there, or why not."""
    if reply.ok:
        return Check("slurm commands", True, f"sbatch{where}: {reply.stdout.strip()}")
    detail = (
        f"sbatch not found{where}"
        if sbatch_missing(reply)
        else f"sbatch{where} fails: {reply.message()}"  # there, but fails (no slurm.conf...)
    )
    if not selected:
        detail += " (slurm is not the selected scheduler)"
    return Check("slurm", False, detail, "slurm")


def controller_check(reply: Reply) -> Check:
    """``scontrol ping``'s answer."""
    text = scheduler_message(reply.stdout or reply.stderr)
    up = reply.ok and "is UP" in reply.stdout
    return Check(
        "slurm controller", up, text or f"scontrol ping exited {reply.returncode}", "slurm"
    )


def accounting_check(config: Mapping[str, str]) -> Check:
    """Whether sacct has a history, from ``scontrol show config``."""
    if not config:
        return Check("slurm accounting", False, "scontrol show config gave nothing")
    storage = config.get("AccountingStorageType", "?")
    limits = f"MinJobAge={config.get('MinJobAge', '?')}, MaxArraySize={max_array_size(config)}"
    # Slurm 23.02 and later say (null) where there is no accounting storage
    if "none" in storage or storage in ("(null)", ""):
        return Check(
            "slurm accounting",
            True,
            f"off ({storage}): finished jobs come from squeue for MinJobAge, then from the "
            f"exit-code file; {limits}",
        )
    return Check("slurm accounting", True, f"on ({storage}): sacct has job history; {limits}")


def packing_check(
    srun: Reply, found: Reply, flux: str, where: str, shapes: str = "", mpi: str = ""
) -> Check:
    """Whether ``submit-many --pack`` (``srun … flux start`` in each allocation) can work,
    from ``srun --version`` and ``flux version``'s answers; what a pack's allocations
    hold, from the partitions' ``shapes`` (``sinfo --format='%P %D %c'``) and ``mpi``
    (``srun --mpi=list``: the brokers of several nodes join through pmi2)."""
    name = "slurm packing"
    if not srun.ok:
        return Check(name, False, f"not possible: no srun{where} to start Flux in an allocation")
    if not found.ok:
        return Check(
            name,
            False,
            f"not possible: {flux} not found{where}; set HPCBRIDGE_FLUX_COMMAND to the "
            "flux the compute nodes have",
        )
    # flux's parser needs `packaging`: a client with only the REST driver's needs has none
    from ..flux.instance import parse_flux_version_output

    version = parse_flux_version_output(found.stdout).get("commands", "?")
    said = [
        f"--pack can run: each allocation starts {flux} ({version}) with srun, a broker per "
        "node - the compute nodes need it at the same path"
    ]
    shape = default_partition_shape(shapes)
    if shape:
        partition, nodes, cpus = shape
        said.append(
            f"partition {partition} (the default): {nodes} node(s) of {cpus} CPUs - a pack of "
            f"nodes=N of whole nodes is a Flux instance of N x {cpus} cores (fewer where a "
            "node has fewer cores than Slurm says)"
        )
    if mpi and "pmi2" not in mpi.split():
        said.append(
            "srun has no pmi2 (srun --mpi=list): the brokers of a pack of several nodes "
            "cannot join one instance; use nodes=1"
        )
    return Check(name, True, "; ".join(said))


def default_partition_shape(shapes: str) -> Optional[Tuple[str, str, str]]:
    """The default partition's name, node count and CPUs per node from ``sinfo
    --format='%P %D %c'`` (the default is marked ``*``; CPUs ``2+`` where they differ)."""
    for line in shapes.splitlines():
        words = line.split()
        if len(words) == 3 and words[0].endswith("*"):
            return words[0].rstrip("*"), words[1], words[2]
    return None


def rest_check(url: str, version: str, release: Optional[str], status: int, body: Any) -> Check:
    """slurmrestd's ``ping`` (``status``, ``body``) in the data parser ``version`` chosen:
    the URL, the version, Slurm's ``release``; when slurmctld does not answer, what next."""
    shown = f"{url}: data parser {version}, Slurm {release or 'release not said'}"
    pings = body.get("pings") if isinstance(body, dict) else None
    pings = [item for item in pings if isinstance(item, dict)] if isinstance(pings, list) else []
    up = [str(item.get("hostname", "?")) for item in pings if item.get("pinged") == "UP"]
    if status < 400 and up:
        return Check("slurmrestd", True, f"{shown}, slurmctld on {', '.join(up)} is UP")
    said = (body if isinstance(body, str) else "") or f"HTTP {status}"
    return Check(
        "slurmrestd",
        False,
        f"{shown}, but its ping finds no slurmctld UP ({said.strip()[:300]}): check the "
        "controller (scontrol ping on a login node), that slurmctld takes the token, and "
        "slurmrestd's log",
        "slurm",
    )


def rest_failure(url: str, problem: str, unreached: bool) -> Check:
    """slurmrestd could not be asked: ``problem`` says why; ``unreached``: it did not
    answer (else ``problem`` is a setting's error, which says what to set)."""
    if not unreached:
        return Check("slurmrestd", False, problem, "slurm")
    return Check(
        "slurmrestd",
        False,
        f"{url}: {problem}; start slurmrestd there, or set HPCBRIDGE_SLURM_REST_URL to where "
        "it listens (unix:/path/to/socket or http://host:port)",
        "slurm",
    )


def token_check(
    held: bool, left: Optional[float], renewable: bool, given: str, setting: str
) -> Check:
    """The token sent to slurmrestd: ``held`` or none, ``left`` seconds of life (``None``:
    no expiry said), made again by the command of ``setting`` when ``renewable``, else
    the one of the variable ``given`` until it expires."""
    if not held:
        return Check("slurmrestd token", True, "no token: rest_auth/local")
    life = "no expiry in it" if left is None else f"{max(left, 0):.0f} s of life left"
    if renewable:
        return Check("slurmrestd token", True, f"{life}; made again by {setting} before it ends")
    if left is not None and left <= 0:
        return Check(
            "slurmrestd token", False, f"the token from {given} expired: set {setting}", "slurm"
        )
    return Check("slurmrestd token", True, f"{life} (from {given}; set {setting} to renew it)")
