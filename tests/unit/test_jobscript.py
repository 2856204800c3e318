"""The wrapper, run for real by /bin/sh: task choice, exit-code files, the index hidden."""

import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Dict, List

import pytest

from hpcbridge.engine.containers import FOLDER_INSIDE, container_words
from hpcbridge.engine.forwarding import FORWARD_PATIENCE
from hpcbridge.engine.jobscript import Running, TaskSpec, build_wrapper, wrapper_parts
from hpcbridge.engine.task_table import TASKS_PER_PART
from hpcbridge.engine.tracking import ExitRecord, read_exit_file


def _script(folder: Path, name: str, body: str) -> str:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def _run(
    wrapper: str, folder: Path, env: Dict[str, str], *args: str
) -> subprocess.CompletedProcess:
    path = folder / "wrapper.sh"
    path.write_text(wrapper)
    full = {"PATH": os.environ["PATH"], **env}
    argv = ["/bin/sh", str(path), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=full)


def _tasks(folder: Path) -> List[TaskSpec]:
    report = 'echo "$1 index=${HPCBRIDGE_TASK_INDEX-unset}"; exit "$2"\n'
    script = _script(folder, "report.sh", report)
    return [TaskSpec(script, ("a", "0")), TaskSpec(script, ("b", "4"))]


def test_many_tasks_pick_theirs_from_the_index_and_hide_it(tmp_path: Path) -> None:
    """Drivers with an environment per job (Flux, mock): the index is HPCBRIDGE_TASK_INDEX."""
    exit_file = str(tmp_path / "job.exit")
    wrapper = build_wrapper(_tasks(tmp_path), str(tmp_path), exit_file)
    result = _run(wrapper, tmp_path, {"HPCBRIDGE_TASK_INDEX": "1"})
    assert result.returncode == 4
    assert result.stdout.strip() == "b index=unset"
    assert (tmp_path / "job.exit.1").read_text().split()[0] == "4"


def test_slurm_one_task_alone_has_its_index_as_the_argument(tmp_path: Path) -> None:
    """Where arrays are refused each task goes in alone, ``sbatch WRAPPER i``."""
    exit_file = str(tmp_path / "job.exit")
    wrapper = build_wrapper(_tasks(tmp_path), str(tmp_path), exit_file, "SLURM_ARRAY_TASK_ID")
    # What the job that submitted this one had is not this job's index.
    inherited = {"HPCBRIDGE_TASK_INDEX": "0", "SLURM_ARRAY_TASK_ID": "0"}
    result = _run(wrapper, tmp_path, inherited, "1")
    assert result.returncode == 4 and result.stdout.strip() == "b index=unset"
    assert (tmp_path / "job.exit.1").read_text().split()[0] == "4"


def test_slurm_array_task_takes_the_arrays_index_not_an_inherited_one(tmp_path: Path) -> None:
    exit_file = str(tmp_path / "job.exit")
    wrapper = build_wrapper(_tasks(tmp_path), str(tmp_path), exit_file, "SLURM_ARRAY_TASK_ID")
    result = _run(wrapper, tmp_path, {"SLURM_ARRAY_TASK_ID": "0", "HPCBRIDGE_TASK_INDEX": "1"})
    assert result.returncode == 0 and result.stdout.strip() == "a index=unset"
    assert (tmp_path / "job.exit.0").read_text().split()[0] == "0"


def test_no_index_at_all_is_an_error_not_task_zero(tmp_path: Path) -> None:
    wrapper = build_wrapper(_tasks(tmp_path), str(tmp_path), str(tmp_path / "job.exit"))
    result = _run(wrapper, tmp_path, {})
    assert result.returncode == 98 and "no task" in result.stderr
    assert not list(tmp_path.glob("job.exit*"))


def test_one_task_ignores_an_inherited_index(tmp_path: Path) -> None:
    task = _tasks(tmp_path)[1]
    wrapper = build_wrapper([task], str(tmp_path), str(tmp_path / "job.exit"))
    result = _run(wrapper, tmp_path, {"HPCBRIDGE_TASK_INDEX": "0"})
    assert result.stdout.strip() == "b index=unset"
    assert (tmp_path / "job.exit").read_text().split()[0] == "4"


def test_the_exit_file_holds_the_code_then_how_long_it_ran(tmp_path: Path) -> None:
    script = _script(tmp_path, "nap.sh", "sleep 0.3\nexit 3\n")
    wrapper = build_wrapper([TaskSpec(script)], str(tmp_path), str(tmp_path / "job.exit"))
    before = datetime.now(timezone.utc)
    assert _run(wrapper, tmp_path, {}).returncode == 3
    after = datetime.now(timezone.utc)
    path = tmp_path / "job.exit"
    record = read_exit_file(path.read_text())
    # Linux: the seconds it ran, from /proc/uptime (10 ms steps), no date process.
    assert record.code == 3 and record.ran is not None and 0.29 <= record.ran < 5
    started, ended = record.times(path.stat().st_mtime)
    assert started is not None and ended is not None
    slack = timedelta(seconds=0.05)
    assert before - slack <= started <= ended <= after + slack


def test_how_long_it_ran_borrows_across_the_uptimes_decimals(tmp_path: Path) -> None:
    script = _script(tmp_path, "quick.sh", "exit 0\n")
    wrapper = build_wrapper([TaskSpec(script)], str(tmp_path), str(tmp_path / "job.exit"))
    # The uptime read at the start, then at the end: 100.95 s, then 102.08 s.
    (tmp_path / "up0").write_text("100.95 7.00\n")
    (tmp_path / "up1").write_text("102.08 7.50\n")
    parts = wrapper.split("/proc/uptime")
    assert len(parts) == 3, "the wrapper reads /proc/uptime twice"
    wrapper = f"{parts[0]}{tmp_path}/up0{parts[1]}{tmp_path}/up1{parts[2]}"
    assert _run(wrapper, tmp_path, {}).returncode == 0
    assert (tmp_path / "job.exit").read_text() == "0 +1.13\n"


def test_without_proc_the_wrapper_records_when_it_started(tmp_path: Path) -> None:
    script = _script(tmp_path, "nap.sh", "sleep 0.05\nexit 3\n")
    wrapper = build_wrapper([TaskSpec(script)], str(tmp_path), str(tmp_path / "job.exit"))
    # As on a system with no /proc: the shell cannot read the uptime there.
    assert "/proc/uptime" in wrapper
    wrapper = wrapper.replace("/proc/uptime", "/nonexistent/uptime")
    before = datetime.now(timezone.utc)
    assert _run(wrapper, tmp_path, {}).returncode == 3
    path = tmp_path / "job.exit"
    record = read_exit_file(path.read_text())
    assert record.code == 3 and record.started is not None and record.ran is None
    started, ended = record.times(path.stat().st_mtime)
    assert started is not None and ended is not None
    assert before <= started and 0.04 <= (ended - started).total_seconds() < 5


def test_older_exit_files_and_unknown_times_still_read() -> None:
    assert read_exit_file("0\n") == ExitRecord(0)
    assert read_exit_file("2 1700000000.5\n").started is not None
    assert read_exit_file("2 - 1700000000\n") == ExitRecord(
        2, None, datetime.fromtimestamp(1700000000, tz=timezone.utc)
    )
    assert read_exit_file("").code is None and read_exit_file("oops").code is None


def test_an_exit_file_with_how_long_it_ran_gives_its_start_from_the_end() -> None:
    record = read_exit_file("0 +12.50\n")
    assert record == ExitRecord(0, ran=12.5)
    started, ended = record.times(1700000000.0)
    assert ended == datetime.fromtimestamp(1700000000.0, tz=timezone.utc)
    assert started == ended - timedelta(seconds=12.5)
    assert read_exit_file("1 +oops").code == 1 and read_exit_file("1 +oops").ran is None
    assert ExitRecord(0, ran=1.0).times(None) == (None, None)  # no end: no start either


def test_a_wrapper_of_many_tasks_keeps_its_table_in_parts_each_job_reads_one(
    tmp_path: Path,
) -> None:
    script = _script(tmp_path, "say.sh", 'echo "task $1"\n')
    tasks = [TaskSpec(script, [str(i)]) for i in range(2 * TASKS_PER_PART + 50)]
    wrapper_path = str(tmp_path / "w.sh")
    exit_file = str(tmp_path / "job.exit")
    wrapper = build_wrapper(tasks, str(tmp_path), exit_file, None, Running(), wrapper_path)
    parts = wrapper_parts(tasks, wrapper_path)
    assert [path for path, _text in parts] == [f"{wrapper_path}.{k}" for k in range(3)]
    assert len(wrapper) < 3000  # no table inline
    for path, text in parts:
        labels = [line for line in text.splitlines() if re.match(r"  [0-9]+\) ", line)]
        assert len(labels) <= TASKS_PER_PART  # a hundred tasks at most
        Path(path).write_text(text)
    for index in (0, TASKS_PER_PART - 1, TASKS_PER_PART, len(tasks) - 1):
        result = _run(wrapper, tmp_path, {"HPCBRIDGE_TASK_INDEX": str(index)})
        assert result.returncode == 0 and result.stdout.strip() == f"task {index}"
        assert (tmp_path / f"job.exit.{index}").read_text().split()[0] == "0"
    for bad in (str(len(tasks)), "07", "x", "-1"):
        result = _run(wrapper, tmp_path, {"HPCBRIDGE_TASK_INDEX": bad})
        assert result.returncode == 98 and "no task" in result.stderr, (bad, result.stderr)
    # Few tasks: the table stays inline, no parts.
    assert wrapper_parts(tasks[:TASKS_PER_PART], wrapper_path) == []


def test_a_task_line_carries_odd_arguments_and_environment_whole(tmp_path: Path) -> None:
    script = _script(tmp_path, "show.sh", 'printf "[%s]" "$@"; printf "{%s}" "$ODD"\n')
    odd = 'it\'s\n$HOME `x` "q"'
    tasks = [TaskSpec(script, ("-x", "a b", odd), {"ODD": odd}), TaskSpec(script, ())]
    wrapper = build_wrapper(tasks, str(tmp_path), str(tmp_path / "job.exit"))
    result = _run(wrapper, tmp_path, {"HPCBRIDGE_TASK_INDEX": "0"})
    assert result.returncode == 0 and result.stdout == f"[-x][a b][{odd}]{{{odd}}}"
    result = _run(wrapper, tmp_path, {"HPCBRIDGE_TASK_INDEX": "1"})
    assert result.returncode == 0 and result.stdout == "[]{}"


def test_tasks_that_all_set_the_same_need_no_table_only_the_index_checked(
    tmp_path: Path,
) -> None:
    script = _script(tmp_path, "say.sh", 'echo "ran $#"\n')
    tasks = [TaskSpec(script)] * (3 * TASKS_PER_PART)
    wrapper_path = str(tmp_path / "w.sh")
    wrapper = build_wrapper(
        tasks, str(tmp_path), str(tmp_path / "job.exit"), None, Running(), wrapper_path
    )
    assert wrapper_parts(tasks, wrapper_path) == []
    assert len(wrapper) < 3000 and wrapper.count(shlex.quote(script)) == 1
    for index in (0, len(tasks) - 1):
        result = _run(wrapper, tmp_path, {"HPCBRIDGE_TASK_INDEX": str(index)})
        assert result.returncode == 0 and result.stdout.strip() == "ran 0"
        assert (tmp_path / f"job.exit.{index}").read_text().split()[0] == "0"
    for bad in (str(len(tasks)), "07", "x", "-1", ""):
        result = _run(wrapper, tmp_path, {"HPCBRIDGE_TASK_INDEX": bad})
        assert result.returncode == 98 and "no task" in result.stderr, (bad, result.stderr)


def test_bundled_scripts_travel_in_the_table_and_each_task_writes_its_own(
    tmp_path: Path,
) -> None:
    """Distinct scripts of one submission: not staged one by one but written by their
    task when it starts, whole and executable, then run like a staged one."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    texts = {
        str(jobs / "a.py"): "#!/usr/bin/env python3\nimport sys\nprint('py', sys.argv[1:])\n",
        # a line like the usual delimiter, and text a shell would expand unquoted
        str(jobs / "b.sh"): "printf '%s\\n' \"$1\" '`x` $HOME'\nHPCB_SCRIPT_END\nexit 5\n",
        str(jobs / "c.sh"): "",
    }
    tasks = [TaskSpec(path, (str(k),)) for k, path in enumerate(texts)]
    wrapper_path = str(jobs / "w.sh")
    wrapper = build_wrapper(
        tasks, str(jobs), str(jobs / "job.exit"), None, Running(), wrapper_path, texts
    )
    parts = wrapper_parts(tasks, wrapper_path, texts)
    assert [path for path, _ in parts] == [f"{wrapper_path}.0"]  # in a part, not inline
    assert "import sys" not in wrapper
    for path, text in parts:
        Path(path).write_text(text)
    result = _run(wrapper, jobs, {"HPCBRIDGE_TASK_INDEX": "0"})
    assert result.returncode == 0 and result.stdout == "py ['0']\n", result.stderr
    result = _run(wrapper, jobs, {"HPCBRIDGE_TASK_INDEX": "1"})
    assert result.returncode == 5 and result.stdout == "1\n`x` $HOME\n", result.stderr
    assert "HPCB_SCRIPT_END: not found" in result.stderr  # ran as a line of b.sh
    result = _run(wrapper, jobs, {"HPCBRIDGE_TASK_INDEX": "2"})
    assert result.returncode == 0, result.stderr
    for path, text in texts.items():
        assert Path(path).read_text() == text
        assert Path(path).stat().st_mode & 0o777 == 0o700
    # A task run again (requeued) finds its script there and leaves it alone.
    Path(tasks[0].script).write_text("#!/bin/sh\necho kept\n")
    result = _run(wrapper, jobs, {"HPCBRIDGE_TASK_INDEX": "0"})
    assert result.stdout == "kept\n"


def test_what_cannot_travel_in_a_table_is_copied() -> None:
    from hpcbridge.engine.task_table import BUNDLED_SCRIPT_MAX, can_bundle

    assert can_bundle("echo hi\n") and can_bundle("")
    assert not can_bundle("echo hi")  # a here-document would add the line end
    assert not can_bundle("a\0b\n")
    assert not can_bundle("#" * BUNDLED_SCRIPT_MAX + "\n")


# -- warning signals ------------------------------------------------------------------

WARNED = """trap 'echo "script got USR1"; exit 5' USR1
echo started > started
i=0; while [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
exit 3
"""


#: traps the signal only after a while: a signal passed on before that would end it
LATE = """sleep 0.5
trap 'echo "script got USR1"; exit 5' USR1
echo started > started
i=0; while [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
exit 3
"""

#: the wrapper's lines just before and just after it starts the script
BEFORE_START = 'hpcb_first=; IFS= read -r hpcb_first < "$hpcb_script" || true'
AFTER_START = "hpcb_child=$!"

needs_proc = pytest.mark.skipif(
    not os.path.exists("/proc/self/status"), reason="no /proc here: the wrapper sends at once"
)

#: the shells a wrapper meets as /bin/sh: dash (Debian), bash in POSIX mode (RHEL)
SHELLS = [
    pytest.param("/bin/sh", id="sh"),
    pytest.param(
        "bash --posix",
        id="bash",
        marks=pytest.mark.skipif(not shutil.which("bash"), reason="no bash here"),
    ),
]


def _signal_wrapper(
    folder: Path,
    forward: "str | None",
    body: str = WARNED,
    edit: "Dict[str, str] | None" = None,
    wait: bool = True,
    shell: str = "/bin/sh",
) -> "subprocess.Popen[str]":
    """The wrapper of a script of ``body``, started; ``edit``: its lines replaced (a
    signal sent from inside at a point of its own); ``wait``: until the script runs."""
    exit_file = str(folder / "job.exit")
    script = _script(folder, "warned.sh", body)
    wrapper = build_wrapper(
        [TaskSpec(script)], str(folder), exit_file, running=Running(forward=forward)
    )
    for old, new in (edit or {}).items():
        assert wrapper.count(old) == 1, old
        wrapper = wrapper.replace(old, new)
    path = folder / "wrapper.sh"
    path.write_text(wrapper)
    env = {"PATH": os.environ["PATH"]}
    argv = [*shell.split(), str(path)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    for _ in range(200 if wait else 0):  # until the script runs
        if (folder / "started").exists():
            break
        subprocess.run(["sleep", "0.02"], check=True)
    return process


def _ended_by_usr1(process: "subprocess.Popen[str]", folder: Path) -> None:
    out, _ = process.communicate(timeout=60)
    assert "script got USR1" in out
    assert process.returncode == 5
    assert (folder / "job.exit").read_text().split()[0] == "5"


@pytest.mark.parametrize("shell", SHELLS)
def test_a_signal_to_the_wrapper_alone_is_passed_on_to_the_script(
    tmp_path: Path, shell: str
) -> None:
    """``signal=B:USR1``: Slurm signals the batch shell only; the script gets it."""
    process = _signal_wrapper(tmp_path, "USR1", shell=shell)
    process.send_signal(signal.SIGUSR1)
    _ended_by_usr1(process, tmp_path)


@needs_proc
@pytest.mark.parametrize("shell", SHELLS)
def test_a_signal_before_the_script_started_reaches_it_once_it_catches_it(
    tmp_path: Path, shell: str
) -> None:
    """Sent to the wrapper before the script has a pid, then passed on when the script
    has its trap (sent at once, it would end a script still in its first ``sleep``)."""
    kill = {BEFORE_START: "kill -USR1 $$; " + BEFORE_START}
    process = _signal_wrapper(tmp_path, "USR1", LATE, kill, wait=False, shell=shell)
    _ended_by_usr1(process, tmp_path)


@needs_proc
@pytest.mark.parametrize("shell", SHELLS)
def test_a_signal_before_the_scripts_own_trap_waits_for_it(tmp_path: Path, shell: str) -> None:
    """(bash as sh: the wait after the one that gave the script's status must not say 127)"""
    kill = {AFTER_START: AFTER_START + "; kill -USR1 $$"}
    process = _signal_wrapper(tmp_path, "USR1", LATE, kill, wait=False, shell=shell)
    _ended_by_usr1(process, tmp_path)


@needs_proc
def test_signals_from_the_wrappers_first_trap_on_all_reach_the_script(tmp_path: Path) -> None:
    """From outside, as early as the wrapper catches USR1, one every few milliseconds
    (the script ignores the ones after the first: while it ends, sh's default would)."""
    body = LATE.replace("trap 'echo", 'trap \'trap "" USR1; echo')
    assert body != LATE
    process = _signal_wrapper(tmp_path, "USR1", body, wait=False)
    usr1 = 1 << (signal.SIGUSR1 - 1)
    sent = 0
    while process.poll() is None:
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
        except OSError:
            break
        caught = int(re.search(r"^SigCgt:\s*([0-9a-f]+)", status, re.M).group(1), 16)
        if caught & usr1:
            process.send_signal(signal.SIGUSR1)
            sent += 1
        time.sleep(0.005)
    assert sent > 0
    _ended_by_usr1(process, tmp_path)


@needs_proc
def test_a_script_that_never_catches_the_signal_gets_it_all_the_same(tmp_path: Path) -> None:
    """Its default action ends it (128 + 10), once the wrapper has waited its patience
    (cut here to half a second); signalled once the script runs (before its exec the
    process is the wrapper's copy, which would take the signal for itself)."""
    body = "echo started > started\n" + LATE.replace(
        "trap 'echo \"script got USR1\"; exit 5' USR1\n", ""
    )
    patience = f"-lt {FORWARD_PATIENCE} ]"
    started = "; until [ -e started ]; do sleep 0.05; done; kill -USR1 $$"
    edit = {AFTER_START: AFTER_START + started, patience: "-lt 5 ]"}
    process = _signal_wrapper(tmp_path, "USR1", body, edit, wait=False)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGUSR1 and not out
    assert (tmp_path / "job.exit").read_text().split()[0] == str(128 + signal.SIGUSR1)


@needs_proc
def test_a_script_that_ignores_the_signal_goes_on(tmp_path: Path) -> None:
    body = LATE.replace("trap 'echo \"script got USR1\"; exit 5' USR1", "trap '' USR1")
    kill = {AFTER_START: AFTER_START + "; sleep 1; kill -USR1 $$"}
    process = _signal_wrapper(tmp_path, "USR1", body, kill, wait=False)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 3 and (tmp_path / "started").exists()


def test_a_signal_to_the_wrapper_is_survived_and_the_scripts_exit_recorded(tmp_path: Path) -> None:
    """Without B: (Flux signals the whole process group) the wrapper must live on to
    record what the script did: here the signal reaches the wrapper alone."""
    process = _signal_wrapper(tmp_path, None)
    process.send_signal(signal.SIGUSR1)
    out, _ = process.communicate(timeout=30)
    assert "script got USR1" not in out
    assert process.returncode == 3
    assert (tmp_path / "job.exit").read_text().split()[0] == "3"


# -- containers ------------------------------------------------------------------------


def test_every_runtime_the_settings_take_has_its_words() -> None:
    from hpcbridge.engine.containers import CONTAINER_RUNTIMES
    from hpcbridge.settings.schedulers import CONTAINER_RUNTIMES as NAMES

    assert tuple(CONTAINER_RUNTIMES) == NAMES


def test_a_script_runs_inside_the_runtimes_command_with_its_folder_bound(tmp_path: Path) -> None:
    """A stand-in runtime (a script named ch-run on PATH) shows what it is handed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ch-run"
    # what ch-run would do here: the folder is the working directory, bound or not
    fake.write_text('#!/bin/sh\necho "ch-run $*"\nshift 6; exec "$@"\n')
    fake.chmod(0o755)
    script = _script(tmp_path, "step.sh", 'echo "step in $PWD"; exit 6\n')
    running = Running(container=container_words("ch-run", "/images/deb 12"))
    wrapper = build_wrapper(
        [TaskSpec(script)], str(tmp_path), str(tmp_path / "job.exit"), None, running
    )
    path = tmp_path / "wrapper.sh"
    path.write_text(wrapper)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(["/bin/sh", str(path)], capture_output=True, text=True, env=env)
    folder = str(tmp_path)
    said = result.stdout.splitlines()
    assert said[0] == f"ch-run -b {folder}:/mnt -c /mnt /images/deb 12 -- ./step.sh"
    assert said[1] == f"step in {folder}"
    assert result.returncode == 6 and (tmp_path / "job.exit").read_text().split()[0] == "6"


def test_doctor_says_which_runtime_runs_a_container_and_whether_it_is_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpcbridge.settings.config import Settings
    from hpcbridge.settings.doctor import container_check

    monkeypatch.setenv("PATH", str(tmp_path))  # no runtime here
    settings = Settings.from_env(env={"HPCBRIDGE_CONTAINER": "/img"}, state_dir=str(tmp_path))
    missing = container_check(settings)
    assert not missing.ok and "ch-run (default) is not on PATH here" in missing.detail
    fake = tmp_path / "apptainer"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    settings = Settings.from_env(
        env={"HPCBRIDGE_CONTAINER_RUNTIME": "apptainer"}, state_dir=str(tmp_path)
    )
    found = container_check(settings)
    assert found.ok and found.detail == f"apptainer (HPCBRIDGE_CONTAINER_RUNTIME): {fake}"


def test_the_launcher_called_inside_a_container_runs_outside_each_task_in_the_image(
    tmp_path: Path,
) -> None:
    """Stand-ins: apptainer (runs the command in place) and a launcher that shows its
    options and runs what follows them; the step calls ``$HPCBRIDGE_LAUNCHER``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "apptainer"
    fake.write_text('#!/bin/sh\nshift 6; exec "$@"\n')  # exec --bind D --pwd D IMAGE
    fake.chmod(0o755)
    launcher = bin_dir / "fakerun"
    launcher.write_text(
        '#!/bin/sh\necho "fakerun $*"\nwhile [ "$1" != apptainer ]; do shift; done\nexec "$@"\n'
    )
    launcher.chmod(0o755)
    script = _script(
        tmp_path,
        "step.sh",
        '$HPCBRIDGE_LAUNCHER -n 2 echo "it\'s here"\n'
        '$HPCBRIDGE_LAUNCHER -n 1 -- sh -c "exit 4"; echo "launch said $?"\n'
        "exit 0\n",
    )
    running = Running(
        launcher="fakerun",
        container=container_words("apptainer", "/images/deb 12"),
        inside=FOLDER_INSIDE["apptainer"],
    )
    wrapper = build_wrapper(
        [TaskSpec(script)], str(tmp_path), str(tmp_path / "job.exit"), None, running
    )
    path = tmp_path / "wrapper.sh"
    path.write_text(wrapper)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(
        ["/bin/sh", str(path)], capture_output=True, text=True, env=env, timeout=60
    )
    folder = str(tmp_path)
    said = result.stdout.splitlines()
    image_words = f"apptainer exec --bind {folder} --pwd {folder} /images/deb 12"
    assert said[:2] == [f"fakerun -n 2 {image_words} echo it's here", "it's here"], said
    assert said[2] == f"fakerun -n 1 {image_words} sh -c exit 4", said
    assert said[3] == "launch said 4", said
    assert result.returncode == 0, result.stderr
    assert not list(tmp_path.glob(".hpcbridge-launch.*"))  # the relay is gone with the step


def test_no_launcher_no_relay(tmp_path: Path) -> None:
    running = Running(container=container_words("ch-run", "img"), inside=FOLDER_INSIDE["ch-run"])
    wrapper = build_wrapper([TaskSpec("/bin/true")], str(tmp_path), "x.exit", None, running)
    assert 'if [ -n "$HPCBRIDGE_LAUNCHER" ]; then' in wrapper  # decided when it runs
    plain = build_wrapper([TaskSpec("/bin/true")], str(tmp_path), "x.exit", None, Running())
    assert "hpcb_relay" not in plain
