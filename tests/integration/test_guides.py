"""The guides in docs/guides/ run as written, so they cannot drift from hpcbridge.

Every fenced block with a ``<!-- test: KIND -->`` marker on the line before it
is run (the format, the kinds and the output rule are in
``tests/support/guides.py``).  The blocks of one guide and one kind form one
bash script, run with ``bash -euo pipefail`` in document order: a later block
uses the ids, variables and files of an earlier one.  A ``console`` block's
documented output is checked line by line: each line must match a line the
command printed, with numbers of two or more digits (ids, times) and Flux ids
free to differ, single digits (exit codes) exact, and ``…`` matching anything;
a line that is only ``…`` marks lines left out.

Each script runs in a fresh temporary folder with a fresh ``HOME`` and
``HPCBRIDGE_STATE_DIR``, no ``HPCBRIDGE_*``/``EXAMLOPS_*``/``FLUX_*``/``SLURM_*``
variables from outside, ``$REPO`` set to this checkout (the guides say "from a
checkout of hpcbridge, with ``REPO`` set to it"), and the interpreter running
the tests first on ``PATH`` (its ``hpcbridge`` and ``python3``).  On top, per
kind (a kind whose component is absent skips with the reason):

``mock``        nothing.
``slurm``       ``SLURM_CONF`` of the Slurm test cluster (containers/slurm).
``ssh+slurm``   the sshd test server (containers/sshd) as the ``Host hpcb-test``
                alias in ``~/.ssh/config`` (the fresh ``HOME``) and a fresh remote
                ``HPCBRIDGE_REMOTE_WORKDIR`` (removed afterwards); the Slurm test
                cluster must run.  The guide itself passes ``SLURM_CONF`` with
                ``HPCBRIDGE_COMMAND_ENV``: nothing of the SSH user's is changed.
``flux``        flux-core's ``bin`` on ``PATH`` (hpcbridge finds the Python
                bindings beside it: no ``PYTHONPATH``) and ``FLUX_URI`` of a
                broker started here with the project's testing helpers (16
                virtual cores, the anonymous queue), as inside an allocation.
``container``   mmdebstrap and Charliecloud, the system's ``/usr/bin`` first on ``PATH``
                (``ch-image`` runs on its ``python3``, which has ``lark``).
``flux+accounting``  as ``flux``, with a broker of its own, where flux-core 0.88 has
                flux-accounting beside it (the guide sets accounting up in it).
``flux+slurm``  flux-core's ``bin`` on ``PATH`` and ``SLURM_CONF``; no
                ``FLUX_URI`` (a login node).
``ssh+flux+slurm``  as ``ssh+slurm``, and flux-core in ``/opt/flux-0.88`` (the
                path the guide puts on the login node's ``PATH``).
``totp+slurm``  the sshd test server with a second factor (containers/sshd-totp) in
                ``HPCBRIDGE_SSH_HOST``/``_PORT``/``_USER``/``_KEY``/``_KNOWN_HOSTS`` (ssh reads
                the ``~/.ssh/config`` of the user's passwd entry, not of the fresh ``HOME``),
                a short ``XDG_RUNTIME_DIR`` of its own for the master sockets, the code typed
                by ``containers/sshd-totp/askpass.sh`` (``SSH_ASKPASS``), and a fresh remote
                ``HPCBRIDGE_REMOTE_WORKDIR``; the Slurm test cluster must run.
``slurmrestd``  not here: test_slurm_rest_jwt.py runs it on a cluster of its own.

A guide that starts a Slurm job keeps its id in ``$slurm_job``: the script's
exit trap cancels it, also when a block fails.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, Iterator, List

import pytest

from tests.support.guides import (
    KINDS,
    OWN_MODULE_KINDS,
    GuideError,
    blocks_by_kind,
    build_script,
    check_outputs,
    extract_blocks,
    guide_files,
    line_matches,
    missing_lines,
)
from tests.support.ssh import alias_entry

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
GUIDES = guide_files(DOCS)
#: seconds one guide's script may take (all of them together stay near a minute)
SCRIPT_TIMEOUT = 180.0
SLURM_STATE = Path(os.environ.get("HPCBRIDGE_SLURM_STATE", "/tmp/hpcbridge-slurm"))
#: what the guides call the cluster in ~/.ssh/config
SSH_ALIAS = "hpcb-test"
#: the flux-core the SSH section of the nested-broker guide puts on the login node's PATH
GUIDE_FLUX = "/opt/flux-0.88/bin/flux"
#: what the container guide runs, and where the system's own programs are
CONTAINER_TOOLS = ("mmdebstrap", "ch-image", "ch-run", "ch-convert")
SYSTEM_PATH = "/usr/bin:/bin"
#: seconds the container guide may take: mmdebstrap downloads a minimal Debian
CONTAINER_TIMEOUT = 420.0


#: guides run by a module of the own lane's mock modules (scripts/test.sh), not here
RUN_ELSEWHERE = {"futures.md": "tests/integration/test_futures_guide.py"}


def _cases() -> List[Any]:
    cases = []
    for guide in GUIDES:
        if guide.name in RUN_ELSEWHERE:
            continue
        try:
            kinds = blocks_by_kind(guide)
        except GuideError:
            continue  # test_markers_are_well_formed says why
        for kind in kinds:
            if kind in OWN_MODULE_KINDS:
                continue
            parts = [
                part
                for part in kind.replace("totp", "ssh").split("+")
                if part in ("slurm", "ssh", "flux")
            ]
            marks = [getattr(pytest.mark, part) for part in parts]
            cases.append(pytest.param(guide, kind, id=f"{guide.stem}-{kind}", marks=marks))
    return cases


# -- what the kinds need ------------------------------------------------------------


def _read_exports(path: Path) -> Dict[str, str]:
    values: Dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.startswith("export ") and "=" in line:
                name, _, value = line[len("export ") :].partition("=")
                values[name.strip()] = value.strip().strip("'\"")
    return values


@pytest.fixture(scope="session")
def slurm_conf() -> str:
    conf = os.environ.get("SLURM_CONF") or _read_exports(SLURM_STATE / "env.sh").get("SLURM_CONF")
    if not shutil.which("sbatch") or not conf:
        pytest.skip("Slurm test cluster not running: start containers/slurm/start.sh")
    ping = subprocess.run(
        ["scontrol", "ping"],
        env={**os.environ, "SLURM_CONF": conf},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if "is UP" not in ping.stdout:
        pytest.skip(f"Slurm controller not answering: {ping.stdout.strip() or ping.stderr.strip()}")
    return conf


@pytest.fixture(scope="session")
def ssh_cluster(slurm_conf: str) -> Iterator[SimpleNamespace]:
    """The sshd test server and a fresh work folder on it (removed afterwards)."""
    pytest.importorskip("paramiko", reason="paramiko not installed (pip install '.[ssh]')")
    from tests.support.ssh import SKIP_REASON, find_test_server, make_executor

    server = find_test_server()
    if server is None:
        pytest.skip(SKIP_REASON)
    executor = make_executor(server, default_timeout=60.0)
    try:
        made = executor.run(["mktemp", "-d", "/tmp/hpcbridge-guide.XXXXXXXX"])
        assert made.ok, made.stderr
        workdir = made.stdout.strip()
        try:
            yield SimpleNamespace(server=server, workdir=workdir)
        finally:
            executor.run(["rm", "-rf", "--", workdir])
    finally:
        executor.close()


@pytest.fixture(scope="session")
def totp_cluster(
    slurm_conf: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Dict[str, str]]:
    """The sshd with a second factor: its variables, and a fresh work folder on it (made
    and removed through a login of the fixture's own)."""
    from tests.support.cli import hpcbridge_in
    from tests.support.openssh import (
        TOTP_SKIP,
        askpass_env,
        find_totp_server,
        make_openssh_executor,
        openssh_env,
        socket_folder,
    )

    totp = find_totp_server()
    if totp is None or shutil.which("ssh") is None:
        pytest.skip(TOTP_SKIP)
    for own in socket_folder():
        env = {**os.environ, **openssh_env(totp.server, own), **askpass_env(totp)}
        login = hpcbridge_in(env, "login", timeout=60)
        assert login.returncode == 0, login.stderr
        executor = make_openssh_executor(totp.server, own, ssh_config_path=None)
        made = executor.run(["mktemp", "-d", "/tmp/hpcbridge-guide-totp.XXXXXXXX"])
        assert made.ok, made.stderr
        try:
            for runtime in socket_folder():
                variables = openssh_env(totp.server, runtime)
                del variables["HPCBRIDGE_TRANSPORT"], variables["HPCBRIDGE_SSH_BACKEND"]
                yield {
                    **variables,
                    **askpass_env(totp),
                    "HPCBRIDGE_REMOTE_WORKDIR": made.stdout.strip(),
                }
        finally:
            executor.run(["rm", "-rf", "--", made.stdout.strip()])
            hpcbridge_in(env, "logout", timeout=60)


@pytest.fixture(scope="session")
def flux_command() -> str:
    from tests.support.flux import find_flux_commands

    found = find_flux_commands()
    if not found:
        pytest.skip(
            "flux-core not found: no `flux` on PATH, in HPCBRIDGE_TEST_FLUX_PREFIXES "
            "or as /opt/flux-*/bin/flux"
        )
    return found[0]


@pytest.fixture(scope="session")
def flux_broker(flux_command: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """FLUX_URI of a broker of our own (the project's testing helper)."""
    yield from _broker(flux_command, tmp_path_factory.mktemp("guide-flux"))


@pytest.fixture()
def accounting_broker(flux_command: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """FLUX_URI of a broker of its own for the guide that sets accounting up in it (its
    plugin would charge every later job of a shared broker to a bank)."""
    from tests.support.flux_accounting import accounting_absent

    absent = accounting_absent(flux_command)
    if absent:
        pytest.skip(absent)
    if "0.88" not in Path(flux_command).resolve().parents[1].name:
        # 0.49's history plugin fails root's jobs under accounting (flux_accounting.py)
        pytest.skip(f"the banks guide is written for flux-core 0.88, not {flux_command}")
    yield from _broker(flux_command, tmp_path_factory.mktemp("guide-accounting"))


def _broker(flux_command: str, workdir: Path) -> Iterator[str]:
    from tests.support.flux_cases import start_instance

    instance = start_instance(workdir, flux=flux_command)
    try:
        # The helper's broker has 16 cores whatever the machine has, so a job on a
        # core the machine lacks would log "cpu-affinity: ... core 2 not found in
        # node topology" into its output.  No binding, then (an allocation on a
        # real node binds as usual).
        default = instance.check(["getattr", "conf.shell_initrc"]).strip()
        initrc = workdir / "initrc.lua"
        initrc.write_text(f'shell.options["cpu-affinity"] = "off"\nsource("{default}")\n')
        initrc.chmod(0o644)
        instance.check(["setattr", "conf.shell_initrc", str(initrc)])
        yield str(instance.uri)
    finally:
        instance.stop()


def _base_env(tmp: Path) -> Dict[str, str]:
    dropped = ("HPCBRIDGE_", "EXAMLOPS_", "FLUX_", "SLURM_", "SBATCH_", "SQUEUE_", "SACCT_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    for legacy in ("CPU_COST_PER_HOUR", "GPU_COST_PER_HOUR"):
        env.pop(legacy, None)
    home = tmp / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    env.setdefault("USER", pwd.getpwuid(os.getuid()).pw_name)  # a login shell has it
    env.update(
        HOME=str(home),
        REPO=str(REPO),
        HPCBRIDGE_STATE_DIR=str(tmp / "state"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def _container_tools() -> None:
    """Skip unless the container guide's tools are here (it downloads Debian itself)."""
    missing = [tool for tool in CONTAINER_TOOLS if shutil.which(tool, path=SYSTEM_PATH) is None]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not found: apt-get install mmdebstrap charliecloud "
            "python3-lark uidmap (bash containers/images/build.sh installs them)"
        )
    lark = subprocess.run(["/usr/bin/python3", "-c", "import lark"], check=False)
    if lark.returncode != 0:
        pytest.skip("ch-image needs the system python3's lark module: apt-get install python3-lark")


def _kind_env(kind: str, request: pytest.FixtureRequest, tmp: Path) -> Dict[str, str]:
    env = _base_env(tmp)
    if kind == "container":
        _container_tools()
        # ch-image is "#!/usr/bin/env python3": the system's, with lark (no venv active)
        env["PATH"] = f"{SYSTEM_PATH}{os.pathsep}{env['PATH']}"
    if "slurm" in kind and not kind.startswith(("ssh+", "totp+")):
        env["SLURM_CONF"] = request.getfixturevalue("slurm_conf")
    if kind.startswith("totp+"):
        env.update(request.getfixturevalue("totp_cluster"))
    if kind.startswith("ssh+"):
        cluster = request.getfixturevalue("ssh_cluster")
        if "flux" in kind and not os.access(GUIDE_FLUX, os.X_OK):
            pytest.skip(f"{GUIDE_FLUX} not found: the guide runs the flux-core there")
        server = cluster.server
        (Path(env["HOME"]) / ".ssh" / "config").write_text(alias_entry(server, SSH_ALIAS))
        env["HPCBRIDGE_REMOTE_WORKDIR"] = cluster.workdir
    if "flux" in kind and not kind.startswith("ssh+"):
        flux = request.getfixturevalue("flux_command")
        env["PATH"] = f"{Path(flux).parent}{os.pathsep}{env['PATH']}"
        if kind == "flux":
            env["FLUX_URI"] = request.getfixturevalue("flux_broker")
        if kind == "flux+accounting":
            env["FLUX_URI"] = request.getfixturevalue("accounting_broker")
    return env


# -- the tests ------------------------------------------------------------------------


def test_markers_are_well_formed() -> None:
    """Every marker names a known kind, sits on a fence, and every guide has tested blocks."""
    assert GUIDES, f"no guides in {DOCS / 'guides'}"
    untested = []
    for guide in GUIDES:
        blocks = extract_blocks(guide.read_text(encoding="utf-8"), guide.name)
        if not blocks:
            untested.append(guide.name)
        for block in blocks:
            assert block.kind in KINDS
    assert not untested, f"guides without a single tested block: {untested}"


def test_output_rule() -> None:
    """The matching rule of the module docstring, on lines the guides really show."""
    printed = [
        "16:29:49  2479  CANCELLED  exit=143",
        "exit code 1",
        "ƒXoU5aX  flux       hello.sh  COMPLETED  0     2026-11-29 16:33:21  0:00:03",
        "ok  ssh transport          hpcbtest@127.0.0.1:2222 reachable",
        "\x1b[01;32m ✔\x1b[0;0m debug",
    ]
    assert line_matches("16:30:02  2480  CANCELLED  exit=143", printed)  # ids, times vary
    assert line_matches("ƒ4SRpPfM  flux  hello.sh  COMPLETED  0  …", printed)  # Flux ids too
    assert line_matches("ok  ssh transport  … reachable", printed)  # … is anything
    assert line_matches("✔ debug", printed)  # colours do not count
    assert not line_matches("exit code 0", printed)  # single digits are exact
    assert not line_matches("--  ssh transport  … reachable", printed)
    assert not line_matches("exit code", printed)  # a whole line, not a part of one
    assert missing_lines(["…", "exit code 1", "exit code 2"], "\n".join(printed)) == ["exit code 2"]


def test_index_links_every_guide_and_the_settings_reference() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    for guide in GUIDES:
        assert f"(guides/{guide.name})" in index, f"docs/index.md does not link {guide.name}"
    assert "(settings.md)" in index
    # Every relative link of the index and the guides points at a file that exists.
    for page in [DOCS / "index.md", *GUIDES]:
        for target in re.findall(r"\]\((?!https?:|#|mailto:)([^)#\s]+)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


@pytest.mark.parametrize(("guide", "kind"), _cases())
def test_guide(guide: Path, kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    env = _kind_env(kind, request, tmp_path)
    blocks = blocks_by_kind(guide)[kind]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    prelude = ""
    if "slurm" in kind:
        conf = shlex.quote(request.getfixturevalue("slurm_conf"))
        prelude = (
            f"__hpcb_slurm_conf={conf}\n"
            'trap \'if [ -n "${slurm_job:-}" ]; then SLURM_CONF="$__hpcb_slurm_conf" '
            'scancel "$slurm_job" 2>/dev/null || true; fi\' EXIT'
        )
    script = build_script(blocks, str(out_dir), prelude)
    script_path = tmp_path / f"{guide.stem}.{kind}.sh"
    script_path.write_text(script.text)
    timeout = CONTAINER_TIMEOUT if kind == "container" else SCRIPT_TIMEOUT
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", str(script_path)],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a timeout ends everything the script started
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM first: bash then runs its EXIT trap (which cancels $slurm_job).
        os.killpg(process.pid, signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
        output += f"\n[test_guides] timed out after {timeout:.0f}s"
    step_file = out_dir / "step"
    step = step_file.read_text().strip() if step_file.exists() else "(before the first block)"
    if process.returncode != 0 or step != "(end)":
        detail = ""
        for key, (_block, command) in script.commands.items():
            if f"{guide.name}:{command.line}" == step:
                printed = out_dir / f"{key}.out"
                if printed.exists():
                    detail = f"\n--- $ {command.text}\n{printed.read_text(errors='replace')}"
        pytest.fail(
            f"{guide.name} [{kind}] failed at {step} (exit {process.returncode}); "
            f"script {script_path}\n--- script output (tail)\n{output[-4000:]}{detail}"
        )
    problems = check_outputs(script, out_dir)
    assert not problems, "\n".join(problems)
