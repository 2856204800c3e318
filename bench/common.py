"""Shared pieces of the bench runner: interleaved rounds, summaries, the Slurm
test cluster's environment, a counting shim for scheduler commands, and the
record of the machine and versions.

Every scenario returns a *result* dict (see ``scenario_result``) whose
``rows`` are contenders measured in interleaved rounds; ``__main__`` turns the
results into JSON, a Markdown table and a chart.
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]

#: scheduler commands the counting shim wraps
COUNTED_COMMANDS = ("squeue", "sacct", "scontrol", "sbatch", "scancel", "sinfo")


class Skip(Exception):
    """A scenario or contender cannot run here; the message says why."""


# -- measuring -------------------------------------------------------------------


def interleave(
    contenders: Dict[str, Callable[[], float]],
    rounds: int,
) -> Tuple[Dict[str, List[float]], Dict[str, str]]:
    """Run each contender once per round, rotated (A B C, B C A, C A B, ...) so
    that no contender always goes first; each call returns its own measurement
    (it times only the work, and cleans up after itself outside the timing).

    A contender that raises ``Skip`` is dropped from the remaining rounds;
    returns (samples per contender, skip reason per contender).
    """
    samples: Dict[str, List[float]] = {name: [] for name in contenders}
    skipped: Dict[str, str] = {}
    names = list(contenders)
    for index in range(rounds):
        shift = index % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            if name in skipped:
                continue
            try:
                samples[name].append(contenders[name]())
            except Skip as exc:
                skipped[name] = str(exc)
            except Exception as exc:  # noqa: BLE001 - reported, not fatal to the others
                skipped[name] = f"failed: {type(exc).__name__}: {exc}"[:400]
    for name in skipped:
        samples.pop(name, None)
    return samples, skipped


def stats(values: Sequence[float]) -> Dict[str, Any]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "samples": [round(v, 6) for v in values],
    }


def row(
    contender: str,
    values: Sequence[float],
    *,
    group: str = "",
    kind: str = "other",
    note: str = "",
    **extra: Any,
) -> Dict[str, Any]:
    """One contender's line: ``kind`` is raw | hpcbridge | peer | other."""
    result: Dict[str, Any] = {"contender": contender, "group": group, "kind": kind}
    if values:
        result.update(stats(values))
    else:
        result.update({"median": None, "min": None, "max": None, "samples": []})
    if note:
        result["note"] = note
    result.update(extra)
    return result


def skipped_row(contender: str, reason: str, *, group: str = "", kind: str = "peer") -> dict:
    return {
        "contender": contender,
        "group": group,
        "kind": kind,
        "skipped": reason,
        "median": None,
        "min": None,
        "max": None,
        "samples": [],
    }


def scenario_result(
    name: str,
    title: str,
    *,
    unit: str,
    higher_is_better: bool,
    baseline: Optional[str],
    rows: List[Dict[str, Any]],
    params: Dict[str, Any],
    notes: Optional[List[str]] = None,
    why: Optional[Dict[str, str]] = None,
    extra: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """``baseline``: the contender (per group) every ratio is taken against;
    ``why``: for hpcbridge contenders, the one-line reason shown when it loses."""
    result = {
        "name": name,
        "title": title,
        "status": "ok",
        "unit": unit,
        "higher_is_better": higher_is_better,
        "baseline": baseline,
        "params": params,
        "rows": rows,
        "notes": notes or [],
        "why": why or {},
    }
    if extra:
        result.update(extra)
    add_ratios(result)
    return result


def skipped_scenario(name: str, title: str, reason: str) -> Dict[str, Any]:
    return {"name": name, "title": title, "status": "skipped", "reason": reason, "rows": []}


def add_ratios(result: Dict[str, Any]) -> None:
    """``speed_vs_baseline``: > 1 means faster (or higher throughput) than the
    group's baseline, whatever the unit; plus ``loses_to`` for hpcbridge rows."""
    baseline = result.get("baseline")
    higher = result["higher_is_better"]
    rows = result["rows"]
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for item in rows:
        groups.setdefault(item.get("group", ""), []).append(item)
    for members in groups.values():
        base = next(
            (m for m in members if m["contender"] == baseline and m.get("median") is not None),
            None,
        )
        if base is None:
            base = next(
                (m for m in members if m.get("kind") == "raw" and m.get("median") is not None),
                None,
            )
        for item in members:
            value = item.get("median")
            if value is None or base is None or not base["median"] or not value:
                item["speed_vs_baseline"] = None
            else:
                item["speed_vs_baseline"] = (
                    value / base["median"] if higher else base["median"] / value
                )
            if base is not None:
                item["baseline"] = base["contender"]
        measured = [m for m in members if m.get("median") is not None]
        for item in measured:
            if item.get("kind") != "hpcbridge":
                continue
            better = [
                other
                for other in measured
                if other is not item
                and other.get("kind") in ("raw", "peer")
                and not other.get("reference_only")
                and (
                    other["median"] > item["median"] * 1.05
                    if higher
                    else other["median"] < item["median"] / 1.05
                )
            ]
            if better:
                item["loses_to"] = [other["contender"] for other in better]


# -- the environment -------------------------------------------------------------


def load_env_file(path: Path) -> Dict[str, str]:
    """``export NAME=value`` lines of a test-cluster env.sh."""
    values: Dict[str, str] = {}
    if not path.is_file():
        return values
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("export ") and "=" in line:
            name, _, raw = line[len("export ") :].partition("=")
            words = shlex.split(raw)
            values[name.strip()] = words[0] if words else ""
    return values


def slurm_environment() -> Dict[str, str]:
    """Put the test cluster's SLURM_CONF (and friends) into ``os.environ``."""
    state = os.environ.get("HPCBRIDGE_SLURM_STATE", "/tmp/hpcbridge-slurm")
    values = load_env_file(Path(state) / "env.sh")
    for name, value in values.items():
        os.environ.setdefault(name, value)
    # Maestro's status command is `squeue -u $USER`: a bare root shell may lack USER.
    if not os.environ.get("USER"):
        import getpass

        os.environ["USER"] = getpass.getuser()
    return values


def slurm_available() -> Optional[str]:
    """None when the Slurm cluster answers, else why not."""
    slurm_environment()
    if not shutil.which("sbatch"):
        return "sbatch not on PATH (start the cluster: bash containers/slurm/start.sh)"
    try:
        ping = subprocess.run(
            ["scontrol", "ping"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"scontrol ping failed: {exc}"
    if "is UP" not in ping.stdout:
        said = " ".join((ping.stdout + ping.stderr).split())[:100]
        return (
            f"the Slurm test cluster is not running (scontrol ping: {said}); "
            "start it with: bash containers/slurm/start.sh"
        )
    return None


#: a Slurm built under a prefix, run as a second test cluster (containers/slurm/README.md)
SLURM_PREFIX = os.environ.get("HPCBRIDGE_TEST_SLURM_PREFIX", "/opt/slurm-25.11")


def prefix_slurm_state(prefix: str = SLURM_PREFIX) -> Path:
    """The state folder start.sh gives a prefix: /tmp/hpcbridge-slurm-<digits of its name>."""
    digits = "".join(ch for ch in Path(prefix).name if ch.isdigit())
    return Path(
        os.environ.get("HPCBRIDGE_TEST_SLURM_PREFIX_STATE", f"/tmp/hpcbridge-slurm-{digits}")
    )


@contextmanager
def prefix_slurm_environment(prefix: str = SLURM_PREFIX) -> Iterator[Dict[str, str]]:
    """``os.environ`` pointed at the prefix's cluster (its SLURM_CONF, its commands
    first on PATH) while the block runs; ``Skip`` when that cluster is not up."""
    if not Path(prefix).is_dir():
        raise Skip(f"no Slurm built under {prefix} (HPCBRIDGE_TEST_SLURM_PREFIX)")
    values = {
        name: value
        for name, value in load_env_file(prefix_slurm_state(prefix) / "env.sh").items()
        if "$" not in value
    }
    if not values.get("SLURM_CONF"):
        raise Skip(
            f"the cluster of {prefix} is not running: "
            f"HPCBRIDGE_SLURM_PREFIX={prefix} bash containers/slurm/start.sh"
        )
    values["PATH"] = f"{prefix}/bin{os.pathsep}{os.environ.get('PATH', '')}"
    with patched_environ(values):
        yield values


@contextmanager
def patched_environ(values: Dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set while the block runs, as it was after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_command(argv: Sequence[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)


def trivial_script(folder: Path, name: str = "true.sh", body: str = "true") -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def base_ids(job_ids: Sequence[str]) -> List[str]:
    """``123_4`` -> ``123``: cancelling the array cancels all its tasks."""
    return list(dict.fromkeys(str(job_id).split("_")[0].split(".")[0] for job_id in job_ids))


def scancel(job_ids: Sequence[str], settle: float = 30.0) -> None:
    """Cancel these jobs (only these) and wait until none is pending or running."""
    ids = base_ids([job_id for job_id in job_ids if job_id])
    if not ids:
        return
    for start in range(0, len(ids), 500):
        run_command(["scancel", *ids[start : start + 500]])
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        active = run_command(
            ["squeue", "-h", "-o", "%i", "-t", "PD,R,CG,S", "-j", ",".join(ids[:2000])]
        )
        if active.returncode == 0 and not active.stdout.strip():
            return
        if active.returncode != 0 and "Invalid job id" in active.stderr:
            return
        time.sleep(0.2)


def slurm_version() -> Optional[str]:
    try:
        out = run_command(["sbatch", "--version"], timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.split()[-1] if out else None


# -- the counting shim --------------------------------------------------------------


class CommandCounter:
    """A folder of wrappers put first on ``PATH``: each appends its command line
    to a log, then execs the real binary.  In-process libraries (PSI/J,
    submitit, Maestro, hpcbridge's local executor) inherit ``os.environ``."""

    def __init__(self, names: Sequence[str] = COUNTED_COMMANDS) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="hpcb-bench-shim-"))
        self.log = self.folder / "calls.log"
        self.log.touch()
        self._old_path: Optional[str] = None
        for name in names:
            real = shutil.which(name)
            if not real:
                continue
            wrapper = self.folder / name
            wrapper.write_text(
                "#!/bin/sh\n"
                f"printf '%s\\n' \"{name} $*\" >> {shlex.quote(str(self.log))}\n"
                f'exec {shlex.quote(real)} "$@"\n'
            )
            wrapper.chmod(0o755)

    def __enter__(self) -> CommandCounter:
        self._old_path = os.environ.get("PATH", "")
        os.environ["PATH"] = f"{self.folder}{os.pathsep}{self._old_path}"
        self.reset()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._old_path is not None:
            os.environ["PATH"] = self._old_path
        shutil.rmtree(self.folder, ignore_errors=True)

    def reset(self) -> None:
        self.log.write_text("")

    def counts(self) -> Dict[str, int]:
        lines = [line for line in self.log.read_text().splitlines() if line.strip()]
        return dict(Counter(line.split()[0] for line in lines))


@contextmanager
def temporary_folder(prefix: str) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- the machine and versions ------------------------------------------------------


def _package_version(name: str) -> Optional[str]:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def machine_info() -> Dict[str, Any]:
    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except (OSError, ValueError):
        pass
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gib": memory_gib,
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "os": platform.platform(),
        "hostname": platform.node(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def versions() -> Dict[str, Any]:
    found: Dict[str, Any] = {}
    try:
        import hpcbridge

        found["hpcbridge"] = hpcbridge.__version__
    except ImportError:
        found["hpcbridge"] = None
    commit = run_command(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], timeout=10)
    if commit.returncode == 0:
        dirty = run_command(["git", "-C", str(REPO), "status", "--porcelain"], timeout=10)
        found["hpcbridge_commit"] = commit.stdout.strip() + (
            " (+ uncommitted changes)" if dirty.stdout.strip() else ""
        )
    found["slurm"] = slurm_version() if shutil.which("sbatch") else None
    found["pyslurm"] = _package_version("pyslurm")
    try:
        from tests.support.flux import find_flux_commands, flux_version

        commands = find_flux_commands()
        found["flux"] = flux_version(commands[0]) if commands else None
    except Exception:  # noqa: BLE001 - the Flux package may be in progress
        found["flux"] = None
    for package in ("psij-python", "submitit", "maestrowf", "matplotlib", "paramiko"):
        found[package] = _package_version(package)
    ssh = shutil.which("ssh")
    if ssh:
        out = run_command([ssh, "-V"], timeout=10)
        found["openssh"] = (out.stderr or out.stdout).strip() or None
    return found


def peer_versions() -> Dict[str, Optional[str]]:
    return {name: _package_version(name) for name in ("psij-python", "submitit", "maestrowf")}
