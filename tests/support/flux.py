"""Throw-away Flux brokers for the tests and the benchmarks (not part of the package).

``FluxInstance`` starts ``flux start -s1 -o,--config-path=CONFDIR sh -c
'echo $FLUX_URI > FILE; echo $$ > PID; exec sleep inf'`` in the background -
a form every release accepts (``-c`` means something else to 0.26's
``flux start`` and 0.26 has no ``--test-rundir`` and no ``flux shutdown``) -
and stops it by killing that ``sleep``: the initial program ends, so the
instance shuts down cleanly.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

from hpcbridge.schedulers.flux.instance import parse_flux_version_output
from tests.support.components import absent_reason

DEFAULT_GLOB = "/opt/flux-*/bin/flux"
#: the flux-core releases the project supports and tests, newest first
#: (``scripts/build-schedulers.sh`` builds each under ``/opt/flux-<release>``)
SUPPORTED_RELEASES = ("0.88", "0.49", "0.26")


def find_flux_commands(env: Optional[Dict[str, str]] = None) -> List[str]:
    """Every ``flux`` to test against, the default (newest) first.

    ``HPCBRIDGE_TEST_FLUX_PREFIXES`` (colon-separated install prefixes), when
    set, names exactly the releases to use, in its order.  Otherwise: the
    ``flux`` on PATH, then every ``/opt/flux-*/bin/flux``, newest release
    first - the first one is the default of the tests that use one release,
    and the first release whose bindings a process loads is the only one
    whose native driver that process can test.
    """
    env = dict(os.environ) if env is None else env
    found: List[str] = []
    prefixes = [p.strip() for p in (env.get("HPCBRIDGE_TEST_FLUX_PREFIXES") or "").split(":")]
    if any(prefixes):
        for prefix in prefixes:
            candidate = os.path.join(prefix, "bin", "flux")
            if prefix and os.access(candidate, os.X_OK):
                found.append(os.path.realpath(candidate))
        return list(dict.fromkeys(found))
    on_path = shutil.which("flux", path=env.get("PATH"))
    if on_path:
        found.append(os.path.realpath(on_path))
    installed = [c for c in glob.glob(DEFAULT_GLOB) if os.access(c, os.X_OK)]
    for candidate in sorted(installed, key=_version_in_path, reverse=True):
        found.append(os.path.realpath(candidate))
    return list(dict.fromkeys(found))


def flux_absent_reason(env: Optional[Dict[str, str]] = None) -> str:
    """Why no (or not every named) flux-core is here, naming what to provide."""
    env = dict(os.environ) if env is None else env
    prefixes = [p.strip() for p in (env.get("HPCBRIDGE_TEST_FLUX_PREFIXES") or "").split(":")]
    missing = [p for p in prefixes if p and not os.access(os.path.join(p, "bin", "flux"), os.X_OK)]
    if missing:
        return "; ".join(
            absent_reason(os.path.basename(p.rstrip("/")), f"no flux-core under {p}")
            for p in missing
        )
    return absent_reason(
        "flux-" + SUPPORTED_RELEASES[0],
        "flux-core not found: no `flux` on PATH, in HPCBRIDGE_TEST_FLUX_PREFIXES "
        "or as /opt/flux-*/bin/flux",
    )


def _version_in_path(path: str) -> Tuple[Tuple[int, ...], str]:
    """Sort key: the version in ``/opt/flux-0.49/bin/flux`` (``0.9 < 0.49 < 0.88``)."""
    match = re.search(r"flux-(?:core-)?v?(\d+(?:\.\d+)*)", path)
    numbers = tuple(int(part) for part in match.group(1).split(".")) if match else ()
    return numbers, path


#: the first supported release whose resource module reads ``noverify`` from the
#: configuration; 0.26 takes it only as a module argument and refuses the key
#: ("1 object item(s) left unpacked: noverify")
CONFIG_NOVERIFY_SINCE = (0, 49)
#: the first supported release with ``flux run``/``flux batch``; 0.26 has only
#: the ``flux mini run``/``flux mini batch`` spellings
TOP_LEVEL_RUN_SINCE = (0, 49)


def release_of(flux: str) -> Tuple[int, ...]:
    """The release of a ``flux`` command as numbers, ``()`` when unknown."""
    match = re.match(r"(\d+(?:\.\d+)*)", flux_version(flux))
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def config_accepts_noverify(flux: str) -> bool:
    """Whether ``[resource] noverify = true`` may be written for this release."""
    return release_of(flux) >= CONFIG_NOVERIFY_SINCE


def flux_version(flux: str) -> str:
    result = subprocess.run(
        [flux, "version"], capture_output=True, text=True, timeout=30, check=False
    )
    return parse_flux_version_output(result.stdout).get("commands", "?")


class FluxInstance:
    """A Flux instance of our own: one broker, or ``size`` on this host (``flux start
    --test-size``: an instance of that many nodes, each seeing the host's cores)."""

    def __init__(
        self,
        flux: str,
        config: Optional[str] = None,
        workdir: Optional[str] = None,
        user: Optional[str] = None,
        start_queues: bool = True,
        size: int = 1,
    ) -> None:
        self.flux = flux
        self.size = size
        self.config = config
        self.user = user
        self.start_queues = start_queues
        self._own_workdir = workdir is None  # removed again by stop()
        self.workdir = workdir or tempfile.mkdtemp(prefix="hpcb-flux-")
        #: ``flux run``/``flux batch`` or, on 0.26, ``flux mini run``/``flux mini batch``
        self.mini = release_of(flux) < TOP_LEVEL_RUN_SINCE
        self.uri: Optional[str] = None
        self.process: Optional[subprocess.Popen] = None
        self._sleep_pid: Optional[int] = None

    # -- commands ----------------------------------------------------------

    def submit_words(self, command: str) -> List[str]:
        """``["run"]`` or, on 0.26, ``["mini", "run"]`` (likewise for batch, submit)."""
        return ["mini", command] if self.mini else [command]

    def as_owner(self) -> List[str]:
        """What runs a command as the instance's owner (``runuser``), when it is not us."""
        return ["runuser", "-u", self.user, "--"] if self.user else []

    def run(
        self, argv: Sequence[str], uri: Optional[str] = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess:
        """Run ``flux ARGV...`` against this instance (or ``uri``)."""
        env = dict(os.environ)
        env["FLUX_URI"] = uri or self.uri or ""
        return subprocess.run(
            [*self.as_owner(), self.flux, *argv],
            capture_output=True,
            text=True,
            env=env,
            # `flux batch` writes flux-{{id}}.out into its cwd: keep it here.
            cwd=self.workdir,
            timeout=timeout,
            check=False,
        )

    def check(self, argv: Sequence[str], uri: Optional[str] = None, timeout: float = 60.0) -> str:
        result = self.run(argv, uri, timeout)
        if result.returncode != 0:
            raise RuntimeError(f"flux {' '.join(argv)} failed: {result.stderr.strip()}")
        return result.stdout

    # -- life ----------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> FluxInstance:
        confdir = os.path.join(self.workdir, "conf")
        os.makedirs(confdir, exist_ok=True)
        if self.config:
            with open(
                os.path.join(confdir, "hpcbridge-test.toml"), "w", encoding="utf-8"
            ) as handle:
                handle.write(self.config)
        uri_file = os.path.join(self.workdir, "uri")
        pid_file = os.path.join(self.workdir, "pid")
        if self.user:
            shutil.chown(self.workdir, self.user)
            for path in (confdir, *glob.glob(os.path.join(confdir, "*"))):
                shutil.chown(path, self.user)
        program = f"echo $FLUX_URI > {uri_file}; echo $$ > {pid_file}; exec sleep inf"
        log = open(os.path.join(self.workdir, "broker.log"), "ab")  # noqa: SIM115
        env = dict(os.environ)
        env.pop("FLUX_URI", None)
        # The broker runs rc1/rc3 as `$SHELL -c` on a socketpair; Debian's bash then sources
        # ~/.bashrc unless SHLVL >= 1 (whatever the test user's .bashrc does, e.g. a pyenv
        # rehash waiting 60 s on a stale lock, would stall the broker's start).
        if not env.get("SHLVL", "").isdigit() or int(env["SHLVL"]) < 1:
            env["SHLVL"] = "1"
        self.process = subprocess.Popen(
            [
                *self.as_owner(),
                self.flux,
                "start",
                f"-s{self.size}",
                f"-o,--config-path={confdir}",
                "sh",
                "-c",
                program,
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,
        )
        log.close()
        try:
            self._await_start(uri_file, pid_file, time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _await_start(self, uri_file: str, pid_file: str, deadline: float) -> None:
        assert self.process is not None
        while not (os.path.exists(uri_file) and open(uri_file).read().strip()):  # noqa: SIM115
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"flux start failed; see {self.workdir}/broker.log")
            time.sleep(0.05)
        with open(uri_file, encoding="utf-8") as handle:
            self.uri = handle.read().strip()
        while not (os.path.exists(pid_file) and open(pid_file).read().strip()):  # noqa: SIM115
            time.sleep(0.05)
        with open(pid_file, encoding="utf-8") as handle:
            self._sleep_pid = int(handle.read().strip())
        # (0.26 has no named queues and no `flux queue start --all`.)
        if self.config and "[queues" in self.config and self.start_queues and not self.mini:
            # Named queues start stopped (jobs would wait in SCHED forever,
            # `flux run true` included): start them first, once the
            # job-manager answers.
            while True:
                result = self.run(["queue", "start", "--all"], timeout=30)
                if result.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"flux queue start --all: {result.stderr.strip()}")
                time.sleep(0.2)
        self.wait_ready(timeout=max(deadline - time.monotonic(), 5.0))

    def wait_ready(self, uri: Optional[str] = None, timeout: float = 60.0) -> None:
        """Ready = a trivial job runs (``flux run true``)."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                result = self.run(
                    [*self.submit_words("run"), "true"],
                    uri=uri,
                    timeout=max(deadline - time.monotonic(), 1),
                )
            except subprocess.TimeoutExpired:
                break
            if result.returncode == 0:
                return
            last = result.stderr.strip()
            if "not a valid queue" in last or "no queue specified" in last:
                return  # named queues and no default: up, but `flux run` cannot prove it
            time.sleep(0.2)
        raise RuntimeError(f"flux instance {uri or self.uri} not ready: {last}")

    def stop(self, timeout: float = 20.0) -> None:
        if self._sleep_pid:
            # The initial program ends: the instance shuts down cleanly.
            try:
                os.kill(self._sleep_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            self._sleep_pid = None
        elif self.process is not None and self.process.poll() is None:
            try:  # never got that far: end the whole group
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if self.process is not None:
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.process.wait(timeout=10)
            self.process = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> FluxInstance:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- nested instances ------------------------------------------------------

    def batch_instance(self, time_limit: str = "120s") -> str:
        """A nested instance (``flux batch``) that idles; return its job id (F58)."""
        argv = [*self.submit_words("batch"), "-n1", f"-t{time_limit}", "--wrap", "sleep", "inf"]
        out = self.check(argv)
        return out.strip().splitlines()[-1].strip()

    def local_uri(self, job_id: str, timeout: float = 60.0) -> str:
        """``flux uri --local`` of a nested instance, once it published one and is ready."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            result = self.run(["uri", "--local", job_id])
            if result.returncode == 0 and result.stdout.strip():
                uri = result.stdout.strip()
                self.wait_ready(uri=uri, timeout=max(deadline - time.monotonic(), 5.0))
                return uri
            last = result.stderr.strip()
            time.sleep(0.2)
        raise RuntimeError(f"no URI for {job_id}: {last}")
