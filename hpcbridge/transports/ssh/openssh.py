"""``OpenSSHExecutor``: the ``Executor`` over the system's ``ssh``, every command through
one master connection (``HPCBRIDGE_SSH_BACKEND=openssh``).

The user's ``~/.ssh/config`` is honoured whole (aliases, ProxyJump, certificates, GSSAPI,
their own ControlPath); the explicit ``HPCBRIDGE_SSH_*`` settings win as ``-o`` options.
Commands never prompt (``BatchMode=yes``): at a site that asks for a second factor, one
``hpcbridge login HOST`` opens the master and every later command, from any process,
rides it.  Files move as ``cat`` through the same master.  The command lines are built in
``openssh_argv`` (pure); this module runs them.
"""

from __future__ import annotations

import logging
import os
import subprocess
from dataclasses import dataclass
from typing import IO, Any, Mapping, Optional, Sequence

from ...errors import (
    ConfigurationError,
    HostKeyError,
    SubmissionUncertainError,
    TransportError,
)
from ...retrying import retry
from ..base import CommandResult
from . import openssh_argv as argv_of
from .config import _key_files
from .executor import SSHLogin, build_command
from .openssh_files import OpenSSHFiles
from .openssh_spawn import Done, killed_words, spawn, timed_out

__all__ = ["OpenSSHExecutor", "MasterState", "master_line"]

log = logging.getLogger("hpcbridge.ssh")


class _Again(TransportError):
    """ssh failed in a way that sending again can mend (nothing sent, or idempotent)."""


@dataclass(frozen=True)
class MasterState:
    """Whether a master connection is up, and ssh's words about it."""

    up: bool
    control_path: str
    words: str


class OpenSSHExecutor(SSHLogin, OpenSSHFiles):
    """Executor over the system's OpenSSH client, through a master connection.

    Nothing touches the network until the first call; ``ssh -G`` (local, no network)
    resolves the host at construction so that records carry the same
    ``user@hostname:port`` label as the paramiko backend's.
    """

    kind = "ssh"
    is_local = False
    backend = "openssh"
    #: whether a command got through: a refused login is an outage after, not before
    _reached = False

    def _setup(
        self,
        persist: Optional[str] = None,
        retry_budget: float = 10.0,
        ssh_command: str = "ssh",
        environ: Optional[Mapping[str, str]] = None,
    ) -> None:
        """``persist`` (the master's ControlPersist), ``retry_budget`` (seconds of sending
        again), ``ssh_command``, ``environ`` (where hpcbridge's socket folder is found; this
        process's environment by default)."""
        destination = argv_of.check_destination(self.given.host)
        given = self.given
        self.alias = destination
        self.retry_budget = float(retry_budget)
        self.ssh = ssh_command
        self.config_file = given.config_path
        self.target = argv_of.Reach(
            destination=destination,
            user=given.user,
            port=int(given.port) if given.port else None,
            keys=_key_files(given.key_filename),
            known_hosts=os.path.expanduser(given.known_hosts) if given.known_hosts else None,
            accept_new_host_keys=self.accept_new_host_keys,
            connect_timeout=self.connect_timeout,
            keepalive=self.keepalive,
        )
        resolved = self._resolve()
        self.plan = self._plan(resolved, os.environ if environ is None else environ, persist)
        #: the resolved ``user@hostname:port``, as the paramiko backend labels records
        self.host = resolved.label

    def _plan(
        self, resolved: argv_of.Resolved, environ: Mapping[str, str], persist: Optional[str]
    ) -> argv_of.Plan:
        """The options of every command; hpcbridge's socket folder made when it is used."""
        if resolved.control_path:  # the user's own
            return argv_of.plan(self.target, resolved, "", persist, self.config_file)
        folder = argv_of.default_control_dir(environ, os.path.expanduser("~"))
        ours = argv_of.control_path_template(folder)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        return argv_of.plan(self.target, resolved, ours, persist, self.config_file)

    def _resolve(self) -> argv_of.Resolved:
        command = argv_of.resolve_argv(self.target, self.ssh, self.config_file)
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
            )
        except FileNotFoundError:
            raise ConfigurationError(
                f"HPCBRIDGE_SSH_BACKEND=openssh needs the OpenSSH client ({self.ssh}): "
                "install it (apt-get install openssh-client), or use the paramiko backend"
            ) from None
        if done.returncode != 0:
            raise ConfigurationError(
                f"ssh cannot resolve host {self.alias!r}: {argv_of.ssh_words(done.stderr)}; "
                "correct HPCBRIDGE_SSH_HOST or ~/.ssh/config"
            )
        return argv_of.parse_ssh_g(done.stdout)

    def __repr__(self) -> str:
        return f"OpenSSHExecutor({self.host!r})"

    def __enter__(self) -> OpenSSHExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to close: the master outlives this process (ControlPersist)."""

    # ------------------------------------------------------------------ the master

    def master(self) -> MasterState:
        """Is a master connection up (``ssh -O check``: no connection is opened)?"""
        done = subprocess.run(
            argv_of.control_argv(self.plan, "check", self.ssh),
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
        words = argv_of.ssh_words(done.stderr)
        return MasterState(done.returncode == 0, self.plan.control_path, words)

    def login(self, stdin: Optional[IO[Any]] = None) -> int:
        """Open the master, prompting on the terminal (or ``SSH_ASKPASS``) for what the
        site asks; the exit status of ``ssh``.  Its output goes to this process's own."""
        done = subprocess.run(argv_of.login_argv(self.plan, self.ssh), stdin=stdin)
        return done.returncode

    def logout(self) -> MasterState:
        """Close the master (``ssh -O exit``); the state ssh reported."""
        done = subprocess.run(
            argv_of.control_argv(self.plan, "exit", self.ssh),
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
        return MasterState(False, self.plan.control_path, argv_of.ssh_words(done.stderr))

    # ------------------------------------------------------------------ commands

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        input: Optional[str] = None,
        idempotent: bool = True,
    ) -> CommandResult:
        words = [str(arg) for arg in argv]
        merged_env = {**self.env, **(env or {})}
        command = build_command(
            words, merged_env or None, cwd, self.login_shell, stdin_devnull=input is None
        )
        budget = self.default_timeout if timeout is None else timeout
        data = None if input is None else input.encode("utf-8")
        log.debug("run %s on %s (openssh)", words[0], self.host)
        done = self._ssh(argv_of.bounded(command, budget), words, budget, idempotent, data=data)
        if budget is not None and done.returncode == argv_of.TIMED_OUT and done.duration >= budget:
            raise timed_out(words, budget, self.host)  # the remote timeout won the race
        return CommandResult(
            words,
            done.returncode,
            done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"),
            done.duration,
        )

    def _ssh(
        self,
        command: str,
        words: Sequence[str],
        budget: Optional[float],
        idempotent: bool,
        *,
        data: Optional[bytes] = None,
        source: Optional[str] = None,
    ) -> Done:
        """Run the remote ``command`` (stdin: ``data``, or the local file ``source``);
        ssh's own failures become this package's errors, retried where that is safe."""
        full = argv_of.command_argv(self.plan, command, self.ssh)

        def attempt() -> Done:
            done = spawn(full, words, budget, self.host, data=data, source=source)
            stderr = done.stderr.decode("utf-8", "replace")
            kind = argv_of.classify(done.returncode, stderr)
            said = [killed_words(done.returncode), argv_of.ssh_words(stderr)]
            if kind == argv_of.COMMAND and done.returncode == 255 and not self.master().up:
                # ssh whose master went away mid-command exits 255 and says nothing
                kind, said = argv_of.DROPPED, ["its master connection went away", *said]
            if kind == argv_of.COMMAND:
                self._reached = True
                return done
            raise self._failure(kind, "; ".join(filter(None, said)), words, idempotent)

        try:
            return retry(
                attempt,
                budget=self.retry_budget,
                retry_on=(_Again,),
                pause=0.25,
                backoff=2.0,
                max_pause=2.0,
                what=f"ssh to {self.host}",
            )
        except _Again as exc:
            raise TransportError(str(exc)) from None

    def _failure(
        self, kind: str, said: str, words: Sequence[str], idempotent: bool
    ) -> TransportError | SubmissionUncertainError:
        """ssh's own failure as the error to raise (``_Again``: worth sending again)."""
        if kind == argv_of.NEEDS_LOGIN:
            error = TransportError(
                f"{self.host} refused a login without a prompt ({said}) and no master "
                f"connection is up: run `hpcbridge login {self.alias}` in a terminal (it "
                "asks what the site wants: a code, a key's passphrase), then try again"
            )
            # Before any answer, a command (a wait too) fails at once; a master that goes
            # away later is an outage a wait rides out until the user logs in again.
            error.permanent = not self._reached
            return error
        if kind == argv_of.HOST_KEY:
            return HostKeyError(
                f"{self.host}: the host key was refused ({said}); check it with the "
                "site, then record it (ssh-keyscan, or HPCBRIDGE_SSH_ACCEPT_NEW_HOST_KEYS=1 "
                "for a host never seen)"
            )
        if kind == argv_of.DROPPED and not idempotent:
            return SubmissionUncertainError(
                f"the connection to {self.host} dropped while {words[0]} was running "
                f"({said}): it may or may not have taken effect (a job may or may not "
                "exist). It was NOT run again; check the queue before retrying.",
                argv=list(words),
            )
        return _Again(f"cannot run {words[0]} on {self.host}: {said}")


def master_line(executor: Any) -> str:
    """``doctor``'s words on the OpenSSH backend's master connection ("" for another)."""
    if not isinstance(executor, OpenSSHExecutor):
        return ""
    state = executor.master()
    if not state.up:
        return f"; no master connection up (hpcbridge login {executor.alias} opens one)"
    return f"; master connection up ({state.words}), closes after {executor.plan.persist} unused"
