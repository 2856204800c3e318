"""The OpenSSH backend's command lines and the reading of what ``ssh`` says: pure.

Every command rides one master connection per user and host (``ControlMaster=auto``):
the user's own ``ControlPath`` when their ``~/.ssh/config`` names one (``ssh -G`` tells),
else hpcbridge's short ``%C`` path.  Every command but ``login`` runs with
``BatchMode=yes``: it never waits on a prompt.  Host keys are verified whatever the
user's config says.  The remote command is one word, built by ``build_command``.
"""

from __future__ import annotations

import math
import os
import posixpath
import shlex
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ...errors import ConfigurationError

#: how long a master stays up without use when neither the user's config nor the
#: setting says (ControlPersist)
DEFAULT_PERSIST = "8h"
#: the socket path limit of AF_UNIX (108 on Linux) less the suffix ssh adds while it
#: creates the socket (".XXXXXXXXXXXXXXXX")
MAX_SOCKET_PATH = 90


@dataclass(frozen=True)
class Reach:
    """How to reach the host: the destination as given and the explicit settings, which
    win over ``~/.ssh/config`` as ``-o`` options."""

    destination: str
    user: Optional[str] = None
    port: Optional[int] = None
    keys: Tuple[str, ...] = ()
    known_hosts: Optional[str] = None
    accept_new_host_keys: bool = False
    connect_timeout: float = 15.0
    keepalive: int = 30


def check_destination(host: str) -> str:
    """``host`` (an alias, a name, ``user@name``), refused when ssh would misread it."""
    host = (host or "").strip()
    if not host:
        raise ConfigurationError("the ssh transport needs a host name: set HPCBRIDGE_SSH_HOST")
    if host.startswith("-") or any(ch.isspace() or ch == "\0" for ch in host):
        raise ConfigurationError(f"ssh host {host!r} is not a host name")
    return host


def explicit_options(reach: Reach) -> List[Tuple[str, str]]:
    """The ``-o`` options of the explicit settings and of the host-key policy."""
    options: List[Tuple[str, str]] = []
    if reach.user:
        options.append(("User", reach.user))
    if reach.port:
        options.append(("Port", str(int(reach.port))))
    options.extend(("IdentityFile", key) for key in reach.keys)
    if reach.known_hosts:
        options.append(("UserKnownHostsFile", reach.known_hosts))
    # Host keys are verified as the paramiko backend does, whatever ~/.ssh/config says.
    options.append(("StrictHostKeyChecking", "accept-new" if reach.accept_new_host_keys else "yes"))
    options.append(("ConnectTimeout", str(max(1, int(round(reach.connect_timeout))))))
    options.append(("ServerAliveInterval", str(max(1, int(reach.keepalive)))))
    options.append(("ServerAliveCountMax", "3"))
    return options


def option_words(options: Sequence[Tuple[str, str]]) -> List[str]:
    """``-o Name=value`` for each option; a value with a newline is refused."""
    words: List[str] = []
    for name, value in options:
        if "\n" in value or "\0" in value:
            raise ConfigurationError(f"ssh option {name}: {value!r} has a line break or a NUL")
        words += ["-o", f"{name}={value}"]
    return words


def default_control_dir(env: Mapping[str, str], home: str) -> str:
    """Where hpcbridge's master sockets go: ``$XDG_RUNTIME_DIR/hpcbridge`` (a folder only
    the user can enter, emptied at logout), else ``~/.ssh``."""
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and runtime.startswith("/"):
        return os.path.join(runtime, "hpcbridge")
    return os.path.join(home, ".ssh")


def control_path_template(control_dir: str) -> str:
    """hpcbridge's ControlPath: ``%C`` (a hash of the local host, remote host, port, user
    and jump) is 40 characters, so every master has its own short socket."""
    path = os.path.join(control_dir, "hpcb-%C")
    if len(path) - 2 + 40 > MAX_SOCKET_PATH:
        raise ConfigurationError(
            f"the master socket folder {control_dir} is too long for a socket path "
            f"({MAX_SOCKET_PATH} characters at most): set XDG_RUNTIME_DIR to a shorter folder, "
            "or name a short ControlPath in ~/.ssh/config"
        )
    return path


@dataclass(frozen=True)
class Resolved:
    """What ``ssh -G`` says of the host (with the explicit options applied)."""

    user: str
    hostname: str
    port: int
    control_path: Optional[str]
    control_persist: Optional[str]

    @property
    def label(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


def parse_ssh_g(text: str) -> Resolved:
    """``ssh -G``'s ``key value`` lines (keys lowercase, tokens such as ``%C`` expanded)."""
    values: Dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key and key.lower() not in values:
            values[key.lower()] = value.strip()
    try:
        port = int(values.get("port", "22"))
    except ValueError:
        raise ConfigurationError(f"ssh -G gave the port {values.get('port')!r}") from None
    control_path = values.get("controlpath")
    persist = values.get("controlpersist")
    return Resolved(
        user=values.get("user", ""),
        hostname=values.get("hostname", ""),
        port=port,
        control_path=None if control_path in (None, "", "none") else control_path,
        control_persist=None if persist in (None, "", "no", "false") else persist,
    )


@dataclass(frozen=True)
class Plan:
    """The options every command of one host gets: master, batch mode, explicit ones."""

    destination: str
    options: Tuple[Tuple[str, str], ...]
    control_path: str
    persist: str
    #: ``-F``: another ssh config than ``~/.ssh/config`` (``os.devnull``: none)
    config_file: Optional[str] = None

    def head(self, ssh: str) -> List[str]:
        """``ssh [-F FILE] -o ...``: what every command of this host starts with."""
        config = ["-F", self.config_file] if self.config_file else []
        return [ssh, *config, *option_words(self.options)]


def plan(
    reach: Reach,
    resolved: Resolved,
    our_path: str,
    persist: Optional[str] = None,
    config_file: Optional[str] = None,
) -> Plan:
    """The user's ControlPath and ControlPersist when their config names them, else ours."""
    control_path = resolved.control_path or our_path
    lasting = persist or resolved.control_persist or DEFAULT_PERSIST
    master = [
        ("ControlMaster", "auto"),
        ("ControlPath", control_path),
        ("ControlPersist", lasting),
    ]
    options = (*explicit_options(reach), *master)
    return Plan(reach.destination, options, control_path, lasting, config_file)


def resolve_argv(reach: Reach, ssh: str = "ssh", config_file: Optional[str] = None) -> List[str]:
    """``ssh -G``: the config's view of the host, with the explicit options applied."""
    config = ["-F", config_file] if config_file else []
    return [ssh, "-G", *config, *option_words(explicit_options(reach)), "--", reach.destination]


def command_argv(the_plan: Plan, remote_command: str, ssh: str = "ssh") -> List[str]:
    """A remote command through the master, never prompting (``BatchMode=yes``)."""
    return [
        *the_plan.head(ssh),
        "-o",
        "BatchMode=yes",
        "-T",
        "--",
        the_plan.destination,
        remote_command,
    ]


#: seconds a remote command may outlive its time budget before it is ended there: the
#: local ssh is killed first, so the caller's error is the timeout
REMOTE_GRACE = 1
#: the exit status of a command ``timeout`` ended (``bounded``)
TIMED_OUT = 124


def bounded(command: str, budget: Optional[float]) -> str:
    """``command`` ended on the remote side too, ``REMOTE_GRACE`` s past ``budget``:
    ``timeout`` sends its process group TERM, then KILL a second later.  Killing the
    local ssh only closes the channel, and sshd leaves a command that neither reads nor
    writes running (the paramiko backend sends SSH's "signal" request instead, which
    ssh's command line cannot).  A remote without ``timeout`` runs it unbounded there."""
    if budget is None or not math.isfinite(budget):
        return command
    seconds = max(0, int(math.ceil(budget))) + REMOTE_GRACE
    return (
        f"t=; command -v timeout >/dev/null 2>&1 && t='timeout -k 1 {seconds}'; "
        f"exec $t sh -c {shlex.quote(command)}"
    )


def login_argv(the_plan: Plan, ssh: str = "ssh") -> List[str]:
    """The one command that may prompt (a password, a code, a push): it opens the master,
    which stays in the background for ControlPersist."""
    return [
        *the_plan.head(ssh),
        "-o",
        "BatchMode=no",
        "-T",
        "--",
        the_plan.destination,
        "true",
    ]


def control_argv(the_plan: Plan, operation: str, ssh: str = "ssh") -> List[str]:
    """``ssh -O check|exit``: ask the master (never opens a connection)."""
    if operation not in ("check", "exit"):
        raise ValueError(f"unknown master operation {operation!r}")
    return [
        *the_plan.head(ssh),
        "-o",
        "BatchMode=yes",
        "-O",
        operation,
        "--",
        the_plan.destination,
    ]


# ---------------------------------------------------------------- what ssh said

_HOST_KEY = (
    "Host key verification failed",
    "REMOTE HOST IDENTIFICATION HAS CHANGED",
    "host key is known for",
    "No matching host key",
)
#: before anything reached the server: sending again is safe even for a submission
_NOT_SENT = (
    "Connection refused",
    "Connection timed out",
    "No route to host",
    "Could not resolve hostname",
    "Name or service not known",
    "kex_exchange_identification",
    "Network is unreachable",
    "banner exchange",
    "Connection closed by",
)
#: the connection died while the command may have run
_DROPPED = (
    "closed by remote host",
    "Connection reset",
    "Broken pipe",
    "client_loop",
    "mux_client",
    "Timeout, server",
    "not responding",
    "packet_write_wait",
)

#: what ``classify`` answers
COMMAND, NEEDS_LOGIN, HOST_KEY, NOT_SENT, DROPPED = (
    "command",
    "needs-login",
    "host-key",
    "not-sent",
    "dropped",
)


def classify(returncode: int, stderr: str) -> str:
    """Whose answer an exit status is: the remote command's (``COMMAND``), or ssh's own
    failure (255 and its words): a login wanted (no prompt could be answered: a code, a
    password, a key's passphrase), a host key refused, nothing sent yet, or the connection
    dropped mid-command (or the local ssh killed by a signal: it may have run)."""
    if returncode < 0:
        return DROPPED
    if returncode != 255:
        return COMMAND
    if any(marker in stderr for marker in _HOST_KEY):
        return HOST_KEY
    if "Permission denied" in stderr:  # a code, a password, a key's passphrase: login asks
        return NEEDS_LOGIN
    if any(marker in stderr for marker in _NOT_SENT):
        return NOT_SENT
    if any(marker in stderr for marker in _DROPPED):
        return DROPPED
    return COMMAND  # the remote command's own 255


def ssh_words(stderr: str) -> str:
    """ssh's own lines of ``stderr`` (its last three), for a message."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return "; ".join(lines[-3:])[:500]


# ---------------------------------------------------------------- remote file commands


#: exit statuses of the file scripts: no such file (or folder), a folder
MISSING, DIRECTORY = 20, 21


def path_word(path: str) -> str:
    """``path`` as one remote shell word: ``~``/``~/x`` are the remote home, a relative
    path is relative to it (where ssh starts a command)."""
    path = str(path)
    if not path or "\0" in path:
        raise ValueError(f"invalid remote path {path!r}")
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        rest = path[2:]
        return '"$HOME"/' + shlex.quote(rest) if rest else '"$HOME"'
    if path.startswith("-"):
        path = "./" + path
    return shlex.quote(path)


def temporary_word(path: str, token: str) -> str:
    """The temporary sibling of ``path`` a write fills before it renames it over."""
    directory, base = posixpath.split(str(path))
    return path_word(posixpath.join(directory, f".{base}.hpcbridge-{token}.tmp"))


def write_script(path: str, token: str, mode: int, size: int) -> str:
    """Fill a temporary file from stdin, check its size (a dropped connection ends
    ``cat`` early), set its mode, rename it over ``path``; remove it on any failure.
    Exit ``MISSING`` when the folder is missing."""
    target = path_word(path)
    temporary = temporary_word(path, token)
    folder = path_word(posixpath.dirname(str(path)) or ".")
    umask = oct(0o777 & ~mode & 0o777)[2:]
    return (
        f"[ -d {folder} ] || exit {MISSING}; "
        f"umask {umask} && cat > {temporary} && "
        f'[ "$(wc -c < {temporary})" -eq {int(size)} ] && '
        f"chmod {oct(mode & 0o7777)[2:]} {temporary} && mv -f -- {temporary} {target}"
        f" || {{ rm -f -- {temporary}; exit 1; }}"
    )


def read_script(path: str) -> str:
    """The file's mode (octal) on stderr's last line, its bytes on stdout."""
    word = path_word(path)
    return (
        f"if [ -d {word} ]; then exit {DIRECTORY}; fi; "
        f"[ -e {word} ] || exit {MISSING}; "
        f"stat -c %a -- {word} >&2 && exec cat -- {word}"
    )


def mkdir_script(path: str, mode: int) -> str:
    """``mkdir -p`` whose new folders get ``mode``."""
    umask = oct(0o777 & ~mode & 0o777)[2:]
    return f"umask {umask} && mkdir -p -- {path_word(path)}"


def exists_script(path: str) -> str:
    return f"test -e {path_word(path)}"


def parse_mode(stderr: str) -> Optional[int]:
    """The octal mode ``read_script`` printed last on stderr, or None."""
    lines = stderr.strip().splitlines()
    if not lines:
        return None
    try:
        return int(lines[-1].strip(), 8)
    except ValueError:
        return None
