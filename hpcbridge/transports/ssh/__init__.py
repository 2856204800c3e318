"""The SSH transport: ``SSHExecutor`` (paramiko + SFTP), loaded when first used; the
OpenSSH backend is ``openssh.OpenSSHExecutor`` (the system's ssh through a master connection).

``executor`` (the ``Executor``, the remote command line) over ``config`` (arguments merged
with ``~/.ssh/config``), ``connect`` (failures, host keys, the one shared connection),
``run`` (one command on a channel) and ``files`` (SFTP).
"""

from .executor import SSHExecutor

__all__ = ["SSHExecutor"]
