"""``login`` and ``logout``: open and close the OpenSSH master connection that every
later command of the openssh backend rides (the one moment a code may be asked)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..errors import TransportError
from ..settings.config import Settings
from .exits import EXIT_OK

if TYPE_CHECKING:
    from ..transports.ssh.openssh import OpenSSHExecutor


def _executor(args: argparse.Namespace) -> OpenSSHExecutor:
    """The OpenSSH executor of ``HOST`` (default: ``HPCBRIDGE_SSH_HOST``), with the
    environment's other ``HPCBRIDGE_SSH_*`` settings, as later commands build it."""
    from ..transports.ssh.openssh import OpenSSHExecutor

    overrides = {"transport": "ssh", "ssh_host": args.host} if args.host else {"transport": "ssh"}
    settings = Settings.from_env(given_as={"ssh_host": "HOST"}, **overrides)
    if settings.ssh_backend != "openssh":
        print(
            f"hpcbridge: note: HPCBRIDGE_SSH_BACKEND is {settings.ssh_backend}: hpcbridge's "
            "commands ride this login only with HPCBRIDGE_SSH_BACKEND=openssh",
            file=sys.stderr,
        )
    return OpenSSHExecutor.from_settings(settings)


def cmd_login(args: argparse.Namespace) -> int:
    """Open the master (asking on the terminal, or through SSH_ASKPASS, what the site
    asks), or say that one is up; exit 6 when ssh could not log in."""
    executor = _executor(args)
    alias, persist = executor.alias, executor.plan.persist
    if executor.master().up:
        print(
            f"{executor.host}: already logged in; the connection stays up until it is "
            f"unused for {persist} (hpcbridge logout {alias} closes it now)"
        )
        return EXIT_OK
    code = executor.login()
    state = executor.master()
    if code != 0 or not state.up:
        why = f"ssh exited {code}" if code != 0 else f"no master is up ({state.words})"
        raise TransportError(
            f"{alias}: the login failed ({why}); run `hpcbridge login {alias}` again in a "
            "terminal (a ControlMaster no or ControlPath none in ~/.ssh/config prevents a master)"
        )
    print(
        f"{executor.host}: logged in; every command rides this connection until it is "
        f"unused for {persist} (ControlPersist), or until hpcbridge logout {alias}"
    )
    return EXIT_OK


def cmd_logout(args: argparse.Namespace) -> int:
    """Close the master; saying so when none was up is no error."""
    executor = _executor(args)
    if not executor.master().up:
        print(f"{executor.host}: not logged in (no master connection is up)")
        return EXIT_OK
    state = executor.logout()
    print(f"{executor.host}: logged out ({state.words or 'the master connection closed'})")
    return EXIT_OK
