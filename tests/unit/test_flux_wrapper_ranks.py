"""The wrapper as the tasks of a Flux plain job: one exit-code file per rank, the
highest merged once every rank has written; HPCBRIDGE_LAUNCHER exported."""

import os
import subprocess
from pathlib import Path
from typing import Dict

from hpcbridge.engine.jobscript import Running, TaskSpec, build_wrapper


def _wrapper(folder: Path, body: str, launcher: str = "") -> Path:
    script = folder / "task.sh"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    wrapper = folder / "wrapper.sh"
    text = build_wrapper(
        [TaskSpec(str(script))], str(folder), str(folder / "job.exit"), None, Running(launcher)
    )
    wrapper.write_text(text)
    return wrapper


def _run(wrapper: Path, env: Dict[str, str]) -> subprocess.CompletedProcess:
    full = {"PATH": os.environ["PATH"], **env}
    return subprocess.run(["/bin/sh", str(wrapper)], capture_output=True, text=True, env=full)


def test_each_rank_records_its_code_and_the_last_writes_the_highest(tmp_path: Path) -> None:
    wrapper = _wrapper(tmp_path, 'exit "$((FLUX_TASK_RANK * 5))"\n')
    ranks = {"HPCBRIDGE_EXIT_RANKS": "2"}
    assert _run(wrapper, {**ranks, "FLUX_TASK_RANK": "1"}).returncode == 5
    assert (tmp_path / "job.exit.rank1").read_text().strip() == "5"
    assert not (tmp_path / "job.exit").exists()  # rank 0 has not ended yet
    assert _run(wrapper, {**ranks, "FLUX_TASK_RANK": "0"}).returncode == 0
    assert (tmp_path / "job.exit").read_text().split()[0] == "5"


def test_without_ranks_the_exit_file_is_written_directly(tmp_path: Path) -> None:
    wrapper = _wrapper(tmp_path, "exit 3\n")
    assert _run(wrapper, {"FLUX_TASK_RANK": "0"}).returncode == 3
    assert (tmp_path / "job.exit").read_text().split()[0] == "3"
    assert not list(tmp_path.glob("job.exit.rank*"))


def test_the_ranks_variable_is_not_inherited_by_the_script(tmp_path: Path) -> None:
    wrapper = _wrapper(tmp_path, 'echo "ranks=${HPCBRIDGE_EXIT_RANKS-unset}"\n')
    result = _run(wrapper, {"HPCBRIDGE_EXIT_RANKS": "1", "FLUX_TASK_RANK": "0"})
    assert result.stdout.strip() == "ranks=unset"
    assert (tmp_path / "job.exit").read_text().split()[0] == "0"


def test_the_launcher_is_exported(tmp_path: Path) -> None:
    body = 'echo "[$HPCBRIDGE_LAUNCHER]"; sh -c \'echo "child [$HPCBRIDGE_LAUNCHER]"\'\n'
    result = _run(_wrapper(tmp_path, body, launcher="flux run"), {})
    assert result.stdout.splitlines() == ["[flux run]", "child [flux run]"]
    assert _run(_wrapper(tmp_path, body), {}).stdout.splitlines() == ["[]", "child []"]
