"""The site's keys reach real Slurm: read back from the controller's own record.

One job per target (22.05 with the commands, locally and over SSH; 25.11 through
pyslurm) asks for whole nodes (``exclusive``), memory per CPU, no requeue, a start an
hour away (``begin``: it stays PENDING, reason BeginTime) and a warning signal;
``scontrol show job`` then says OverSubscribe=NO, MinMemoryCPU, Requeue=0 and the
EligibleTime asked.  A second job asks for ``requeue`` and a reservation this module
makes: Requeue=1 and Reservation=<it>.  A reservation that does not exist is Slurm's
refusal, said in Slurm's words.

Options in sbatch's own words (``native``) reach the record too (a hold, a nice
value, mail types; through pyslurm they go in by sbatch), and one that names what
hpcbridge owns, one sbatch lacks or one a key says is refused before anything is
staged.

The warning signal reaches a step the script started with ``$HPCBRIDGE_LAUNCHER``
(srun) before the time limit, as Slurm sends it without ``B:``; with ``B:`` Slurm
signals the batch shell - hpcbridge's wrapper - which passes it on to the script.

The test clusters declare two GPUs (character devices stand for them,
``containers/slurm/start.sh``): each way of asking for them schedules, the job sees
``CUDA_VISIBLE_DEVICES``, and asking for more than exist is Slurm's refusal.
"""

from __future__ import annotations

import math
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Dict, Iterator, Tuple

import pytest

from hpcbridge.errors import JobSubmissionError, ResourceError
from hpcbridge.model import JobState
from hpcbridge.request.begins import format_begin
from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter
from tests.support.begins import begin_bounds, begin_forms
from tests.support.slurm_clusters import (
    TARGETS,
    Target,
    cluster_for,
    executor_for,
    make_adapter,
    run_slurm,
)

pytestmark = pytest.mark.slurm

LABELS = ("22.05-cli", "22.05-cli-ssh", "25.11-native", "25.11-cli")


@pytest.fixture(scope="module", params=LABELS)
def target(request: pytest.FixtureRequest) -> Target:
    return TARGETS[request.param]


@pytest.fixture(scope="module")
def cluster(target: Target) -> Iterator[Dict[str, str]]:
    yield from cluster_for(target)


def record(job_id: str, env: Dict[str, str]) -> Dict[str, str]:
    shown = run_slurm(["scontrol", "--oneliner", "show", "job", job_id], env)
    assert shown.returncode == 0, shown.stderr
    pairs = (word.split("=", 1) for word in shown.stdout.split() if "=" in word)
    return {key: value for key, value in pairs}


def script(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "site.sh"
    path.write_text("#!/bin/sh\necho site\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def adapter(
    request: pytest.FixtureRequest, cluster: Dict[str, str], target: Target, tmp_path: Path
) -> RealSlurmAdapter:
    ssh = target.transport == "ssh"
    return make_adapter(
        cluster,
        tmp_path,
        executor_for(target.transport, request),
        remote_workdir=request.getfixturevalue("ssh_remote_dir") if ssh else None,
        command_env={"SLURM_CONF": cluster["SLURM_CONF"]} if ssh else None,
    )


def test_the_site_keys_are_in_the_controllers_record(
    adapter: RealSlurmAdapter, cluster: Dict[str, str], tmp_path: Path
) -> None:
    begin = datetime.fromtimestamp(math.ceil(datetime.now().timestamp() + 3600))
    job_id = adapter.submit_job(
        script(tmp_path / "scripts"),
        {
            "time": "5",
            "exclusive": True,
            "mem_per_cpu": "100M",
            "requeue": False,
            "begin": begin,
            "signal": "USR1@90",
        },
    )
    try:
        shown = record(job_id, cluster)
        assert shown["OverSubscribe"] == "NO"
        assert shown["MinMemoryCPU"] == "100M"
        assert shown["Requeue"] == "0"
        assert shown["EligibleTime"] == format_begin(begin.timestamp())
        assert shown["JobState"] == "PENDING" and shown["Reason"] == "BeginTime"
    finally:
        adapter.cancel_job(job_id)


def test_each_begin_form_is_the_start_slurm_holds_the_job_until(
    adapter: RealSlurmAdapter, cluster: Dict[str, str], tmp_path: Path
) -> None:
    """Each form of ``begin`` (sbatch's, Flux's, times of day, dates): the dry run
    shows the moment in Slurm's words, and the job waits for it (BeginTime)."""
    path = script(tmp_path / "scripts")
    submitted = []
    try:
        for text in begin_forms(datetime.now()):
            before = time.time()
            dry = adapter.describe_submission(path, {"begin": text, "time": "5"})
            job_id = adapter.submit_job(path, {"begin": text, "time": "5"})
            submitted.append(job_id)
            first, last = begin_bounds(text, before, time.time())
            said = [format_begin(moment) for moment in range(first, last + 1)]
            words = {"cli": "--begin={}", "native": "begin_time={}"}[adapter.open().driver.name]
            moments = said if words.startswith("--") else range(first, last + 1)
            assert any(words.format(moment) in dry for moment in moments), (text, dry)
            shown = record(job_id, cluster)
            assert shown["EligibleTime"] in said, (text, shown["EligibleTime"], said)
            assert (shown["JobState"], shown["Reason"]) == ("PENDING", "BeginTime"), text
    finally:
        if submitted:
            adapter.cancel_jobs(submitted)


def test_a_reservation_and_requeue_are_in_the_controllers_record(
    adapter: RealSlurmAdapter, cluster: Dict[str, str], tmp_path: Path
) -> None:
    name = f"hpcb-{uuid.uuid4().hex[:6]}"
    made = run_slurm(
        [
            "scontrol",
            "create",
            "reservation",
            f"reservationname={name}",
            "starttime=now+1day",
            "duration=10",
            "accounts=hpcb",
            "nodecnt=1",
        ],
        cluster,
    )
    assert made.returncode == 0, made.stderr
    try:
        job_id = adapter.submit_job(
            script(tmp_path / "scripts"), {"time": "5", "reservation": name, "requeue": True}
        )
        try:
            shown = record(job_id, cluster)
            assert shown["Reservation"] == name
            assert shown["Requeue"] == "1"
        finally:
            adapter.cancel_job(job_id)
        with pytest.raises(JobSubmissionError, match="(?i)reservation"):
            adapter.submit_job(script(tmp_path / "scripts"), {"reservation": name + "-nosuch"})
    finally:
        run_slurm(["scontrol", "delete", f"reservationname={name}"], cluster)


def test_native_sbatch_options_are_in_the_controllers_record(
    adapter: RealSlurmAdapter, cluster: Dict[str, str], tmp_path: Path
) -> None:
    native = {"slurm": ["--hold", "--nice", "7", "--mail-type=END"], "flux": ["--bogus"]}
    job_id = adapter.submit_job(script(tmp_path / "scripts"), {"time": "5", "native": native})
    try:
        shown = record(job_id, cluster)
        assert shown["Reason"] == "JobHeldUser" and shown["Priority"] == "0"
        assert shown["Nice"] == "7"
        assert shown["MailType"] == "END"
    finally:
        adapter.cancel_job(job_id)


@pytest.mark.parametrize(
    "option, said",
    [
        ("--output=elsewhere.out", "give the output key"),
        ("--out=elsewhere.out", "--out stands for --output"),
        ("--comment=mine", "the comment carries the key"),
        ("--time=10", "the time key says it"),
        ("--nicce=3", "has no option --nicce; did you mean --nice"),
        ("--licenses", "takes a value"),
    ],
)
def test_a_refused_native_option_stages_nothing(
    adapter: RealSlurmAdapter, tmp_path: Path, option: str, said: str
) -> None:
    with pytest.raises(ResourceError, match=said):
        adapter.submit_job(script(tmp_path / "scripts"), {"native": {"slurm": [option]}})
    listed = adapter.executor.run(["ls", "-A", adapter.remote_workdir], timeout=30)
    assert not listed.stdout.strip(), listed.stdout


STEP_TRAPS_USR1 = """$HPCBRIDGE_LAUNCHER bash -c '
trap "echo step got USR1; exit 0" USR1
for i in $(seq 1 300); do sleep 0.5; done
echo no signal'
"""

SCRIPT_TRAPS_USR1 = """trap 'echo script got USR1; exit 0' USR1
i=0; while [ $i -lt 300 ]; do sleep 0.5; i=$((i + 1)); done
echo no signal
"""

#: signal, the script, what it says when signalled, the targets tried (each driver and
#: transport once: a case waits ~30 s for slurmctld's periodic look at time limits)
SIGNALS = [
    ("USR1@110", STEP_TRAPS_USR1, "step got USR1", ("22.05-cli", "25.11-native")),
    # B: reaches the batch shell - hpcbridge's wrapper - which passes it on to the script.
    ("B:USR1@110", SCRIPT_TRAPS_USR1, "script got USR1", ("22.05-cli-ssh", "25.11-native")),
]


@pytest.mark.parametrize("signal, body, said, tried", SIGNALS, ids=["step", "batch-shell"])
def test_a_warning_signal_reaches_the_job_before_its_limit(
    adapter: RealSlurmAdapter,
    target: Target,
    tmp_path: Path,
    signal: str,
    body: str,
    said: str,
    tried: Tuple[str, ...],
) -> None:
    if target.label not in tried:
        pytest.skip(f"the {signal} case is tried on {' and '.join(tried)} (~30 s each)")
    folder = tmp_path / "scripts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "warned.sh"
    path.write_text("#!/bin/sh\n" + body)
    # 2 minutes allowed, the signal 110 s before the end; slurmctld looks every few seconds.
    job_id = adapter.submit_job(str(path), {"time": "2", "signal": signal})
    final = adapter.wait(job_id, poll_interval=1.0, timeout=150)
    log = adapter.get_job_logs(job_id)
    assert said in log and "no signal" not in log, log
    assert final.state is JobState.COMPLETED and final.exit_code == 0


GPU_ASKS = [
    ({"gpus": 1}, "TresPerJob", "gres/gpu:1", "0"),
    ({"gpus_per_node": 2, "nodes": 1}, "TresPerNode", "gres/gpu:2", "0,1"),
    ({"gpus_per_task": 1, "ntasks": 2}, "TresPerTask", "gres/gpu:1", "0,1"),
    ({"gres": "gpu:1"}, "TresPerNode", "gres/gpu:1", "0"),
]


@pytest.mark.parametrize("asked, field, value, visible", GPU_ASKS, ids=lambda x: str(x))
def test_gpus_schedule_and_the_job_sees_them(
    adapter: RealSlurmAdapter,
    cluster: Dict[str, str],
    tmp_path: Path,
    asked: Dict[str, object],
    field: str,
    value: str,
    visible: str,
) -> None:
    folder = tmp_path / "scripts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gpus.sh"
    path.write_text('#!/bin/sh\necho "visible=$CUDA_VISIBLE_DEVICES"\n')
    job_id = adapter.submit_job(str(path), {"time": "1", **asked})
    shown = record(job_id, cluster)
    # 22.05 writes gres:gpu:N, 25.11 gres/gpu:N - or gres/gpu=N for a job sbatch sent
    assert shown[field].replace("gres:", "gres/").replace("gpu=", "gpu:") == value, shown
    final = adapter.wait(job_id, poll_interval=1.0, timeout=60)
    assert final.state is JobState.COMPLETED
    assert f"visible={visible}" in adapter.get_job_logs(job_id)


@pytest.mark.parametrize("asked", [{"gpus": 3}, {"gres": "gpu:3"}], ids=["gpus", "gres"])
def test_more_gpus_than_exist_is_slurms_refusal(
    adapter: RealSlurmAdapter, tmp_path: Path, asked: Dict[str, object]
) -> None:
    with pytest.raises(JobSubmissionError, match="Requested node configuration is not available"):
        adapter.submit_job(script(tmp_path / "scripts"), asked)
    listed = adapter.executor.run(["ls", "-A", adapter.remote_workdir], timeout=30)
    assert not listed.stdout.strip(), listed.stdout
