"""The REST driver: Slurm through slurmrestd.  Glue only - ``rest_requests`` builds each
request, ``rest_answers`` reads each answer, the engine's runner runs them as
``driver.Call``\\ s through ``HttpClient`` - as rows of the Slurm glue in ``cli_driver``:
the queue, the history, a submission, keys, cancels, the caps on queued jobs, a job's
output and the cluster's name are its own; the order of the questions, adoption and
the cap's cache are the glue's; its token: ``transports.token``."""

from __future__ import annotations

from typing import Any, Callable, Collection, Dict, List, Optional, Sequence

from ...engine.driver import Call, Planned, SubmitBatch
from ...transports.base import Executor
from ...transports.http import HttpClient, ReplyLost
from ...transports.token import TokenNames, command_token
from . import checks, queries
from . import rest_answers as answers
from . import rest_requests as requests
from .cli_driver import SlurmCliDriver
from .commands import SubmitSpec
from .queries import Statuses

#: 511: slurmrestd's answer when slurmctld refuses the token it passed on (401: no token)
TOKEN = TokenNames(
    "X-SLURM-USER-TOKEN", "SLURM_JWT", "HPCBRIDGE_SLURM_REST_TOKEN_COMMAND", (401, 511)
)


def send(client: HttpClient, request: requests.RestRequest) -> answers.Answer:
    """slurmrestd's answer; one lost on the way back is a 504 of our own, or for a
    submission (which may have gone in) ``SubmissionUncertainError``."""
    try:
        reply = client.send(request.method, request.target(), request.body)
    except ReplyLost as lost:
        return answers.lost_answer(request, str(lost), lost.timed_out)
    return answers.reply_answer(reply.status, reply.body)


class SlurmRestDriver(SlurmCliDriver):
    """Slurm through slurmrestd; ``version``: a data parser version to use (default: the
    newest both sides speak, found once)."""

    name = "rest"
    asks_by_id = False  # ``jobs/`` (``_live``) lists every user's jobs

    def __init__(
        self, executor: Executor, client: HttpClient, *args: Any, version: str = "", **options: Any
    ) -> None:
        super().__init__(executor, *args, **options)
        self.client = client
        self.runner.where = f"slurmrestd at {client.url}"
        self._wanted, self._version = version, ""
        self._release: Optional[str] = None

    def _call(self, request: requests.RestRequest) -> Call:
        return Call(request.describe(), lambda: send(self.client, request))

    def _ask(self, build: Callable[..., requests.RestRequest], *args: Any) -> answers.Answer:
        """slurmrestd's answer to ``build(version, *args)``'s request."""
        return self.runner.run(self._call(build(self.api_version(), *args)))

    def api_version(self) -> str:
        """The data parser version used: the newest ``/openapi/v3`` lists that hpcbridge
        speaks (the one asked for, where a gateway hides the document)."""
        if not self._version:
            found = self.runner.ask(self._call(requests.openapi()), answers.openapi_answer)
            spoken, self._release = answers.spoken_versions(found), answers.release(found)
            spoken = [self._wanted] if found.status >= 400 and self._wanted else spoken
            self._version = answers.choose_version(spoken, self._wanted)
        return self._version

    # -- the table's own rows -------------------------------------------------------

    def _live(self, ids: List[str]) -> Statuses:
        """The light states (``jobs/state``) of ``ids``; the full records of those it does
        not settle: each job's own (``job/{id}``) when few, else every job's (``jobs/``)."""
        version, aliases = self.api_version(), answers.task_aliases(self._last)
        states = self.runner.ask_each(
            lambda chunk: self._call(requests.job_states(version, chunk)),
            ids,
            lambda answer, _chunk: answers.states_answer(answer, aliases),
            size=500,  # ids per request, each a job_id= pair in the URL
        )
        found, to_ask = queries.light_round(ids, self._last, states)
        # 25.11's jobs/state names a task split off its array by its own id: ask it in full
        to_ask += [job_id for job_id in ids if "_" in job_id and job_id not in states]
        for req in requests.full_records(version, to_ask):
            found.update(self.runner.ask(self._call(req), lambda a: answers.live_answer(a, to_ask)))
        return found

    def _history(self, asked: List[str], wanted: List[str]) -> Statuses:
        request = self._call(requests.history(self.api_version(), asked))
        return self.runner.ask(request, lambda answer: answers.history_answer(answer, wanted))

    def _send(self, spec: SubmitSpec) -> str:
        request = self._call(requests.submit(self.api_version(), self._description(spec)))
        return self.runner.submit(
            request, answers.submitted_answer, key=spec.key, find=self.find_keys, settle=self.settle
        )

    def _description(self, spec: SubmitSpec) -> Dict[str, Any]:
        script, environment = self._wrapper(spec)
        return requests.job_description(spec, script, environment or {"PATH": "/usr/bin:/bin"})

    def find_keys(self, keys: Collection[str]) -> Dict[str, str]:
        """key -> the job carrying it: slurmctld's jobs, else slurmdbd's of the last hour."""
        request = self._call(requests.jobs(self.api_version()))
        found = self.runner.ask(request, lambda answer: answers.keys_answer(answer, keys))
        if len(found) < len(keys):
            history = self._ask(requests.history_since)
            if history.status < 400:
                found = {**answers.keys_answer(history, keys), **found}
        return found

    # -- what differs beyond the table ------------------------------------------------

    def plan(self, batch: SubmitBatch) -> Planned:
        return requests.plan(batch, self.client.url)

    def describe(self, planned: Planned) -> str:
        return requests.describe(planned, self.api_version())

    def cancel(self, job_ids: Sequence[str]) -> None:
        """One ``DELETE`` per job; one that ended meanwhile or was purged is no failure."""
        for job_id in dict.fromkeys(job_ids):
            answers.cancel_answer(self._ask(requests.cancel, job_id))

    def _read_queue_limit(self, account: Optional[str] = None) -> Optional[int]:
        user = self.runner.run(["id", "-un"])  # the login the association is kept under
        if not user.ok:
            return None
        assoc = self._ask(requests.associations, user.stdout.strip())
        return answers.caps_answer(assoc, self._ask(requests.qos), account)

    def config(self) -> Dict[str, str]:
        """What slurmrestd tells of slurm.conf: the cluster's name (MaxArraySize... it does
        not: their defaults)."""
        if self._config is None:
            self._config = answers.config_answer(self._ask(requests.ping))
        return self._config

    def version(self) -> Optional[str]:
        self.api_version()
        return self._release

    def find_output(self, job_id: str) -> Optional[str]:
        return answers.output_answer(self._ask(requests.job, job_id))


def build_rest_driver(
    executor: Executor,
    cli: SlurmCliDriver,
    url: Optional[str],
    version: str = "",
    token_command: Optional[str] = None,
) -> SlurmRestDriver:
    """The REST driver for ``url`` with ``cli``'s settings; the token from ``SLURM_JWT``,
    made again before it expires by ``token_command`` (``scontrol token``: through
    ``executor``, where the cluster's commands are)."""
    timeout = cli.command_timeout or 60.0
    token = command_token(TOKEN, token_command, executor, cli.env, timeout)
    setting = "HPCBRIDGE_SLURM_REST_URL"
    client = HttpClient(checks.rest_url(url), timeout=timeout, setting=setting, token=token)
    return SlurmRestDriver(
        executor,
        client,
        cli.command_timeout,
        cli.env,
        cli._max_array_size,
        version=version,
        query_retries=cli.query_retries,
        limit_cache=cli.limits,
    )
