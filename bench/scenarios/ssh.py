"""SSH: N status-style queries (``date``) over hpcbridge's one persistent
``SSHExecutor`` connection vs one ``ssh`` process per query, and the OpenSSH backend's
``ssh`` per query through one master connection, against the loopback test server.  The
measuring is ``bench/ssh_bench.py``'s ``run()`` (interleaved rounds); this module only
turns its numbers into rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from ..common import row, scenario_result, skipped_scenario

NAME = "ssh"
TITLE = "SSH: one status query, ms (persistent connection vs ssh per call)"


def run(quick: bool, workdir: Path) -> Dict[str, Any]:
    count = 5 if quick else 100
    rounds = 1 if quick else 3
    try:
        from .. import ssh_bench
    except Exception as exc:  # noqa: BLE001 - e.g. paramiko missing
        return skipped_scenario(NAME, TITLE, f"bench/ssh_bench.py does not import: {exc}")
    try:
        ssh_bench.server_settings()
    except SystemExit as exc:
        return skipped_scenario(NAME, TITLE, str(exc))
    try:
        result = ssh_bench.run(count, rounds)
    except Exception as exc:  # noqa: BLE001
        return skipped_scenario(NAME, TITLE, f"ssh_bench.run failed: {type(exc).__name__}: {exc}")
    rows = []
    for key, label, kind in (
        ("ssh_process_per_call", "one ssh process per query", "raw"),
        ("persistent_executor", "hpcbridge SSHExecutor (one connection)", "hpcbridge"),
        ("openssh_master", "hpcbridge OpenSSHExecutor (ssh per query, one master)", "hpcbridge"),
    ):
        data = result[key]
        rows.append(
            row(
                label,
                [],
                kind=kind,
                calls=data["calls"],
                round_totals_s=data["round_totals_s"],
                p90=data["p90_ms"],
                **({"connect_s": data.get("connect_s")} if "connect_s" in data else {}),
            )
        )
        # ssh_bench keeps per-call medians/min/max (not every sample): use them.
        rows[-1].update({"median": data["median_ms"], "min": data["min_ms"], "max": data["max_ms"]})
    return scenario_result(
        NAME,
        TITLE,
        unit="ms",
        higher_is_better=False,
        baseline="one ssh process per query",
        rows=rows,
        params={"queries": count, "rounds": rounds, "command": result.get("command")},
        notes=[
            "Per-query medians and min-max over all calls of all rounds (bench/ssh_bench.py); "
            "the persistent connection's one-off connect time is listed separately.",
        ],
        why={
            "hpcbridge SSHExecutor (one connection)": "paramiko is pure Python; with "
            "multiplexing (ControlMaster) plain ssh would avoid the handshake too",
            "hpcbridge OpenSSHExecutor (ssh per query, one master)": "a new ssh process per "
            "query, no handshake: the price of riding a login that other processes share",
        },
        extra={"ssh_bench": result},
    )
