"""A Flux instance set up as a site with flux-accounting sets one up; no tests here.

flux-accounting is built into a flux-core prefix by ``scripts/build-schedulers.sh``
(0.60.0 beside 0.88, 0.23.1 beside 0.49; none for 0.26).  The instance gets: the
accounting database and its service, a bank tree (``root``, and under it ``banka``
and ``bankb``), the test user in ``banka`` only - its default bank - with limits on
that association, the priority plugin ``mf_priority.so`` loaded and the users'
data pushed to it.  The instance and its service run as ``user`` when given (the SSH
test user: ``runuser``), else as this process's user.

flux-core 0.49's ``.history`` jobtap plugin fails every job of uid 0 at ``job.new``
(its table of users is keyed by the uid as a pointer, and 0 is NULL); the job manager
then calls no later plugin, so ``mf_priority.so`` never attaches the job's bank and
fails it ("bank info is missing").  A site's users are not root: on 0.49 the tests run
their jobs as the SSH test user, in an instance of its own.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.support.flux_cases import start_instance

#: the banks of the tree; the test user is in the first only
MEMBER_BANK, STRANGERS_BANK = "banka", "bankb"
MAX_ACTIVE_JOBS = 10
MAX_RUNNING_JOBS = 4


def accounting_absent(flux: str) -> Optional[str]:
    """Why this flux-core has no flux-accounting, or ``None`` when it has."""
    prefix = Path(flux).resolve().parents[1]
    plugin = prefix / "lib" / "flux" / "job-manager" / "plugins" / "mf_priority.so"
    if plugin.exists():
        return None
    status = Path(os.environ.get("HPCBRIDGE_TEST_BUILD_DIR", "/var/tmp/hpcbridge-build"))
    reason = status / "status" / f"accounting-{prefix.name.replace('flux-', '')}"
    said = reason.read_text().strip() if reason.exists() else ""
    return said or f"flux-accounting is not built into {prefix} (0.26 gets none)"


@dataclass
class AccountingInstance:
    """A running instance with accounting; ``stop()`` ends its service and it."""

    instance: Any
    service: subprocess.Popen[bytes]
    database: Path
    user: str
    #: what the plugin said failing a member's job ("" when it ran: jobs can run here)
    refused: str

    @property
    def uri(self) -> Optional[str]:
        return self.instance.uri

    @property
    def flux(self) -> str:
        return str(self.instance.flux)

    def account(self, *words: str) -> str:
        return str(self.instance.check(["account", *words]))

    def stop(self) -> None:
        self.service.terminate()
        try:
            self.service.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.service.kill()
        self.instance.stop()


def start_accounting_instance(
    workdir: Path, flux: str, user: Optional[str] = None
) -> AccountingInstance:
    """The site's instance in ``workdir`` (readable by ``user``), owned by ``user``."""
    absent = accounting_absent(flux)
    if absent:
        pytest.skip(absent)
    instance = start_instance(workdir, flux=flux, user=user)
    database = workdir / "accounting.db"
    login = user or pwd.getpwuid(os.getuid()).pw_name
    service: Optional[subprocess.Popen[bytes]] = None
    try:
        instance.check(["account", "-p", str(database), "create-db"])
        env = {**os.environ, "FLUX_URI": instance.uri or ""}
        service = subprocess.Popen(
            [*instance.as_owner(), flux, "account-service", "-p", str(database), "-t"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while "No service matching" in instance.run(["account", "view-bank", "root"]).stderr:
            if time.monotonic() > deadline:
                raise RuntimeError("flux account-service did not register within 30 s")
            time.sleep(0.2)
        instance.check(["account", "add-bank", "root", "1"])
        for bank in (MEMBER_BANK, STRANGERS_BANK):
            instance.check(["account", "add-bank", "--parent-bank=root", bank, "1"])
        instance.check(
            [
                "account",
                "add-user",
                f"--username={login}",
                f"--bank={MEMBER_BANK}",
                f"--max-active-jobs={MAX_ACTIVE_JOBS}",
                f"--max-running-jobs={MAX_RUNNING_JOBS}",
            ]
        )
        instance.check(["jobtap", "load", "mf_priority.so"])
        instance.check(["account-priority-update", "-p", str(database)])
        refused = probe(instance)
    except BaseException:
        if service is not None:
            service.kill()
        instance.stop()
        raise
    return AccountingInstance(instance, service, database, login, refused)


def probe(instance: Any) -> str:
    """What the plugin said failing a job of the member's bank ("" when it ran): on
    flux-core 0.49, "bank info is missing" for root's jobs (see the module's note)."""
    submitted = instance.check(
        [*instance.submit_words("submit"), f"--setattr=system.bank={MEMBER_BANK}", "true"]
    ).strip()
    attached = instance.run(["job", "attach", submitted], timeout=60)
    return "" if attached.returncode == 0 else attached.stderr.strip()
