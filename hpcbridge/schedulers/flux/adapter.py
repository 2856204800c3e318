"""FluxAdapter: the Flux scheduler = a driver (native or CLI) x an executor.

Driver choice (``driver="auto"``), made once, on first use:

1. the transport must be local (the bindings talk to brokers from *this*
   process; over SSH only the CLI reaches the broker's side);
2. ``import flux`` (and ``flux.job``) must work - also trying the bindings
   installed beside the ``flux`` command, ``<prefix>/lib/flux/python3.X``;
3. a handle to the target URI must open and answer ``attr.get version``
   within a bounded time (clients of another release hang or fail here).

Any failure picks the CLI driver and logs one line with the reason.
``driver="native"`` makes such a failure an error instead; ``driver="cli"``
never tries the bindings.  The broker's version then picks the version
policy (0.26 / 0.49, see ``versions.py``).
"""

from __future__ import annotations

import logging
import math
import os
import platform
import shlex
import threading
import time
from dataclasses import replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...config import Settings
from ...durations import format_fsd
from ...errors import (
    ConfigurationError,
    JobNotFoundError,
    JobSubmissionError,
    SchedulerUnavailableError,
)
from ...jobscript import PreparedJob, TaskSpec
from ...model import JobState, JobStatus
from ...resources import Resources
from ...store import JobRecord, JobStore
from ...transports.base import Executor
from ...transports.local import LocalExecutor
from ..base import Pauser, SchedulerAdapter
from . import commands
from .cli import CLIDriver, local_form
from .ids import F58_PREFIX, InvalidJobIdError, canonical_job_id
from .native import BindingsUnavailable, NativeDriver, bindings_version, import_bindings
from .queues import QueueChoice, QueueInfo, choose_queue, log_choice, submission_error
from .uri import choose_uri, classify
from .versions import POLICIES, FluxPolicy, choose_policy

log = logging.getLogger("hpcbridge")

DRIVERS = ("auto", "native", "cli")

#: how long the instance's expiration is trusted before asking again
_EXPIRATION_TTL = 60.0


class FluxAdapter(SchedulerAdapter):
    """Submit batch jobs (nested instances) to a Flux broker and follow them."""

    scheduler_name = "flux"
    output_template = "flux-{id}.out"
    # Flux expands the mustache template itself (to the F58 id with "ƒ").
    output_placeholder = "{{id}}"

    def __init__(
        self,
        executor: Optional[Executor] = None,
        remote_workdir: Optional[str] = None,
        uri: Optional[str] = None,
        *,
        settings: Optional[Settings] = None,
        store: Optional[JobStore] = None,
        driver: Optional[str] = None,
        adapter_version: Optional[str] = None,
        flux_command: Optional[str] = None,
        parent_uri: Optional[str] = None,
        unknown_limit: Optional[int] = None,
        command_timeout: Optional[float] = None,
        outer_time_margin: float = 60.0,
        ready_timeout: float = 30.0,
        probe_timeout: float = 10.0,
        discover_bindings: bool = True,
    ) -> None:
        super().__init__(
            executor,
            remote_workdir,
            settings=settings,
            store=store,
            unknown_limit=unknown_limit,
            command_timeout=command_timeout,
        )
        driver = driver or self.settings.flux_driver
        if driver not in DRIVERS:
            raise ConfigurationError(
                f"unknown Flux driver {driver!r}; choose one of {', '.join(DRIVERS)}"
            )
        self.requested_driver = driver
        self.adapter_version = adapter_version or self.settings.flux_adapter_version
        self.flux_command = flux_command or self.settings.flux_command
        self.parent_uri = parent_uri
        self.outer_time_margin = outer_time_margin
        self.ready_timeout = ready_timeout
        self.probe_timeout = probe_timeout
        self.discover_bindings = discover_bindings
        self.uri_setting = choose_uri(
            uri,
            self.settings.flux_uri,
            os.environ,
            local_transport=isinstance(self.executor, LocalExecutor),
        )
        self._select_lock = threading.RLock()
        self._driver: Any = None
        self._driver_reason = ""
        self._uri: Optional[str] = None
        self._cli: Optional[CLIDriver] = None
        self._flux_module: Any = None
        self._bindings_error = ""
        self._broker_version: Optional[str] = None
        self._policy: Optional[FluxPolicy] = None
        self._policy_reason = ""
        self._queues: Optional[QueueInfo] = None
        self._queues_fetched = False
        self._expiration: Tuple[float, Optional[float]] = (-math.inf, None)
        self._ready = False

    # -- driver selection ---------------------------------------------------

    @property
    def driver(self) -> Any:
        """The driver in use (selected on first access)."""
        return self._select()

    @property
    def driver_kind(self) -> str:
        return str(self._select().kind)

    @property
    def uri(self) -> Optional[str]:
        """The resolved URI of the target instance (``None`` = system instance)."""
        self._select()
        return self._uri

    def _flux_bin_dir(self) -> Optional[str]:
        if os.sep in self.flux_command:
            return os.path.dirname(os.path.abspath(self.flux_command))
        return None

    def _select(self) -> Any:
        if self._driver is not None:
            return self._driver
        with self._select_lock:
            if self._driver is not None:
                return self._driver
            cli = CLIDriver(
                self.executor,
                None,
                flux_command=self.flux_command,
                command_timeout=self.command_timeout,
                ready_timeout=self.ready_timeout,
            )
            flux_module, reason = self._bindings()
            uri = self._resolve_setting(cli, flux_module)
            cli.uri = uri
            chosen: Any = cli
            if flux_module is not None:
                native = NativeDriver(uri, flux_module, self.command_timeout, self._flux_bin_dir())
                try:
                    self._broker_version = native.probe(self.probe_timeout)
                    chosen = native
                    version = bindings_version(flux_module) or "?"
                    reason = f"bindings {version} talk to {uri or 'the system instance'}"
                except Exception as exc:  # noqa: BLE001 - any failure means "use the CLI"
                    native.reset()
                    reason = f"cannot use a handle to {uri or 'the system instance'}: {_text(exc)}"
            if chosen is cli:
                if self.requested_driver == "native":
                    raise SchedulerUnavailableError(f"the native Flux driver is unusable: {reason}")
                if self.requested_driver == "auto":
                    log.warning("flux: using the CLI driver (%s)", reason)
                else:
                    log.debug("flux: CLI driver (%s)", reason)
            self._uri = uri
            self._cli = cli
            self._driver_reason = reason
            self._driver = chosen
            return chosen

    def _bindings(self) -> Tuple[Any, str]:
        """The flux module, or ``None`` and why not."""
        if self.requested_driver == "cli":
            return None, "driver='cli' requested"
        if not isinstance(self.executor, LocalExecutor):
            return None, (
                f"the transport is {self.executor.kind}: the bindings reach brokers from this "
                "process only, the CLI runs where the broker is"
            )
        try:
            module = import_bindings(self.flux_command, discover=self.discover_bindings)
        except BindingsUnavailable as exc:
            self._bindings_error = str(exc)
            return None, f"flux bindings unusable: {exc}"
        self._flux_module = module
        return module, ""

    def _resolve_setting(self, cli: CLIDriver, flux_module: Any) -> Optional[str]:
        value = self.uri_setting.value
        if not value:
            return None
        kind, text = classify(value)
        if kind == "uri":
            return text  # local:// and ssh:// are used as given
        return self.resolve_target(text, cli=cli, flux_module=flux_module)

    def resolve_target(
        self,
        target: str,
        *,
        local: Optional[bool] = None,
        cli: Optional[CLIDriver] = None,
        flux_module: Any = None,
    ) -> str:
        """The URI of ``target`` (``slurm:ID``, ``lsf:ID``, ``jobid:ID``, a Flux job id).

        Like ``flux uri --remote TARGET``, then turned into the ``local://``
        form when the target runs where the commands run (``local=None``),
        always (``local=True``) or never (``local=False``).  A job that is
        still starting is waited for, up to ``ready_timeout``.
        """
        kind, text = classify(target)
        if kind == "uri":
            return text
        cli = (
            cli
            or self._cli
            or CLIDriver(self.executor, None, self.flux_command, self.command_timeout)
        )
        if flux_module is None and self._driver is None and self.requested_driver != "cli":
            flux_module, _ = self._bindings()  # in-process when the bindings work here
        deadline = time.monotonic() + self.ready_timeout
        uri = ""
        if flux_module is not None:
            native = NativeDriver(None, flux_module, self.command_timeout)
            while True:
                try:
                    uri = native.resolve_uri(text, self.parent_uri)
                    break
                except LookupError as exc:
                    if time.monotonic() >= deadline:
                        raise ConfigurationError(f"cannot resolve {target!r}: {exc}") from None
                    time.sleep(0.25)
                except Exception as exc:  # noqa: BLE001 - the CLI may still manage
                    log.debug("native URI resolution of %s failed (%s); trying flux uri", text, exc)
                    break
        if not uri:
            try:
                uri = cli.resolve_uri(text, self.parent_uri, self.ready_timeout)
            except LookupError as exc:
                raise ConfigurationError(f"cannot resolve {target!r}: {exc}") from None
        if local is False:
            return uri
        here = self._command_host(cli)
        localized = local_form(uri, here)
        if local and localized == uri and uri.startswith("ssh://"):
            localized = "local:///" + uri.split("/", 3)[-1]
        return localized

    def _command_host(self, cli: CLIDriver) -> Optional[str]:
        if isinstance(self.executor, LocalExecutor):
            return platform.node()
        return cli.hostname()

    # -- version policy ---------------------------------------------------------

    @property
    def policy(self) -> FluxPolicy:
        """The version policy; detected from the broker on first use."""
        if self._policy is not None:
            return self._policy
        driver = self._select()
        version = self._broker_version
        if version is None and isinstance(driver, CLIDriver):
            versions = driver.versions()
            version = versions.get("broker")
        policy, reason = choose_policy(version, self.adapter_version)
        if version is not None or self.adapter_version:
            self._broker_version = version
            self._policy, self._policy_reason = policy, reason
        if self._cli is not None:
            self._cli.policy = policy
        return policy

    # -- submission -----------------------------------------------------------

    def _task_index_variable(self) -> Optional[str]:
        return commands.TASK_INDEX_VARIABLE

    def normalize_job_id(self, job_id: Any) -> str:
        try:
            return canonical_job_id(job_id)
        except InvalidJobIdError as exc:
            raise JobNotFoundError(str(exc)) from None

    def _request(
        self, job: PreparedJob, resources: Resources, depends_on: List[str], check: bool = True
    ) -> commands.SubmitRequest:
        policy = self.policy
        choice = self._queue_choice(resources.qos, policy)
        log_choice(choice)
        request = self._submit_request(job, resources, depends_on, choice.queue, policy)
        if check:
            self._check_outer_limit(request.duration)
        return request

    def _submit_request(
        self,
        job: PreparedJob,
        resources: Resources,
        depends_on: List[str],
        queue: Optional[str],
        policy: FluxPolicy,
    ) -> commands.SubmitRequest:
        request, warnings = commands.plan_request(
            resources,
            wrapper_path=job.wrapper_path,
            job_name=job.job_name,
            output=self.output_path(job, resources),
            cwd=job.remote_dir,
            depends_on=depends_on,
            queue=queue,
            policy=policy,
        )
        for warning in warnings:
            log.warning("flux: %s", warning)
        return request

    def _queue_choice(self, requested: Optional[str], policy: FluxPolicy) -> QueueChoice:
        info = self.queue_info() if policy.queues else None
        return choose_queue(requested, info, policy)

    def queue_info(self) -> Optional[QueueInfo]:
        """The broker's queues (cached for this adapter)."""
        if not self._queues_fetched:
            driver = self._select()
            try:
                self._queues = driver.queue_info()
            except OSError as exc:
                log.debug("flux: cannot read the queue configuration: %s", exc)
                self._queues = None
            self._queues_fetched = True
        return self._queues

    def time_left(self) -> Optional[float]:
        """Seconds until the target instance ends (inside a time-limited job), else ``None``."""
        fetched, expiration = self._expiration
        if time.monotonic() - fetched > _EXPIRATION_TTL:
            try:
                expiration = self._select().expiration()
            except Exception as exc:  # noqa: BLE001 - unknown: no check
                log.debug("flux: cannot read the instance expiration: %s", exc)
                expiration = None
            self._expiration = (time.monotonic(), expiration)
        if expiration is None:
            return None
        # The client's clock; over SSH a skew of seconds is covered by the margin.
        return expiration - time.time()

    def _check_outer_limit(self, duration: Optional[float]) -> None:
        """Refuse a job that cannot fit in what the enclosing job has left.

        A nested instance (``flux batch``, or a broker inside a Slurm job)
        ends with its job; Flux may reject a longer request late or kill
        the job at the outer limit - say so now, with the numbers.
        """
        if not duration:
            return
        left = self.time_left()
        if left is None:
            return
        allowed = left - self.outer_time_margin
        if duration <= allowed:
            return
        ends = (
            f"the target Flux instance ends in {format_fsd(max(round(left), 0))} (it runs "
            "inside a job with a time limit)"
        )
        margin = format_fsd(self.outer_time_margin)
        if allowed <= 0:
            raise JobSubmissionError(
                f"{ends}: too little left for a job of {format_fsd(duration)} "
                f"with a {margin} margin"
            )
        raise JobSubmissionError(
            f"{ends}: a job of {format_fsd(duration)} would not fit; ask for at most "
            f"{format_fsd(math.floor(allowed))} ({margin} margin)"
        )

    def _ensure_ready(self, driver: Any) -> None:
        if self._ready:
            return
        try:
            driver.wait_ready(self.ready_timeout)
        except OSError as exc:
            log.debug("flux: readiness check failed: %s", exc)
        self._ready = True

    def _submit(self, job: PreparedJob, resources: Resources, depends_on: List[str]) -> str:
        request = self._request(job, resources, depends_on)
        driver = self._select()
        self._ensure_ready(driver)
        if isinstance(driver, NativeDriver):
            results = self._native_submit(driver, [request])
            ok, value = results[0]
            if not ok:
                raise submission_error(value, what="flux.job.submit")
            return value
        return str(driver.submit(request))

    def _native_submit(
        self, driver: NativeDriver, requests: Sequence[commands.SubmitRequest]
    ) -> List[Tuple[bool, str]]:
        deadline = time.monotonic() + self.ready_timeout
        while True:
            try:
                results = self._native_submit_once(driver, requests)
            except OSError as exc:
                driver.reset()
                raise JobSubmissionError(
                    f"cannot submit to the Flux instance {self._uri or '(system)'}: {_text(exc)}"
                ) from exc
            # A nested instance still starting has no job-ingest service yet
            # ("No service matching job-ingest.submit"): nothing was accepted,
            # so sending again is safe.  Anything else is final.
            not_ready = not any(ok for ok, _ in results) and all(
                "job-ingest" in value for _, value in results
            )
            if not not_ready or time.monotonic() >= deadline:
                return results
            time.sleep(0.25)

    @staticmethod
    def _native_submit_once(
        driver: NativeDriver, requests: Sequence[commands.SubmitRequest]
    ) -> List[Tuple[bool, str]]:
        """Build each distinct jobspec once; bulk tasks differ only in their environment."""
        if len(requests) == 1:
            return driver.submit_many(requests)
        shape = replace(requests[0], environment={})
        spec = driver.jobspec(shape)
        environment = dict(spec.environment)
        texts = []
        for request in requests:
            if replace(request, environment={}) == shape:
                merged = dict(environment)
                merged.update(request.environment)
                spec.environment = merged
                texts.append(spec.dumps())
            else:
                texts.append(driver.jobspec(request).dumps())
        return driver.submit_prepared(texts)

    def _submit_tasks(
        self,
        tasks: List[TaskSpec],
        resources: Resources,
        depends_on: List[str],
        remote_dir: Optional[str],
    ) -> List[str]:
        """Bulk: one folder, one many-task wrapper, all jobs in one go.

        Native: pipelined ``submit_async``.  CLI: one ``flux python`` process
        on the broker's side.  Each job selects its task by
        ``HPCBRIDGE_TASK_INDEX`` in its environment.
        """
        job = self._plan(tasks, resources, remote_dir)
        self._stage(job, tasks)
        base = self._request(job, resources, depends_on)
        if len(tasks) == 1:
            requests = [base]
            exit_files = [job.exit_file]
        else:
            requests = [
                base.with_environment(**{commands.TASK_INDEX_VARIABLE: str(index)})
                for index in range(len(tasks))
            ]
            exit_files = [f"{job.exit_file}.{index}" for index in range(len(tasks))]
        driver = self._select()
        self._ensure_ready(driver)
        if isinstance(driver, NativeDriver):
            results = self._native_submit(driver, requests)
        else:
            results = driver.submit_many(requests)
        submitted = [(index, value) for index, (ok, value) in enumerate(results) if ok]
        if submitted:
            self._record(
                [value for _, value in submitted],
                job,
                resources,
                [tasks[index] for index, _ in submitted],
                exit_files=[exit_files[index] for index, _ in submitted],
            )
        failures = [(index, value) for index, (ok, value) in enumerate(results) if not ok]
        if failures:
            first = failures[0][1]
            error = submission_error(first, what="flux")
            error.args = (
                f"{len(failures)} of {len(tasks)} submissions failed "
                f"(first: {error.scheduler_message}); "
                f"submitted: {', '.join(value for _, value in submitted) or 'none'}",
            )
            error.submitted_ids = [value for _, value in submitted]  # type: ignore[attr-defined]
            raise error
        ids = [value for _, value in submitted]
        log.info("submitted %d flux jobs (%s)", len(ids), job.remote_dir)
        return ids

    def _describe(self, job: PreparedJob, resources: Resources, depends_on: List[str]) -> str:
        try:
            request = self._request(job, resources, depends_on, check=False)
            driver = self._select()
        except (SchedulerUnavailableError, ConfigurationError, OSError) as exc:
            # A dry run must work where no Flux is reachable (a laptop, CI): show
            # what the newest adapter would run, and say what could not be checked.
            newest = POLICIES[0]
            request = self._submit_request(job, resources, depends_on, resources.qos, newest)
            line = shlex.join(commands.batch_argv(self.flux_command, newest, request))
            return f"{line}\n# not checked against a broker ({exc}); adapter {newest.name} assumed"
        if isinstance(driver, NativeDriver):
            spec = driver.jobspec(request)
            spec.environment = {"...": "(the submitting process's environment)"}
            return f"flux.job.submit(Flux({self._uri or ''!s}), {spec.dumps()})"
        argv = commands.batch_argv(self.flux_command, self.policy, request)
        prefix = f"FLUX_URI={shlex.quote(self._uri)} " if self._uri else ""
        return prefix + shlex.join(argv)

    def _record_uri(self) -> Optional[str]:
        return self._uri

    # -- status --------------------------------------------------------------

    def _query(self, job_ids: List[str], records: Mapping[str, JobRecord]) -> Dict[str, JobStatus]:
        try:
            driver = self._select()
            if isinstance(driver, CLIDriver):
                _ = self.policy  # command names and output format depend on it
            statuses = driver.query(job_ids)
        except (ConfigurationError, SchedulerUnavailableError, OSError) as exc:
            reason = f"cannot reach the Flux instance: {exc}"
            statuses = {
                job_id: JobStatus(job_id, JobState.UNKNOWN, reason=reason) for job_id in job_ids
            }
        for job_id, status in list(statuses.items()):
            if status.state is JobState.UNKNOWN:
                statuses[job_id] = self._from_exit_file(status, records.get(job_id))
        return statuses

    def _from_exit_file(self, status: JobStatus, record: Optional[JobRecord]) -> JobStatus:
        """A job Flux no longer lists (purged, or its instance is gone): the wrapper's file."""
        found = self._status_from_exit_file(status, record)
        if found is None:
            return status
        reason = f"from the exit-code file ({status.reason})" if status.reason else ""
        return found.with_(reason=reason or "from the exit-code file")

    def _cancel(self, job_ids: List[str]) -> None:
        driver = self._select()
        if isinstance(driver, CLIDriver):
            _ = self.policy
        try:
            errors = driver.cancel(job_ids)
        except OSError as exc:
            errors = [_text(exc)]
        for error in errors:
            # Cancelling a job that already ended is not an error for us.
            log.debug("flux cancel: %s", error)

    # -- waiting: event driven with the native driver -------------------------

    def _pauser(self, job_ids: List[str]) -> Pauser:
        """With the native driver the pause between status rounds ends the
        moment a job ends (``result_async`` futures): a finished job is seen at
        once, not at the next poll.  The CLI driver sleeps like the others."""
        try:
            driver = self._select()
        except (ConfigurationError, SchedulerUnavailableError):
            driver = None
        if not isinstance(driver, NativeDriver):
            return super()._pauser(job_ids)
        try:
            return _ResultPauser(driver.waiter(job_ids))
        except Exception as exc:  # noqa: BLE001 - fall back to sleeping
            log.debug("flux: cannot watch job results (%s); polling", exc)
            driver.reset()
            return super()._pauser(job_ids)

    # -- logs ----------------------------------------------------------------

    def get_job_logs(self, job_id: Any) -> str:
        text = super().get_job_logs(job_id)
        if text:
            return text
        path = self.log_path(job_id)
        if F58_PREFIX in path:
            # Some releases/locales spell the id with an ASCII "f" in {{id}}.
            ascii_path = path.replace(F58_PREFIX, "f")
            try:
                if self.executor.exists(ascii_path):
                    return self.executor.read_text(ascii_path)
            except OSError:
                return ""
        return text

    def _find_log_path(self, job_id: str) -> Optional[str]:
        """From the job's jobspec (``flux job info ID jobspec``) when there is no record."""
        driver = self._select()
        cli = self._cli if self._cli is not None else driver
        result = cli.run(commands.jobspec_argv(self.flux_command, job_id))
        if not result.ok:
            return None
        return commands.output_path_from_jobspec(result.stdout, job_id)

    # -- diagnostics -------------------------------------------------------------

    def doctor_info(self) -> Dict[str, Any]:
        """What this adapter uses and why; never raises."""
        info: Dict[str, Any] = {
            "scheduler": "flux",
            "transport": self.executor.kind,
            "flux_command": self.flux_command,
            "uri_setting": self.uri_setting.value,
            "uri_source": self.uri_setting.source,
            "warnings": [],
        }
        try:
            driver = self._select()
        except Exception as exc:  # noqa: BLE001
            info["driver"] = None
            info["error"] = str(exc)
            return info
        info["driver"] = driver.kind
        info["driver_reason"] = self._driver_reason
        info["uri"] = self._uri
        try:
            policy = self.policy
            info["adapter_version"] = policy.name
            info["adapter_version_reason"] = self._policy_reason or "broker version unknown"
        except Exception as exc:  # noqa: BLE001
            info["adapter_version"] = None
            info["warnings"].append(f"no usable adapter version: {exc}")
        info["broker_version"] = self._broker_version
        if self._flux_module is not None:
            info["bindings_version"] = bindings_version(self._flux_module)
        elif self._bindings_error:
            info["bindings_error"] = self._bindings_error
        try:
            if self._cli is not None:
                versions = self._cli.versions()
                info["commands_version"] = versions.get("commands")
        except Exception as exc:  # noqa: BLE001
            info["warnings"].append(f"flux version failed: {exc}")
        broker = info.get("broker_version")
        for key, label in (
            ("bindings_version", "the Python bindings"),
            ("commands_version", "the flux commands"),
        ):
            other = info.get(key)
            if broker and other and other != broker:
                info["warnings"].append(
                    f"{label} are {other} but the broker is {broker}: use those of the "
                    "broker's release (mixed releases fail with 'Protocol error' or "
                    "'invalid payload', or hang)"
                )
        try:
            queues = self.queue_info()
            info["queues"] = (
                None
                if queues is None
                else {
                    "names": list(queues.names),
                    "default": queues.default,
                    "source": queues.source,
                }
            )
        except Exception as exc:  # noqa: BLE001
            info["warnings"].append(f"queues unknown: {exc}")
        try:
            left = self.time_left()
            info["time_left"] = left
        except Exception as exc:  # noqa: BLE001
            info["warnings"].append(f"time left unknown: {exc}")
        return info

    def describe(self) -> str:
        kind = self._driver.kind if self._driver is not None else self.requested_driver
        target = self._uri or self.uri_setting.value or "system instance"
        return f"flux via {self.executor.kind} ({kind} driver, {target})"

    def close(self) -> None:
        if isinstance(self._driver, NativeDriver):
            self._driver.reset()
        super().close()


def _text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class _ResultPauser(Pauser):
    """Sleeps until a watched job's result arrives, or the pause is over."""

    def __init__(self, waiter: Any) -> None:
        self.waiter = waiter

    def pause(self, seconds: float) -> bool:
        # Never return early without a reason: a waiter whose broker went away
        # answers at once, and the UNKNOWN streak must still take its time.
        started = time.monotonic()
        woke = False
        if not self.waiter.broken:
            try:
                woke = bool(self.waiter.wait(seconds))
            except Exception as exc:  # noqa: BLE001 - a lost connection: just sleep
                log.debug("flux: waiting for results failed (%s)", exc)
                self.waiter.broken = True
        if not woke:
            time.sleep(max(seconds - (time.monotonic() - started), 0))
        return woke

    def close(self) -> None:
        self.waiter.close()


__all__ = ["FluxAdapter"]
