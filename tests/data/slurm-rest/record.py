"""Record slurmrestd's answers for the REST parsers' tests (tests/data/slurm-rest/).

Run as the user slurmrestd runs as (rest_auth/local answers only that uid), against a
slurmrestd of containers/slurmrestd/start.sh:

    runuser -u hpcbtest -- python3 tests/data/slurm-rest/record.py SOCKET JOBDIR OUT [--only-openapi NAME]

Each answer is OUT/<version>/<name>.json: {"request": {...}, "status": N, "answer": ...}
(the answer as slurmrestd sent it, parsed; text where it was no JSON).  The OpenAPI
document (1.2 MB) is kept trimmed to its info and its paths' methods.  Standard library only.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import sys
import time
import urllib.parse
from typing import Any, Dict, List, Optional

VERSIONS = ("v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44")


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=60)
        self.unix_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.unix_path)


class Recorder:
    def __init__(self, sock: str, out: str) -> None:
        self.sock, self.out = sock, out

    def call(
        self, method: str, path: str, query: Optional[List[List[str]]] = None, body: Any = None
    ) -> Dict[str, Any]:
        pairs = [(name, value) for name, value in query or []]
        url = path + ("?" + urllib.parse.urlencode(pairs, safe=",") if pairs else "")
        connection = UnixConnection(self.sock)
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data else {}
        connection.request(method, url, body=data, headers=headers)
        reply = connection.getresponse()
        text = reply.read().decode()
        connection.close()
        try:
            answer: Any = json.loads(text)
        except ValueError:
            answer = text
        request = {"method": method, "path": path, "query": query or [], "body": body}
        return {"request": request, "status": reply.status, "answer": answer}

    def save(self, folder: str, name: str, record: Dict[str, Any]) -> Dict[str, Any]:
        os.makedirs(os.path.join(self.out, folder), exist_ok=True)
        with open(os.path.join(self.out, folder, name + ".json"), "w") as file:
            json.dump(record, file, sort_keys=True, separators=(",", ":"))
            file.write("\n")
        return record

    def record(self, folder: str, name: str, method: str, path: str, **kw: Any) -> Dict[str, Any]:
        return self.save(folder, name, self.call(method, path, **kw))

    def openapi(self, name: str) -> None:
        record = self.call("GET", "/openapi/v3")
        spec = record["answer"]
        record["answer"] = {
            "info": spec["info"],
            "paths": {path: sorted(ops) for path, ops in sorted(spec["paths"].items())},
        }
        record["trimmed"] = "info and the paths' methods only"
        self.save("openapi", name, record)


def job(jobdir: str, name: str, script: str, **extra: Any) -> Dict[str, Any]:
    found = {
        "script": "#!/bin/bash\n" + script + "\n",
        "environment": ["PATH=/usr/bin:/bin", "HOME=" + jobdir],
        "current_working_directory": jobdir,
        "standard_output": f"{jobdir}/{name}-%j.out",
        "name": name,
        "comment": f"hpcbridge:key-{name}",
    }
    found.update(extra)
    return found


def number(value: int) -> Dict[str, Any]:
    return {"set": True, "infinite": False, "number": value}


def main(argv: List[str]) -> None:
    sock, jobdir, out = argv[1:4]
    rec = Recorder(sock, out)
    if len(argv) > 5 and argv[4] == "--only-openapi":
        rec.openapi(argv[5])
        return
    rec.openapi("openapi_v3")
    for version in VERSIONS:
        rec.record(version, "ping", "GET", f"/slurm/{version}/ping/")
        rec.record(version, "diag", "GET", f"/slurm/{version}/diag/")
    rec.save("openapi", "removed_version_ping", rec.call("GET", "/slurm/v0.0.40/ping/"))

    ids: Dict[str, str] = {}

    def submit(version: str, name: str, description: Dict[str, Any], save_as: str = "") -> str:
        record = rec.record(
            version,
            save_as or f"submit_{name}",
            "POST",
            f"/slurm/{version}/job/submit",
            body={"job": description},
        )
        job_id = record["answer"].get("job_id") if isinstance(record["answer"], dict) else None
        if job_id:
            ids[name] = str(job_id)
        return str(job_id or "")

    v44 = "v0.0.44"
    submit(v44, "completed", job(jobdir, "completed", "exit 0", time_limit=number(5)))
    submit(v44, "failed_exit3", job(jobdir, "failed_exit3", "exit 3"))
    submit(v44, "failed_sigkill", job(jobdir, "failed_sigkill", "kill -9 $$"))
    submit(v44, "running", job(jobdir, "running", "sleep 300"))
    submit(
        v44,
        "pending_begin",
        job(jobdir, "pending_begin", "exit 0", begin_time=number(int(time.time()) + 3600)),
    )
    submit(
        v44,
        "array",
        job(
            jobdir,
            "array",
            '[ "$SLURM_ARRAY_TASK_ID" = 2 ] && exit 2; exit 0',
            array="0-3",
            standard_output=f"{jobdir}/array-%A_%a.out",
        ),
    )
    submit(
        v44,
        "array_throttled",
        job(
            jobdir,
            "array_throttled",
            "sleep 40",
            array="0-4%1",
            standard_output=f"{jobdir}/thr-%A_%a.out",
        ),
    )
    submit(v44, "timeout", job(jobdir, "timeout", "sleep 300", time_limit=number(1)))
    submit(v44, "signalled", job(jobdir, "signalled", "trap 'exit 7' USR2; sleep 300 & wait"))
    submit(v44, "argv_task", job(jobdir, "argv_task", 'echo "args:$#:$*"', argv=["wrapper", "7"]))
    submit(
        v44,
        "resources",
        job(
            jobdir,
            "resources",
            "exit 0",
            partition="short",
            qos="fast",
            account="hpcb",
            tasks=2,
            cpus_per_task=1,
            minimum_nodes=1,
            memory_per_node=number(100),
            requeue=False,
            kill_warning_signal="USR1",
            kill_warning_delay=number(30),
            shared=["none"],
        ),
    )
    time.sleep(1)
    submit(
        v44,
        "dependency_never",
        job(
            jobdir,
            "dependency_never",
            "exit 0",
            dependency=f"afterok:{ids.get('failed_exit3', '1')}",
            flags=["KILL_INVALID_DEPENDENCY"],
        ),
    )
    for version in VERSIONS:
        tag = version.replace(".", "")[-2:]
        submit(
            version,
            f"completed_{tag}",
            job(jobdir, f"completed_{tag}", "exit 0", time_limit=number(5)),
            "submit_completed",
        )
        submit(
            version,
            f"refused_{tag}",
            job(jobdir, "refused", "exit 0", partition="nosuch"),
            "submit_refused_partition",
        )
        submit(
            version,
            f"over_{tag}",
            job(jobdir, "over", "exit 0", partition="short", time_limit=number(10)),
            "submit_refused_time",
        )
        submit(
            version,
            f"noenv_{tag}",
            {k: v for k, v in job(jobdir, "noenv", "exit 0").items() if k != "environment"},
            "submit_refused_no_environment",
        )
    rec.save("openapi", "jobs", {"ids": ids})
    everything = [["job_id", job_id] for job_id in ids.values()]

    def snapshot(label: str, extra: Optional[Dict[str, str]] = None) -> None:
        for version in VERSIONS:
            rec.record(version, f"jobs_{label}", "GET", f"/slurm/{version}/jobs/")
            rec.record(
                version,
                f"jobs_state_{label}",
                "GET",
                f"/slurm/{version}/jobs/state/",
                query=everything,
            )
            for name, path in (extra or {}).items():
                rec.record(version, f"{name}_{label}", "GET", f"/slurm/{version}{path}")

    time.sleep(6)
    base = ids["array"]
    snapshot(
        "live",
        {
            "job_running": f"/job/{ids['running']}",
            "job_array_task": f"/job/{base}_2",
            "job_array": f"/job/{base}",
            "job_unknown": "/job/999999",
            "job_throttled": f"/job/{ids['array_throttled']}",
        },
    )
    since = time.time()
    rec.record(
        v44,
        "jobs_state_csv",
        "GET",
        f"/slurm/{v44}/jobs/state/",
        query=[["job_id", f"{ids['running']},{ids['array_throttled']}"]],
    )
    time.sleep(1)
    rec.record("v0.0.41", "cancel_pending", "DELETE", f"/slurm/v0.0.41/job/{ids['pending_begin']}")
    rec.record("v0.0.42", "cancel_running", "DELETE", f"/slurm/v0.0.42/job/{ids['running']}")
    rec.record(
        "v0.0.43", "cancel_throttled", "DELETE", f"/slurm/v0.0.43/job/{ids['array_throttled']}"
    )
    rec.record(
        v44,
        "signal_batch",
        "DELETE",
        f"/slurm/{v44}/job/{ids['signalled']}",
        query=[["signal", "USR2"], ["flags", "BATCH_JOB"]],
    )
    for version in VERSIONS:
        rec.record(version, "cancel_unknown", "DELETE", f"/slurm/{version}/job/999999")
        rec.record(version, "cancel_ended", "DELETE", f"/slurm/{version}/job/{ids['completed']}")
    time.sleep(3)
    snapshot("cancelled")
    for version in VERSIONS:
        rec.record(
            version,
            "jobs_updated_since",
            "GET",
            f"/slurm/{version}/jobs/",
            query=[["update_time", f"now-{int(time.time() - since) + 1}"]],
        )
        rec.record(
            version,
            "jobs_updated_epoch",
            "GET",
            f"/slurm/{version}/jobs/",
            query=[["update_time", str(int(since))]],
        )
    # the timeout job ends some 60-90 s after it started
    deadline = time.time() + 180
    while time.time() < deadline:
        state = rec.call("GET", f"/slurm/{v44}/jobs/state/", query=[["job_id", ids["timeout"]]])
        states = [s for item in state["answer"].get("jobs", []) for s in item.get("state", [])]
        if "TIMEOUT" in states or not states:
            break
        time.sleep(2)
    snapshot("ended", {"job_timeout": f"/job/{ids['timeout']}"})
    time.sleep(25)  # past MinJobAge: the ended jobs leave slurmctld
    for version in VERSIONS:
        rec.record(version, "job_purged", "GET", f"/slurm/{version}/job/{ids['completed']}")
        rec.record(
            version, "jobs_state_purged", "GET", f"/slurm/{version}/jobs/state/", query=everything
        )
        rec.record(
            version,
            "db_jobs",
            "GET",
            f"/slurmdb/{version}/jobs/",
            query=[["step", job_id] for job_id in ids.values()],
        )
        rec.record(version, "db_job", "GET", f"/slurmdb/{version}/job/{ids['failed_sigkill']}")
        rec.record(version, "db_job_array", "GET", f"/slurmdb/{version}/job/{base}")
        rec.record(version, "db_job_unknown", "GET", f"/slurmdb/{version}/job/999999")
        rec.record(
            version,
            "db_jobs_keys",
            "GET",
            f"/slurmdb/{version}/jobs/",
            query=[["start_time", "now-3600"]],
        )
    with open(os.path.join(jobdir, f"argv_task-{ids['argv_task']}.out")) as file:
        rec.save("openapi", "argv_task_output", {"output": file.read()})


if __name__ == "__main__":
    main(sys.argv)
