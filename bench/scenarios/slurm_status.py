"""Slurm status load: one full status refresh of N tracked jobs.

The tracked jobs are hpcbridge's own (``submit_job`` in a loop, so each has a
record in its job store), all waiting on one held anchor job
(``--dependency``): they stay PENDING, use no CPU and block nobody else's
jobs.  They are refreshed twice over: while pending (squeue knows them), and
after ``scancel`` once squeue has forgotten them (only sacct knows them).
Every contender refreshes the same first N ids:

* raw        one ``squeue -h -t all -j ID,ID,...`` for all N, then one ``sacct``
  for the ids squeue did not list: the floor any client pays (the baseline);
* naive      ``squeue -h -j ID`` per job, then ``sacct -j ID`` for a job squeue
  does not know;
* hpcbridge  ``adapter.get_job_statuses(ids)``: one squeue for all, then one
  sacct for the ids squeue no longer knows;
* PSI/J      the ``SlurmJobExecutor`` status poll: jobs attached with
  ``executor.attach(job, native_id)`` (public), the poll thread told to wait an
  hour, and one cycle run by calling the thread's ``_poll()`` (internal: PSI/J
  has no public "refresh now"; its thread runs the same code every
  ``queue_polling_interval``, 30 s by default);
* submitit   its ``SlurmInfoWatcher`` (the one behind ``SlurmJob.watcher``):
  the ids registered, then ``watcher.update()`` - the call ``job.state`` makes
  for every registered job at once;
* Maestro    ``SlurmScriptAdapter.check_jobs(ids)`` (public).

Commands are counted in one extra, untimed refresh per contender with a shim
on PATH (wrappers for squeue/sacct/scontrol/... that log, then exec the real
binary); the timed rounds run without the shim.
"""

from __future__ import annotations

import itertools
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import rest_cluster, slurm_rpcs
from ..common import (
    CommandCounter,
    Skip,
    interleave,
    row,
    run_command,
    scancel,
    scenario_result,
    skipped_row,
    skipped_scenario,
    slurm_available,
    trivial_script,
)
from . import slurm_common as sc

NAME = "slurm_status"
TITLE = "Slurm status load: one full refresh of N tracked jobs"

RAW = "raw: one squeue (then one sacct) for all"
NAIVE = "naive: squeue (then sacct) per job"
HPCB = "hpcbridge get_job_statuses"
PSIJ = "PSI/J poll cycle"
SUBMITIT = "submitit watcher.update()"
MAESTRO = "Maestro check_jobs"

NAIVE_SAMPLE = 50

KINDS = {
    RAW: "raw",
    NAIVE: "raw",
    HPCB: "hpcbridge",
    PSIJ: "peer",
    SUBMITIT: "peer",
    MAESTRO: "peer",
}

#: the rows of the 25.11 groups (``slurm_rest_groups.status``): the raw floor and each driver
RAW_REST = "raw REST: one GET jobs/state (then one slurmdb jobs) for all"
RAW_REST_FULL = "raw REST: one GET jobs/ (then one slurmdb jobs) for all"
REST_KINDS = {
    RAW: "raw",
    RAW_REST: "raw",
    RAW_REST_FULL: "raw",
    **{f"{HPCB}, {label}": "hpcbridge" for label in rest_cluster.DRIVERS.values()},
}

_L = rest_cluster.LABEL
REST_WHY = {
    f"{_L} pending|{HPCB}, CLI driver": "one squeue --me, then its own CPU for a fresh "
    "client (the store read, the round published, the answers merged: see the 22.05 rows)",
    f"{_L} pending|{HPCB}, pyslurm driver": "one Jobs.load() of every job of the cluster, "
    "each record converted in-process, then its own CPU as the CLI driver's",
    f"{_L} pending|{HPCB}, REST driver": "GET jobs/state of the round's ids (every "
    "unfinished job of the store: 501), then - a fresh client knows no job's last state, "
    "and jobs/state has no pending reason - one GET jobs/, every job's whole record "
    "(slurmrestd's time: see the raw GET jobs/ row); GET job/{id} instead when one job "
    "is left to complete, jobs/state alone for jobs it has seen unchanged",
    f"{_L} ended|{HPCB}, CLI driver": "squeue, then one sacct, then its own CPU (the new "
    "states written and published)",
    f"{_L} ended|{HPCB}, pyslurm driver": "Jobs.load(), then slurmdbd's records in-process "
    "(db.Jobs.load), each converted, then the new states written and published",
    f"{_L} ended|{HPCB}, REST driver": "GET jobs/state (slurmctld has forgotten them: no "
    "GET jobs/), then GET slurmdb jobs as sacct -X (skip_steps): slurmrestd's time (see "
    "the raw REST rows), then the new states written and published",
}

#: a refresh returns how many ids it reported in the expected state
Refresh = Callable[[], int]
#: builds a contender's client state for one sample (untimed), returns its refresh
Prepare = Callable[[List[str], str], Refresh]


def _expected(phase: str, text: str) -> bool:
    text = text.upper()
    if phase == "pending":
        return "PENDING" in text or "QUEUED" in text
    return "CANCEL" in text  # they were all cancelled


def _submit_tracked(adapter: Any, script: str, count: int) -> Tuple[str, List[str]]:
    anchor = run_command(
        ["sbatch", "--parsable", "--hold", "--job-name=hpcbb-anchor", "--output=/dev/null", script]
    )
    if anchor.returncode != 0:
        raise RuntimeError(f"sbatch --hold failed: {anchor.stderr.strip()[:200]}")
    anchor_id = anchor.stdout.strip().split(";")[0]
    ids = [
        adapter.submit_job(script, resources={"job_name": "hpcbb-tracked"}, depends_on=anchor_id)
        for _ in range(count)
    ]
    return anchor_id, ids


def _wait_out_of_squeue(ids: List[str], timeout: float = 90.0) -> None:
    """Cancelled jobs stay in squeue for MinJobAge; wait until only sacct knows them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = run_command(["squeue", "-h", "-t", "all", "-o", "%i", "-j", ",".join(ids)])
        if out.returncode == 0 and not out.stdout.strip():
            return
        if out.returncode != 0 and "Invalid job id" in out.stderr:
            return
        time.sleep(1.0)
    raise RuntimeError(f"cancelled jobs still in squeue after {timeout:.0f} s")


def naive(ids: List[str], phase: str) -> Refresh:
    def refresh() -> int:
        seen = 0
        for job_id in ids:
            out = subprocess.run(
                ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True
            ).stdout.strip()
            if not out:
                out = subprocess.run(
                    ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State"],
                    capture_output=True,
                    text=True,
                ).stdout.strip()
            seen += _expected(phase, out)
        return seen

    return refresh


def raw(ids: List[str], phase: str) -> Refresh:
    def refresh() -> int:
        listed = subprocess.run(
            ["squeue", "-h", "-t", "all", "-o", "%i %T", "-j", ",".join(ids)],
            capture_output=True,
            text=True,
        ).stdout.split("\n")
        states = dict(line.split(" ", 1) for line in listed if " " in line)
        missing = [job_id for job_id in ids if job_id not in states]
        if missing:
            history = subprocess.run(
                ["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(missing)],
                capture_output=True,
                text=True,
            ).stdout.split("\n")
            states.update(line.split("|", 1) for line in history if "|" in line)
        return sum(_expected(phase, states.get(job_id, "")) for job_id in ids)

    return refresh


class HpcbridgeClient:
    """A fresh adapter per sample over a copy of the job store as it was after
    submission: each sample is the refresh that finds out (hpcbridge never asks
    again about a job it has seen end)."""

    def __init__(self, adapter: Any, workdir: Path) -> None:
        self.settings = adapter.settings
        self.remote_workdir = adapter.remote_workdir
        self.folder = workdir / "stores"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.snapshot = self.folder / "snapshot.db"
        self.copies = itertools.count()
        self.source = adapter.store.path
        #: the clients of earlier samples, closed before the next one is made (untimed)
        self.clients: List[Any] = []

    def take_snapshot(self) -> None:
        self.snapshot.unlink(missing_ok=True)
        with sqlite3.connect(str(self.source)) as src, sqlite3.connect(str(self.snapshot)) as dst:
            src.backup(dst)

    def prepare(self, ids: List[str], phase: str, driver: str = "cli") -> Refresh:
        from hpcbridge import RealSlurmAdapter
        from hpcbridge.store.jobs import JobStore

        while self.clients:
            self.clients.pop().close()
        copy = self.folder / f"copy-{next(self.copies)}.db"
        with sqlite3.connect(str(self.snapshot)) as src, sqlite3.connect(str(copy)) as dst:
            src.backup(dst)
        adapter = RealSlurmAdapter(
            remote_workdir=self.remote_workdir,
            settings=self.settings,
            store=JobStore(copy),
            driver=driver,
        )
        self.clients.append(adapter)
        sent = _requests_sent(sc.opened(adapter).open().driver)

        def refresh() -> int:
            statuses = adapter.get_job_statuses(ids)
            return sum(_expected(phase, s.state.value) for s in statuses.values())

        refresh.requests = sent  # type: ignore[attr-defined]  # counted beside the commands
        return refresh


def _requests_sent(driver: Any) -> List[str]:
    """The REST driver's requests (``METHOD path``), appended as they are sent; no
    other driver sends any."""
    sent: List[str] = []
    client = getattr(driver, "client", None)
    if client is not None:
        send = client.send

        def counted(method: str, target: str, *args: Any, **kwargs: Any) -> Any:
            sent.append(f"{method} {target.partition('?')[0]}")
            return send(method, target, *args, **kwargs)

        client.send = counted
    return sent


def psij_prepare(workdir: Path) -> Prepare:
    import psij

    def prepare(ids: List[str], phase: str) -> Refresh:
        executor = sc.psij_slurm_executor(workdir, initial_queue_polling_delay=3600)
        jobs = []
        for job_id in ids:
            job = psij.Job()
            executor.attach(job, job_id)
            jobs.append(job)
        poll_thread = executor._queue_poll_thread

        def refresh() -> int:
            poll_thread._poll()
            return sum(_expected(phase, str(job.status.state)) for job in jobs)

        refresh.executor = executor  # type: ignore[attr-defined]  # keep it alive
        return refresh

    return prepare


def submitit_prepare() -> Prepare:
    try:
        from submitit.slurm.slurm import SlurmInfoWatcher
    except ImportError as exc:
        raise Skip(f"submitit is not installed ({exc}); pip install '.[bench]'") from exc

    def prepare(ids: List[str], phase: str) -> Refresh:
        watcher = SlurmInfoWatcher(delay_s=600)
        for job_id in ids:
            watcher.register_job(job_id)

        def refresh() -> int:
            watcher.update()
            return sum(_expected(phase, watcher.get_state(i, mode="cache")) for i in ids)

        return refresh

    return prepare


def maestro_prepare() -> Prepare:
    try:
        from maestrowf.interfaces.script.slurmscriptadapter import SlurmScriptAdapter
    except ImportError as exc:
        raise Skip(f"maestrowf is not installed ({exc}); pip install '.[bench]'") from exc

    def prepare(ids: List[str], phase: str) -> Refresh:
        adapter = SlurmScriptAdapter(host="localhost", bank="", queue="")

        def refresh() -> int:
            _code, status = adapter.check_jobs(ids)
            return sum(_expected(phase, str(value)) for value in status.values() if value)

        return refresh

    return prepare


def _sample(
    prepare: Prepare,
    ids: List[str],
    phase: str,
    seen: Dict[str, int],
    name: str,
    scale: float = 1.0,
) -> Callable[[], float]:
    def measure() -> float:
        refresh = prepare(ids, phase)  # untimed: a fresh client
        started = time.perf_counter()
        seen[name] = refresh()
        return (time.perf_counter() - started) * 1000.0 * scale

    return measure


def _counted(
    refresh: Refresh, counter: CommandCounter, scale: float, rpcs: bool
) -> Tuple[Dict[str, int], Dict[str, int]]:
    """What one refresh asked: its commands (scaled to N) and the REST driver's requests;
    with ``rpcs`` (the bench's own cluster: nobody else's RPCs) the daemons' RPCs by type
    (``sdiag``, ``sacctmgr show stats``), which count pyslurm's in-process calls too."""
    if rpcs:
        slurm_rpcs.reset()
    counter.reset()
    refresh()
    counts = {command: round(number * scale) for command, number in counter.counts().items()}
    for request in getattr(refresh, "requests", []):
        counts[request] = counts.get(request, 0) + 1
    if not rpcs:
        return counts, {}
    dbd = {f"dbd:{name}": number for name, number in slurm_rpcs.dbd_counts().items()}
    found = {**slurm_rpcs.controller_counts(), **dbd}
    return counts, {
        name: number for name, number in found.items() if name.split(":")[-1] not in slurm_rpcs.OWN
    }


def _rpc_columns(rpcs: Optional[Dict[str, int]]) -> Dict[str, Any]:
    if not rpcs:
        return {}
    return {"rpcs": sum(rpcs.values()), "rpcs_by_type": rpcs}


def measure_phase(
    phase: str,
    sizes: List[int],
    tracked: List[str],
    prepares: Dict[str, Prepare],
    rounds: int,
    label: str = "",
    kinds: Optional[Dict[str, str]] = None,
) -> List[Dict[str, Any]]:
    """The rows of one phase, a group per size (``label`` before its name)."""
    rows: List[Dict[str, Any]] = []
    for size in sizes:
        ids = tracked[:size]
        group = f"{label}{phase}, N={size}"
        counts: Dict[str, Dict[str, int]] = {}
        rpcs: Dict[str, Dict[str, int]] = {}
        skipped: Dict[str, str] = {}
        active: Dict[str, Prepare] = {}
        # The naive loop is linear in N (one or two processes per job): timed on at
        # most NAIVE_SAMPLE jobs and scaled to N, to keep the run short.
        scale = {name: 1.0 for name in prepares}
        used = {name: ids for name in prepares}
        if NAIVE in prepares and size > NAIVE_SAMPLE:
            used[NAIVE] = ids[:NAIVE_SAMPLE]
            scale[NAIVE] = size / NAIVE_SAMPLE
        with CommandCounter() as counter:
            for name, prepare in prepares.items():
                try:
                    if name != NAIVE:
                        prepare(ids, phase)()  # warm-up (imports, caches), uncounted
                    refresh = prepare(used[name], phase)
                    counts[name], rpcs[name] = _counted(refresh, counter, scale[name], bool(label))
                    active[name] = prepare
                except Exception as exc:  # noqa: BLE001 - listed with the reason
                    skipped[name] = f"failed: {type(exc).__name__}: {exc}"[:400]
        seen: Dict[str, int] = {}
        samples, failed = interleave(
            {
                name: _sample(prep, used[name], phase, seen, name, scale[name])
                for name, prep in active.items()
            },
            rounds,
        )
        skipped.update(failed)
        for name, kind in (kinds or KINDS).items():
            if name in samples:
                answered = seen.get(name)
                rows.append(
                    row(
                        name,
                        samples[name],
                        group=group,
                        kind=kind,
                        tracked=size,
                        commands=sum(counts.get(name, {}).values()),
                        commands_by_name=counts.get(name, {}),
                        **_rpc_columns(rpcs.get(name)),
                        answered=None if answered is None else round(answered * scale[name]),
                        note=(
                            f"timed on {len(used[name])} jobs, x{scale[name]:g}"
                            if scale[name] != 1.0
                            else "asked nothing: not a refresh (within the floor)"
                            if not counts.get(name) and not rpcs.get(name)
                            else ""
                        ),
                    )
                )
            elif name in skipped:
                rows.append(skipped_row(name, skipped[name], group=group, kind=kind))
    return rows


def measure_tracked(
    adapter: Any,
    hpcb: HpcbridgeClient,
    script: str,
    prepares: Dict[str, Prepare],
    sizes: List[int],
    rounds: int,
    label: str = "",
    kinds: Optional[Dict[str, str]] = None,
) -> Tuple[List[Dict[str, Any]], Optional[float]]:
    """The rows of both phases on ``max(sizes)`` tracked jobs, and the seconds their
    submission took (None when it failed)."""
    anchor: Optional[str] = None
    tracked: List[str] = []
    rows: List[Dict[str, Any]] = []
    submit_s: Optional[float] = None
    started = time.perf_counter()
    try:
        anchor, tracked = _submit_tracked(adapter, script, max(sizes))
        submit_s = round(time.perf_counter() - started, 1)
        # The submissions asked the anchor's state: within the floor of that round a
        # status question is answered from what is known, asking nothing - each sample
        # must be a refresh that asks, so the snapshot is taken past the floor.
        time.sleep(adapter.settings.min_poll_interval + 0.5)
        hpcb.take_snapshot()
        rows += measure_phase("pending", sizes, tracked, prepares, rounds, label, kinds)
        scancel([anchor, *tracked], settle=60)
        _wait_out_of_squeue(tracked)
        rows += measure_phase("ended", sizes, tracked, prepares, rounds, label, kinds)
    finally:
        scancel(([anchor] if anchor else []) + tracked, settle=60)
    return rows, submit_s


def _measure_2205(
    sizes: List[int], rounds: int, workdir: Path
) -> Tuple[List[Dict[str, Any]], Optional[float]]:
    """The shared (22.05) cluster's rows: the CLI driver beside the raw loops and the peers."""
    script = trivial_script(workdir, "tracked.sh", "true")
    adapter = sc.hpcbridge_adapter(workdir)
    hpcb = HpcbridgeClient(adapter, workdir)
    prepares: Dict[str, Prepare] = {RAW: raw, NAIVE: naive, HPCB: hpcb.prepare}
    skipped_setup: Dict[str, str] = {}
    for name, factory in (
        (PSIJ, lambda: psij_prepare(workdir)),
        (SUBMITIT, submitit_prepare),
        (MAESTRO, maestro_prepare),
    ):
        try:
            prepares[name] = factory()
        except Skip as exc:
            skipped_setup[name] = str(exc)
        except ImportError as exc:
            skipped_setup[name] = f"not installed: {exc}"
    rows, submit_s = measure_tracked(adapter, hpcb, script, prepares, sizes, rounds)
    for name, why in skipped_setup.items():
        rows.append(skipped_row(name, why, kind=KINDS[name]))
    return rows, submit_s


def run(quick: bool, workdir: Path) -> Dict[str, Any]:
    sizes = [5] if quick else [10, 100, 500]
    rounds = 1 if quick else 3
    reason = "HPCBRIDGE_BENCH_REST=only" if rest_cluster.only() else slurm_available()
    submit_s: Optional[float] = None
    if reason:
        rows = [skipped_row(name, reason, kind=kind) for name, kind in KINDS.items()]
    else:
        rows, submit_s = _measure_2205(sizes, rounds, workdir)
    planned = [
        (f"{rest_cluster.LABEL} {phase}, N={size}", name, kind)
        for phase in ("pending", "ended")
        for size in sizes
        for name, kind in REST_KINDS.items()
    ]
    rows += rest_cluster.group_rows("slurm_rest_groups.status", quick, workdir, planned)
    if all(item.get("skipped") for item in rows):
        return skipped_scenario(NAME, TITLE, reason or rows[-1]["skipped"])
    return scenario_result(
        NAME,
        TITLE,
        unit="ms",
        higher_is_better=False,
        baseline=RAW,
        rows=rows,
        params={
            "tracked": sizes,
            "rounds": rounds,
            "tracked_jobs": f"{max(sizes)} x hpcbridge submit_job, --dependency on one held job",
            "setup_seconds": submit_s,
        },
        extra={"columns": [("rpcs", "daemons' RPCs / refresh")]},
        notes=[
            "pending: the tracked jobs wait (dependency on a held job): squeue knows them. "
            "ended: the same jobs after scancel, once squeue has forgotten them (MinJobAge): "
            "only sacct knows them.",
            "Each sample is the first refresh of a fresh client (new hpcbridge adapter over a "
            "copy of its job store as it was after submission; new PSI/J executor with the jobs "
            "attached; new submitit watcher; Maestro's adapter): all of them stop asking about "
            "a job they have seen end, so later refreshes of ended jobs cost them nothing.",
            "commands = scheduler commands one refresh runs (counted with a PATH shim in a "
            "separate, untimed refresh); answered = ids reported in their true state (PENDING; "
            "after the scancel, CANCELLED) out of N.",
            "PSI/J runs `squeue --me -t all` and Maestro `squeue -u $USER -t all`: they list every "
            "job of the user (here also other sessions' jobs on the shared test cluster), so "
            "their cost follows the queue, not N. PSI/J reports any id squeue does not list as "
            "COMPLETED (these were cancelled) without asking sacct; Maestro's sacct fallback "
            "reads fixed-width columns and gets the truncated `CANCELLED+`, which it maps to "
            "UNKNOWN; submitit reads only sacct, which lists a pending job only once slurmctld "
            "has sent it to slurmdbd (asynchronously, a while after submission).",
            "PSI/J's poll cycle is its internal _QueuePollThread._poll() (PSI/J has no public "
            "'refresh now'; its thread runs it every 30 s by default).",
            "The groups without a release are the shared Slurm 22.05 cluster; the 25.11 "
            "groups: " + rest_cluster.LISTENER + ". There the raw floor and the CLI, pyslurm "
            "and REST drivers refresh the same jobs; the REST driver's HTTP requests are "
            "counted in commands / refresh (METHOD path), its API version found before the "
            "timing (GET /openapi/v3, once per client). The raw REST rows (http.client, a "
            "connection per request): one GET jobs/state of the N ids (the light question) or "
            "one GET jobs/ (every job's whole record: what a REST client with no state asks), "
            "each then one GET slurmdb jobs of the ids slurmctld no longer lists. Nobody else "
            "uses that cluster: the "
            "daemons' RPCs of the counted refresh are counted there too (sdiag and sacctmgr "
            "show stats, reset before it; by type in the JSON), pyslurm's in-process calls "
            "included.",
        ],
        why={
            **REST_WHY,
            f"pending|{HPCB}": "its squeue lists the user's jobs (`--me`, as PSI/J's does): "
            "~3 ms less than raw's `--jobs=` of 500 ids, which squeue 22.05 matches against "
            "every job; as a fresh client of 500 jobs it then pays ~7 ms of its own CPU (thread "
            "time, squeue answered in-process from a recording; ~10.5 before issue 45.5's "
            "work): the store opened and the "
            "500 recorded rows read (~1.5 ms), the round published for the user's other "
            "processes (one row, ~1.7 ms), the rows parsed (~1.1 ms: one status per distinct "
            "row, copied per job), each answer dated and merged (~1.2 ms: a state seen again "
            "makes no status of its record), Python's garbage collector (~1.2 ms, spread over "
            "these)",
            f"ended|{HPCB}": "squeue no longer knows them, so it also runs sacct (slow here, "
            "~0.1 s) to learn how they ended, then writes the 500 new states to its store "
            "(~3.5 ms) and publishes them (~2.5 ms): ~12 ms of its own CPU in all (~18 before); "
            "PSI/J skips sacct and calls every "
            "job squeue has forgotten COMPLETED - quicker, but wrong for these cancelled jobs",
        },
    )
