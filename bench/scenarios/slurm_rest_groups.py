"""The 25.11 groups of ``slurm_submit``, ``slurm_status`` and ``slurm_bulk_scripts``: the
REST driver beside the CLI and pyslurm drivers and the raw commands, on the bench's own
Slurm 25.11 cluster with slurmrestd (``bench/rest_cluster.py``, which runs each function
here in a process of its own, the cluster's environment set).  Not a scenario: each
returns its rows, measured as the scenario measures its own, and the scenario adds them
to its table (ratios against its raw baseline, per group).
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..common import interleave, trivial_script
from ..rest_cluster import DRIVERS, LABEL
from . import slurm_bulk_scripts as bulk_scripts
from . import slurm_common as sc
from . import slurm_status as status_scenario
from . import slurm_submit as submit_scenario

#: the data parser version the raw REST loop speaks (Slurm 25.11's newest)
VERSION = "v0.0.44"


def _request(method: str, target: str, body: Optional[str] = None) -> Tuple[int, Any]:
    """One request to the cluster's slurmrestd (its JWT listener), on a connection of its
    own as hpcbridge's client makes them: the HTTP status and the JSON answer."""
    url = urllib.parse.urlsplit(os.environ["HPCBRIDGE_SLURM_REST_URL"])
    headers = {"Content-Type": "application/json", "X-SLURM-USER-TOKEN": os.environ["SLURM_JWT"]}
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=60)
    try:
        connection.request(method, target, body, headers)
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read() or b"{}")
    finally:
        connection.close()


def raw_rest_status(ids: List[str], phase: str, full: bool = False) -> status_scenario.Refresh:
    """The REST floor of a refresh: one ``GET jobs/state`` of the ids (slurmctld's light
    REQUEST_JOB_STATE; ``full``: ``GET jobs/``, every job's whole record, as a REST client
    that knows no state yet asks), then one ``GET slurmdb jobs`` of those it no longer knows."""

    def query(pairs: List[Tuple[str, str]]) -> str:
        return urllib.parse.urlencode(pairs)

    def refresh() -> int:
        pairs = [("job_id", job_id) for job_id in ids]
        target = (
            f"/slurm/{VERSION}/jobs/" if full else f"/slurm/{VERSION}/jobs/state/?{query(pairs)}"
        )
        _, live = _request("GET", target)
        states = {
            str(job["job_id"]): " ".join(job.get("job_state") or job.get("state") or [])
            for job in live.get("jobs", [])
        }
        missing = [("step", job_id) for job_id in ids if job_id not in states]
        if missing:
            _, history = _request("GET", f"/slurmdb/{VERSION}/jobs/?{query(missing)}")
            for job in history.get("jobs", []):
                states[str(job["job_id"])] = " ".join(job["state"]["current"])
        return sum(status_scenario._expected(phase, states.get(job_id, "")) for job_id in ids)

    return refresh


def raw_rest_loop(script: str, count: int, workdir: Path) -> sc.Contender:
    """One ``POST job/submit`` per job, as a client with nothing of its own would send it."""
    job = {
        "script": Path(script).read_text(),
        "name": "hpcbb-rawrest",
        "environment": ["PATH=/usr/bin:/bin"],
        "current_working_directory": str(workdir),
        "standard_output": "/dev/null",
    }
    body = json.dumps({"job": job})

    def post() -> str:
        status, answer = _request("POST", f"/slurm/{VERSION}/job/submit", body)
        if status != 200 or not answer.get("job_id"):
            raise RuntimeError(f"POST job/submit: HTTP {status} {answer.get('errors')}")
        return str(answer["job_id"])

    def submit(ids: List[Optional[str]]) -> None:
        for _ in range(count):
            ids.append(post())

    return lambda: sc.submission_rate(count, submit)


def submit(quick: bool, workdir: Path) -> List[Dict[str, Any]]:
    """``slurm_submit``'s 25.11 group: N trivial jobs, one by one and as one array."""
    count = 5 if quick else 100
    rounds = 1 if quick else 5
    script = trivial_script(workdir)
    made: Dict[str, Callable[[], sc.Contender]] = {
        "raw sbatch loop": lambda: sc.raw_sbatch_loop(script, count, workdir),
        submit_scenario.RAW_REST: lambda: raw_rest_loop(script, count, workdir),
    }
    for driver, label in DRIVERS.items():
        made[f"hpcbridge submit_job loop, {label}"] = functools.partial(
            sc.hpcbridge_submit_loop, script, count, workdir, driver
        )
        made[f"hpcbridge submit_many (array), {label}"] = functools.partial(
            sc.hpcbridge_submit_many, script, count, workdir, driver
        )
    contenders, skipped = submit_scenario.build(made)
    with sc.partitions_held():
        samples, failed = interleave(contenders, rounds)
    skipped.update(failed)
    kinds = submit_scenario.REST_KINDS
    return submit_scenario.rows_for(samples, skipped, kinds, count, submit_scenario.REST_GROUP)


def status(quick: bool, workdir: Path) -> List[Dict[str, Any]]:
    """``slurm_status``'s 25.11 groups: the raw floor and each driver's fresh client."""
    sizes = [5] if quick else [10, 100, 500]
    rounds = 1 if quick else 3
    script = trivial_script(workdir, "tracked.sh", "true")
    adapter = sc.hpcbridge_adapter(workdir)
    hpcb = status_scenario.HpcbridgeClient(adapter, workdir)
    prepares: Dict[str, status_scenario.Prepare] = {
        status_scenario.RAW: status_scenario.raw,
        status_scenario.RAW_REST: raw_rest_status,
        status_scenario.RAW_REST_FULL: functools.partial(raw_rest_status, full=True),
    }
    for driver, label in DRIVERS.items():
        prepares[f"{status_scenario.HPCB}, {label}"] = functools.partial(
            hpcb.prepare, driver=driver
        )
    rows, _ = status_scenario.measure_tracked(
        adapter, hpcb, script, prepares, sizes, rounds, f"{LABEL} ", status_scenario.REST_KINDS
    )
    return rows


def bulk(quick: bool, workdir: Path) -> List[Dict[str, Any]]:
    """``slurm_bulk_scripts``' 25.11 group: N distinct scripts, each driver's ``submit_many``
    (fresh adapters of one state folder per driver, as there) beside the raw loop and array.
    The cluster is the bench's own: its partitions are held down instead of each job."""
    count = 8 if quick else 100
    rounds = 1 if quick else 5
    paths = bulk_scripts.scripts(workdir / f"scripts-{count}", count)
    made: Dict[str, Callable[[], sc.Contender]] = {
        bulk_scripts.LOOP: lambda: bulk_scripts.raw_loop(paths, workdir),
        bulk_scripts.ARRAY: lambda: bulk_scripts.raw_array(paths, workdir),
    }
    for driver, label in DRIVERS.items():
        adapters = bulk_scripts.Adapters(workdir, driver, hold=False)
        adapters.fresh().open().driver.queue_limit()  # the user's cap, read once: untimed
        made[f"{bulk_scripts.DISTINCT}, {label}"] = functools.partial(
            bulk_scripts.hpcbridge_many, adapters, paths
        )
    contenders, skipped = submit_scenario.build(made)
    with sc.partitions_held():
        samples, failed = interleave(contenders, rounds)
    skipped.update(failed)
    group = f"{bulk_scripts.REST_LABEL}, N={count}"
    kinds = bulk_scripts.REST_KINDS
    return submit_scenario.rows_for(
        samples, skipped, kinds, count, group, reference=(bulk_scripts.ARRAY,)
    )
