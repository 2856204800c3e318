"""The SSH transport: ``SSHExecutor`` (paramiko + SFTP), loaded when first used.

``executor`` (the ``Executor`` over SSH) over ``config`` (its arguments merged
with ``~/.ssh/config``), ``connect`` (one connection through each hop),
``reconnect`` (the one connection shared between calls, reopened when it dies),
``hostkeys`` (unknown keys refused, or accepted new), ``command`` (the remote
command line, every piece of caller data quoted) and ``run`` (one command on a
channel; ``channel``: paramiko's quirks), ``files`` and ``times`` (SFTP),
``failures`` (a dropped connection or a failed operation, in one line).
"""

from .executor import SSHExecutor

__all__ = ["SSHExecutor"]
