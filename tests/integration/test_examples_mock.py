"""The examples run as documented, on the mock scheduler."""

import subprocess
import sys

from hpcbridge import JobState
from tests.conftest import REPO
from tests.support.cli import hpcbridge
from tests.support.notebooks import run_notebook


def test_hello_bye_study(state_dir):
    result = subprocess.run(
        [sys.executable, str(REPO / "examples/hello_bye/study.py"), "--poll-interval", "0.3"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "32 of 32 steps COMPLETED" in result.stdout
    assert "Hello, Pam!" in result.stdout


def test_submit_many_with_args_file(state_dir, tmp_path):
    args_file = tmp_path / "args.txt"
    args_file.write_text("# greeting name\nHello Pam\nCiao 'Jim Halpert'\n\nHey Michael\n")
    result = hpcbridge(
        "submit-many",
        str(REPO / "examples/hello_bye/hello.sh"),
        "--args-file",
        str(args_file),
        "--wait",
        "--poll-interval",
        "0.3",
    )
    assert result.returncode == 0, result.stderr
    ids = result.stdout.split()
    assert len(ids) == 3
    assert "Ciao, Jim Halpert!" in hpcbridge("logs", ids[1], check=True).stdout


def test_the_notebook_follows_jobs_while_its_loop_keeps_ticking(state_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the notebook writes its job script
    namespace, printed = run_notebook(REPO / "examples/notebook/follow_jobs.ipynb")
    ids, finals = namespace["ids"], namespace["finals"]
    assert [finals[job_id].state for job_id in ids] == [JobState.COMPLETED] * 3 + [
        JobState.FAILED,
        JobState.COMPLETED,
    ]
    followed = [line for line in printed[2].splitlines() if line.startswith("job ")]
    for job_id in ids:  # each job's changes once, in order, ending where its wait did
        seen = [line.rsplit(" ", 1)[1] for line in followed if line.startswith(f"job {job_id}:")]
        order = ["PENDING", "RUNNING", finals[job_id].state.value]
        assert seen[-1] == order[-1] and seen == [state for state in order if state in seen]
    # five 1-second jobs on the mock's slots: the 50 ms ticker went on ticking meanwhile
    assert namespace["followed_ticks"] > 10
    assert namespace["ticking"].cancelled()
