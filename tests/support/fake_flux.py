"""A scripted ``flux`` for unit tests (no Flux needed): a local executor whose ``flux``
commands answer from a table of jobs, with real files (the test's ``tmp_path``).

Each job keeps the key it was submitted with (``--setattr=user.hpcbridge_key=...``
or the bulk helper's ``keys``): ``flux jobs -a ... -o '{id.dec} {t_submit}'`` lists
the jobs and ``flux job info ID jobspec`` gives it back."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from hpcbridge.schedulers.flux.ids import canonical_job_id, parse_job_id
from hpcbridge.transports.base import CommandResult
from hpcbridge.transports.local import LocalExecutor

DATA = Path(__file__).resolve().parent.parent / "data" / "flux"
KEY_OPTION = "--setattr=user.hpcbridge_key="
VERSION_088 = (DATA / "version_0.88.txt").read_text()


class FakeFlux(LocalExecutor):
    """A local executor whose `flux` is scripted; files are real (tmp_path)."""

    def __init__(
        self, version: str = VERSION_088, config: str = "{}", resource_r: str = ""
    ) -> None:
        LocalExecutor.__init__(self)
        self.version = version
        self.config = config
        self.resource_r = resource_r or json.dumps({"execution": {"expiration": 0.0}})
        self.calls: List[List[str]] = []
        self.envs: List[Optional[Mapping[str, str]]] = []
        self.next_id = 7381975040
        self.jobs: Dict[str, Dict[str, Any]] = {}
        #: job id -> the key it was submitted with
        self.keys: Dict[str, str] = {}
        self.handlers: Dict[str, Callable[[List[str], Optional[str]], CommandResult]] = {}

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        input: Optional[str] = None,
        idempotent: bool = True,
    ) -> CommandResult:
        argv = [str(part) for part in argv]
        self.calls.append(argv)
        self.envs.append(env)
        if argv[0] == "uname":
            return CommandResult(argv, 0, "testhost\n", "")
        if argv[0] == "date":
            return CommandResult(argv, 0, f"{int(time.time())}\n", "")
        sub = argv[1] if len(argv) > 1 else ""
        if sub in self.handlers:
            return self.handlers[sub](argv, input)
        if sub == "version":
            return CommandResult(argv, 0, self.version, "")
        if argv[1:3] == ["config", "get"]:
            return CommandResult(argv, 0, self.config, "")
        if argv[1:4] == ["kvs", "get", "resource.R"]:
            return CommandResult(argv, 0, self.resource_r, "")
        if sub == "getattr":
            return CommandResult(argv, 0, "0\n", "")
        if sub in ("batch", "submit", "mini"):
            return CommandResult(argv, 0, self.submit(argv) + "\n", "")
        if sub == "python":
            return CommandResult(argv, 0, "\n".join(self.submit_bulk(input)) + "\n", "")
        if sub == "jobs":
            return self._recent(argv) if "-a" in argv else self._jobs(argv)
        if argv[1:3] == ["job", "info"] and argv[-1] == "jobspec":
            return self._jobspec(argv)
        if sub in ("cancel", "job"):
            return CommandResult(argv, 0, "", "")
        return CommandResult(argv, 127, "", f"{argv[0]}: unexpected {argv[1:]}")

    def _new_job(self, key: Optional[str] = None) -> str:
        self.next_id += 1
        job_id = canonical_job_id(self.next_id)
        self.jobs[job_id] = {"state": "RUN", "t_run": time.time(), "t_submit": time.time()}
        if key is not None:
            self.keys[job_id] = key
        return job_id

    def submit(self, argv: Sequence[str]) -> str:
        """A job of ``flux batch``/``flux submit`` argv, with the key it sets; its id."""
        key = None
        for arg in argv:
            if arg.startswith(KEY_OPTION):
                key = json.loads(arg[len(KEY_OPTION) :])
        return self._new_job(key)

    def submit_bulk(self, input: Optional[str]) -> List[str]:
        """The jobs the bulk helper's stdin asks for; its ``OK <id>`` lines."""
        request = json.loads(input or "{}")
        keys = request.get("keys") or [None] * len(request["environments"])
        return [f"OK {parse_job_id(self._new_job(key))}" for key in keys]

    def with_key(self, key: str) -> List[str]:
        return [job_id for job_id, own in self.keys.items() if own == key]

    def _recent(self, argv: List[str]) -> CommandResult:
        lines = [f"{parse_job_id(job_id)} {job['t_submit']}" for job_id, job in self.jobs.items()]
        return CommandResult(argv, 0, "".join(line + "\n" for line in reversed(lines)), "")

    def _jobspec(self, argv: List[str]) -> CommandResult:
        job_id = canonical_job_id(argv[3])
        if job_id not in self.jobs:
            return CommandResult(argv, 1, "", f"flux-job: job {argv[3]} not found")
        user = {"hpcbridge_key": self.keys[job_id]} if job_id in self.keys else {}
        spec = {"version": 1, "attributes": {"system": {}, "user": user}}
        return CommandResult(argv, 0, json.dumps(spec), "")

    def _jobs(self, argv: List[str]) -> CommandResult:
        found = []
        stderr = []
        for arg in argv[3:]:
            job_id = canonical_job_id(arg)
            if job_id in self.jobs:
                found.append({"id": int(arg), **self.jobs[job_id]})
            else:
                stderr.append(f"JobID {arg} unknown")
        if not found:
            return CommandResult(argv, 1, "", "\n".join(stderr))
        out = json.dumps(found[0]) if len(found) == 1 else json.dumps({"jobs": found})
        return CommandResult(argv, 0, out, "\n".join(stderr))

    def finish(self, job_id: str, result: str = "COMPLETED", returncode: int = 0) -> None:
        self.jobs[job_id].update(
            state="INACTIVE", result=result, returncode=returncode, t_inactive=time.time()
        )

    def subcommands(self) -> List[str]:
        return [" ".join(call[1:3]) for call in self.calls if call[0] != "uname"]


class FakeSSH:
    """Not a local executor: what the adapter sees of an SSH transport."""

    kind = "ssh://hpcbtest@login:22"
    host = "login"
    is_local = False

    def __init__(self) -> None:
        self.inner = FakeFlux()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


#: the configuration of an instance with two named queues, "batch" the default
NAMED = json.dumps(
    {
        "queues": {"debug": {}, "batch": {}},
        "policy": {"jobspec": {"defaults": {"system": {"queue": "batch"}}}},
    }
)
