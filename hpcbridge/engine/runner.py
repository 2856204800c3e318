"""The engine's runner: the one place a driver's requests run.

A driver hands it *requests* - an argv for the transport's executor (bare, or a
``driver.Command`` with its folder, standard input and time budget), or a call into the
bindings (``driver.Call``) - and pure *parsers* for their answers (a parser reads the
executor's ``CommandResult``, or what the call returned).  The runner owns what is the
same for every driver: the time budget of each command, asking again while a parser says
the request did not get through (``Again``), long id lists split into chunks, a
submission that must not be sent twice, and a lost answer adopted by the submission's
key (``adoption``) - of one job (``submit``), or of several sent at once, each job's
answer lost alone or with the rest (``send_keyed``, the driver's words in ``driver.Keyed``).
It names no scheduler: a new driver is a table of (build, parse) pairs over it, not a copy
of this glue.
"""

from __future__ import annotations

import logging
import time
from typing import (
    Any,
    Callable,
    Collection,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from ..errors import JobTimeoutError, SubmissionUncertainError
from ..retrying import retry
from ..transports.base import Executor
from . import adoption
from .driver import Again, Call, Command, Keyed, Outcome

log = logging.getLogger("hpcbridge")

T = TypeVar("T")
B = TypeVar("B")

#: an argv run through the executor (bare, or a ``Command``), or a call into the bindings
Request = Union[Sequence[str], Command, Callable[[], Any]]

#: ids per command of a long list (one ``--jobs=`` argument stays far below the 128 KiB
#: a single argument may take on Linux)
CHUNK = 2000

#: seconds a lost submission may take to be found, or found surely absent
ADOPTION_BUDGET = 180.0


class Runner:
    """Runs one driver's requests through ``executor`` (commands: ``timeout`` each, with
    ``env`` on top of the executor's).  ``where``: what is asked, for messages
    ("slurmctld on login1"); ``patience``: seconds a question is asked again for while
    its parser says ``Again`` (the driver's default)."""

    def __init__(
        self,
        executor: Executor,
        *,
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        where: str = "",
        patience: float = 10.0,
        adoption_budget: float = ADOPTION_BUDGET,
    ) -> None:
        self.executor = executor
        self.timeout = timeout
        self.env = dict(env) if env else None
        self.where = where or executor.host
        self.patience = patience
        self.adoption_budget = adoption_budget
        self._busy_noted = False

    def run(self, request: Request, *, idempotent: bool = True) -> Any:
        """The request's raw answer, asked once: a ``CommandResult``, or what the call returned."""
        if isinstance(request, Command):
            return self.executor.run(
                list(request.argv),
                timeout=self.timeout if request.timeout is None else request.timeout,
                env=self.env,
                cwd=request.cwd,
                input=request.stdin,
                idempotent=idempotent,
            )
        if callable(request):
            return request()
        return self.executor.run(
            list(request), timeout=self.timeout, env=self.env, idempotent=idempotent
        )

    def ask(
        self,
        request: Request,
        parse: Callable[[Any], T] = lambda answer: answer,
        *,
        budget: Optional[float] = None,
        retry_on: Tuple[Type[BaseException], ...] = (),
    ) -> T:
        """``parse(answer)``, asked again with back-off (1, 2, 4, 8 s) while ``parse``
        raises ``Again`` (or the call one of ``retry_on``) within ``budget`` (default:
        ``patience``); past it, the last ``Again``'s ``error`` (or ``retry_on``'s)."""
        try:
            return retry(
                lambda: parse(self.run(request)),
                budget=self.patience if budget is None else budget,
                retry_on=(Again, *retry_on),
                pause=1.0,
                backoff=2.0,
                max_pause=8.0,
                what=_name(request),
            )
        except Again as again:
            if not self._busy_noted:
                self._busy_noted = True
                log.warning("%s is busy or restarting: %s", self.where, again)
            raise again.error from None

    def ask_each(
        self,
        build: Callable[[Sequence[str]], Request],
        ids: Sequence[str],
        parse: Callable[[Any, Sequence[str]], Mapping[str, T]],
        *,
        size: int = CHUNK,
        budget: Optional[float] = None,
        retry_on: Tuple[Type[BaseException], ...] = (),
    ) -> Dict[str, T]:
        """One ``ask`` per chunk of ``size`` ids (deduplicated, in order): ``build(chunk)``
        the request, ``parse(answer, chunk)`` its answers by id; all merged."""
        unique = list(dict.fromkeys(ids))
        found: Dict[str, T] = {}
        for start in range(0, len(unique), size):
            chunk = unique[start : start + size]
            found.update(
                self.ask(
                    build(chunk),
                    lambda answer, chunk=chunk: parse(answer, chunk),  # type: ignore[misc]
                    budget=budget,
                    retry_on=retry_on,
                )
            )
        return found

    def send(
        self,
        request: Request,
        parse: Callable[[Any], T],
        *,
        budget: Optional[float] = None,
        what: str = "",
    ) -> T:
        """A request that makes something (a submission): never repeated by the transport;
        a command past its timeout is ``SubmissionUncertainError`` (it may have gone in);
        sent again every 2 s within ``budget`` (default: the timeout, else 60 s, from the
        first miss) only while ``parse`` says ``Again`` (it never reached the scheduler).
        ``what``: its name in the log (default: the command's, or the call's)."""

        def once() -> T:
            try:
                answer = self.run(request, idempotent=False)
            except JobTimeoutError as exc:
                raise SubmissionUncertainError(
                    f"{name} did not answer in time: {exc}",
                    argv=_argv(request),
                ) from exc
            try:
                return parse(answer)
            except Again as again:
                log.info("%s did not reach %s (%s); sending it again", name, self.where, again)
                raise

        name = what or _name(request)
        try:
            return once()
        except Again:
            pass  # the budget runs from this first miss: one attempt may itself be long
        try:
            return retry(
                once,
                budget=budget if budget is not None else (self.timeout or 60.0),
                retry_on=(Again,),
                pause=2.0,
                what=f"{name} (never reached {self.where})",
            )
        except Again as again:
            raise again.error from None

    def submit(
        self,
        request: Request,
        parse: Callable[[Any], str],
        *,
        key: str,
        find: Callable[[Collection[str]], Mapping[str, str]],
        settle: Union[float, Callable[[], float]],
        look_for: str = "",
    ) -> str:
        """``send(request, parse)``'s job id; where its answer was lost, the job carrying
        ``key`` (``find(keys)``: key -> id of those some job carries), or - surely
        absent for ``settle`` seconds (or ``settle()``, asked only then) - the request
        sent once more (``adoption.adopt``)."""
        try:
            return self.send(request, parse)
        except SubmissionUncertainError as lost:
            if not key:
                raise
            log.warning(
                "the submission's answer was lost (%s); looking for it by key %s", lost, key
            )
        resent: List[str] = []
        found = adoption.adopt(
            [key],
            find,
            resend=lambda _missing: resent.append(self.send(request, parse)),
            budget=self.adoption_budget,
            settle=settle() if callable(settle) else settle,
            where=self.where,
            look_for=look_for,
        )
        return found[key] if key in found else resent[0]

    def send_keyed(
        self,
        what: str,
        send: Callable[[B], List[Outcome]],
        batch: B,
        keys: Sequence[str],
        parse: Callable[[List[Outcome]], List[Outcome]],
        *,
        keyed: Keyed,
        budget: Optional[float] = None,
    ) -> List[Outcome]:
        """Each job's outcome, in order, of ``send(batch)`` (``keys``: each job's), sent again
        within ``budget`` while ``parse`` says ``Again`` (none reached the scheduler,
        ``send``).  Where answers were lost - the whole call's (``SubmissionUncertainError``)
        or some jobs' (``keyed.lost``) - those jobs are looked for by key; the ones surely
        absent are sent once more (``_adopted``)."""

        def attempt() -> List[Outcome]:
            started = time.time()
            try:
                outcomes = send(batch)
            except SubmissionUncertainError as lost:
                if not keys:
                    raise
                log.warning("%s: the answer was lost (%s); looking for its jobs by key", what, lost)
                return self._adopted(send, batch, keys, list(range(len(keys))), started, keyed)
            lost_ones = [i for i, (ok, text) in enumerate(outcomes) if not ok and keyed.lost(text)]
            if lost_ones and keys:
                log.warning("%s: the answers of %d job(s) were lost; looking", what, len(lost_ones))
                outcomes = list(outcomes)
                adopted = self._adopted(send, batch, keys, lost_ones, started, keyed)
                for index, outcome in zip(lost_ones, adopted):
                    outcomes[index] = outcome
            return outcomes

        return self.send(attempt, parse, budget=budget, what=what)

    def _adopted(
        self,
        send: Callable[[B], List[Outcome]],
        batch: B,
        keys: Sequence[str],
        indices: List[int],
        started: float,
        keyed: Keyed,
    ) -> List[Outcome]:
        """The outcomes of the jobs at ``indices``, whose answers were lost: each the job found
        carrying its key, else what sending it again gave, else ``keyed.unknown`` (the
        scheduler could not tell in time: never sent twice)."""
        lost = [keys[index] for index in indices]
        resent: Dict[str, Outcome] = {}

        def resend(missing: List[str]) -> None:
            picked = [indices[lost.index(key)] for key in missing]
            resent.update(zip(missing, send(keyed.only(batch, picked))))

        found = keyed.look_up(lost, started, resend)
        return [
            (True, found[key]) if key in found else resent.get(key) or keyed.unknown(key)
            for key in lost
        ]

    def look_up(
        self,
        keys: Sequence[str],
        find: Callable[[Collection[str]], Mapping[str, str]],
        *,
        settle: float,
        resend: Optional[Callable[[List[str]], None]] = None,
        look_for: str = "",
    ) -> Dict[str, str]:
        """key -> job id of the jobs a lost submission of ``keys`` made (``adoption.adopt``,
        within the runner's adoption budget); ``resend(missing)`` sends the rest once they
        are surely absent, when given."""
        return adoption.adopt(
            keys,
            find,
            resend=resend,
            budget=self.adoption_budget,
            settle=settle,
            where=self.where,
            look_for=look_for,
        )


def _argv(request: Request) -> Optional[List[str]]:
    """The command line a request runs; ``None`` for a call into the bindings."""
    if isinstance(request, Command):
        return list(request.argv)
    return None if callable(request) else list(request)


def _name(request: Request) -> str:
    """What a request is called in the log: the command's name, or the call's."""
    if isinstance(request, Call):
        return request.what
    if callable(request):
        return getattr(request, "__qualname__", None) or type(request).__name__
    argv = _argv(request)
    return str(argv[0]) if argv else "command"
