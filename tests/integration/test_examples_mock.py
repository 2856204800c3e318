"""The examples run as documented, on the mock scheduler."""

import subprocess
import sys

from tests.conftest import REPO
from tests.support.cli import hpcbridge


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
