"""Status-query latency: one persistent SSHExecutor vs one ``ssh`` process per call (and
the OpenSSH backend through its master connection).

Runs N trivial commands (``date`` by default) against the loopback test server
(containers/sshd: ``bash containers/sshd/start.sh``) in interleaved rounds
(A B A B ...), so that drift of the machine affects both sides alike:

* A: ``SSHExecutor.run`` over one connection opened before the rounds;
* B: ``ssh -F <test ssh_config> -o ControlMaster=no -o ControlPath=none hpcb-test
  <command>``, a new process, TCP connection, key exchange and login per call;
* C: ``OpenSSHExecutor.run`` (``HPCBRIDGE_SSH_BACKEND=openssh``): a new ``ssh`` process per
  call through one master connection opened before the rounds.

    python bench/ssh_bench.py [--count 100] [--rounds 3] [--command date] [--json]

``run(count, rounds)`` returns the same numbers as a dict for a bench runner.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

try:
    from hpcbridge.transports.ssh.executor import SSHExecutor
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from hpcbridge.transports.ssh.executor import SSHExecutor
from hpcbridge.transports.ssh.openssh import OpenSSHExecutor

KEYS = ("HOST", "PORT", "USER", "KEY", "KNOWN_HOSTS", "CONFIG")


def server_settings() -> Dict[str, str]:
    """HPCBRIDGE_TEST_SSH_* from the environment, else from the server's env.sh."""
    values: Dict[str, str] = {}
    state = os.environ.get("HPCBRIDGE_SSHD_STATE", "/tmp/hpcbridge-sshd")
    env_file = Path(state) / "env.sh"
    if env_file.is_file():
        for line in env_file.read_text().splitlines():
            line = line.strip()
            if line.startswith("export ") and "=" in line:
                name, _, raw = line[len("export ") :].partition("=")
                words = shlex.split(raw)
                values[name.strip()] = words[0] if words else ""
    for key in KEYS:
        name = f"HPCBRIDGE_TEST_SSH_{key}"
        if os.environ.get(name):
            values[name] = os.environ[name]
    missing = [k for k in KEYS if not values.get(f"HPCBRIDGE_TEST_SSH_{k}")]
    if missing:
        raise SystemExit(
            "sshd test server not running (no HPCBRIDGE_TEST_SSH_* settings): "
            "bash containers/sshd/start.sh"
        )
    return {key.lower(): values[f"HPCBRIDGE_TEST_SSH_{key}"] for key in KEYS}


def _summary(samples: List[float], totals: List[float]) -> Dict[str, object]:
    return {
        "median_ms": round(statistics.median(samples) * 1000, 3),
        "mean_ms": round(statistics.fmean(samples) * 1000, 3),
        "min_ms": round(min(samples) * 1000, 3),
        "max_ms": round(max(samples) * 1000, 3),
        "p90_ms": round(sorted(samples)[int(0.9 * (len(samples) - 1))] * 1000, 3),
        "round_totals_s": [round(total, 3) for total in totals],
        "calls": len(samples),
    }


def _timed_round(call: Callable[[], Optional[str]], count: int, samples: List[float]) -> float:
    """``count`` calls of ``call``, each one's seconds added to ``samples``; the round's
    seconds.  ``call`` says what failed, else ``None``: a failure ends the run."""
    round_start = time.perf_counter()
    for _ in range(count):
        t0 = time.perf_counter()
        failed = call()
        samples.append(time.perf_counter() - t0)
        if failed:
            raise RuntimeError(failed)
    return time.perf_counter() - round_start


def run(count: int = 100, rounds: int = 3, command: str = "date") -> Dict[str, object]:
    """Time ``count`` calls per method per round; A and B interleaved ``rounds`` times."""
    settings = server_settings()
    argv = shlex.split(command)
    # both backends take the same login (SSHLogin's arguments)
    login = (settings["host"], settings["user"], int(settings["port"]), settings["key"])
    reach: Dict[str, Any] = {"known_hosts": settings["known_hosts"], "ssh_config_path": os.devnull}
    executor = SSHExecutor(*login, **reach)
    ssh_argv = [
        "ssh",
        "-F",
        settings["config"],
        "-o",
        "ControlMaster=no",
        "-o",
        "ControlPath=none",
        "hpcb-test",
        command,
    ]
    sockets = tempfile.mkdtemp(prefix="hpcb-")  # short: a socket's path has a limit
    mastered = OpenSSHExecutor(*login, **reach, environ={"XDG_RUNTIME_DIR": sockets})

    def over_executor() -> Optional[str]:
        result = executor.run(argv)
        return None if result.ok else f"{command} failed over SSHExecutor: {result.message()}"

    def per_process() -> Optional[str]:
        completed = subprocess.run(
            ssh_argv, capture_output=True, timeout=30, check=False, stdin=subprocess.DEVNULL
        )
        failed = completed.returncode != 0
        return f"ssh {command} failed: {completed.stderr.decode()[:300]}" if failed else None

    def over_master() -> Optional[str]:
        result = mastered.run(argv)
        return None if result.ok else f"{command} failed over OpenSSHExecutor: {result.message()}"

    persistent: List[float] = []
    per_call: List[float] = []
    through_master: List[float] = []
    persistent_totals: List[float] = []
    per_call_totals: List[float] = []
    master_totals: List[float] = []
    try:
        started = time.perf_counter()
        executor.connect()
        connect_s = time.perf_counter() - started
        # Warm-up outside the measurement: first channel, first ssh process.
        assert executor.run(argv).ok
        subprocess.run(ssh_argv, capture_output=True, check=True, timeout=30)
        started = time.perf_counter()
        assert mastered.run(argv).ok  # opens the master (a key-only server: no login)
        master_s = time.perf_counter() - started
        for _ in range(rounds):
            persistent_totals.append(_timed_round(over_executor, count, persistent))
            per_call_totals.append(_timed_round(per_process, count, per_call))
            master_totals.append(_timed_round(over_master, count, through_master))
        connections = executor.connection_count
    finally:
        executor.close()
        mastered.logout()
        shutil.rmtree(sockets, ignore_errors=True)
    a = _summary(persistent, persistent_totals)
    b = _summary(per_call, per_call_totals)
    c = _summary(through_master, master_totals)
    return {
        "benchmark": "ssh_status_query_latency",
        "command": command,
        "count": count,
        "rounds": rounds,
        "server": executor.host,
        "persistent_executor": {**a, "connect_s": round(connect_s, 4), "connections": connections},
        "ssh_process_per_call": b,
        "openssh_master": {**c, "connect_s": round(master_s, 4)},
        "ratio_median": round(statistics.median(per_call) / statistics.median(persistent), 1),
        "ratio_total": round(sum(per_call_totals) / sum(persistent_totals), 1),
        "python": sys.version.split()[0],
    }


def _report(results: Dict[str, object]) -> str:
    a = results["persistent_executor"]
    b = results["ssh_process_per_call"]
    assert isinstance(a, dict) and isinstance(b, dict)
    lines = [
        f"{results['count']} x {results['command']!r} per round, {results['rounds']} rounds "
        f"(interleaved A B), server {results['server']}",
        f"  A persistent SSHExecutor : median {a['median_ms']:8.2f} ms  "
        f"(min {a['min_ms']:.2f} - max {a['max_ms']:.2f}, p90 {a['p90_ms']:.2f})  "
        f"rounds {a['round_totals_s']} s; connect {a['connect_s']} s once, "
        f"{a['connections']} connection(s)",
        f"  B ssh process per call  : median {b['median_ms']:8.2f} ms  "
        f"(min {b['min_ms']:.2f} - max {b['max_ms']:.2f}, p90 {b['p90_ms']:.2f})  "
        f"rounds {b['round_totals_s']} s",
        f"  ratio B/A: {results['ratio_median']}x (medians), {results['ratio_total']}x (totals)",
    ]
    c = results.get("openssh_master")
    if isinstance(c, dict):
        lines.insert(
            3,
            f"  C OpenSSHExecutor master : median {c['median_ms']:8.2f} ms  "
            f"(min {c['min_ms']:.2f} - max {c['max_ms']:.2f}, p90 {c['p90_ms']:.2f})  "
            f"rounds {c['round_totals_s']} s; master opened in {c['connect_s']} s once",
        )
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100, help="calls per method per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (A B ...)")
    parser.add_argument("--command", default="date", help="the remote command (default: date)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    options = parser.parse_args(argv)
    results = run(options.count, options.rounds, options.command)
    print(json.dumps(results, indent=2) if options.json else _report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
