"""``Token``: a bearer token for ``HttpClient``, given (an environment variable's value)
or made by a command, and made again before it expires.  Knows nothing about jobs or a
scheduler: the driver names the variable, the setting and the header.

A JWT's expiry is read from its payload (``exp``, base64url JSON; the signature is the
server's business); it is renewed when less than ``renewal_margin`` of its life is left,
and once more when the server refuses it (401).  No token's text ever goes into a log
or an error."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import shlex
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence, Tuple

from ..errors import ConfigurationError, SchedulerAdapterError
from .base import Executor

__all__ = [
    "Token",
    "TokenNames",
    "command_token",
    "jwt_claims",
    "renewal_margin",
    "token_from_output",
]

log = logging.getLogger(__name__)

#: the least and the share of a token's life left when it is made again
MARGIN_SECONDS = 60.0
MARGIN_SHARE = 0.2


@dataclass(frozen=True)
class TokenNames:
    """What a server's token is called: the ``header`` it is sent in, the environment
    ``variable`` that may give one, the ``setting`` naming the command that makes one."""

    header: str
    variable: str
    setting: str
    #: the HTTP statuses that say the server refused the token (the credentials)
    refused: Tuple[int, ...] = (401,)


def jwt_claims(token: str) -> Mapping[str, object]:
    """The payload of a JWT (``header.payload.signature``); empty when it is none."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except (ValueError, binascii.Error):
        return {}
    return claims if isinstance(claims, dict) else {}


def expiry(token: str) -> Optional[float]:
    """The epoch second a JWT expires at (its ``exp``); ``None`` when it says none."""
    exp = jwt_claims(token).get("exp")
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None


def renewal_margin(life: float) -> float:
    """Seconds before its expiry a token of ``life`` seconds is made again: 20% of its
    life or a minute, whichever is more, but never more than half its life."""
    return min(max(MARGIN_SHARE * life, MARGIN_SECONDS), life / 2)


def token_from_output(text: str) -> str:
    """The token a command printed: its last line, ``NAME=token`` (as ``scontrol token``
    prints ``SLURM_JWT=...``) or the token alone; empty when it printed nothing."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    name, equals, value = lines[-1].partition("=")
    return value.strip() if equals and name.isidentifier() else lines[-1]


class Token:
    """The token ``HttpClient`` sends as ``header``: ``given`` (the value of the variable
    ``given_from``) until it expires, or made by ``make`` (the command of ``setting``);
    ``None`` of both: no token (the server may not ask for one)."""

    def __init__(
        self,
        header: str,
        given: Optional[str],
        make: Optional[Callable[[], str]] = None,
        *,
        given_from: str = "the token's variable",
        setting: str = "the token command",
        clock: Callable[[], float] = time.time,
        refused: Tuple[int, ...] = (401,),
    ) -> None:
        self.header, self.given_from, self.setting = header, given_from, setting
        #: the HTTP statuses that say the server refused the token
        self.refused_statuses = refused
        self._make, self._clock = make, clock
        self._value = given or None
        self._made_at = clock()
        #: seconds the token maker's clock is ahead of ours (its ``iat`` at our making)
        self._skew = 0.0
        self._lock = threading.Lock()
        self._warned = False

    @property
    def renewable(self) -> bool:
        return self._make is not None

    @property
    def held(self) -> bool:
        """Whether there is a token now (given, or made already)."""
        return self._value is not None

    def remaining(self) -> Optional[float]:
        """Seconds the current token has left (negative: expired); ``None`` when there is
        no token or it says no expiry."""
        expires = expiry(self._value) if self._value else None
        return None if expires is None else expires - self._clock() - self._skew

    def value(self) -> Optional[str]:
        """The token to send now: made (again) when there is none or it is due."""
        with self._lock:
            if self._value is None and self.renewable:
                self._renew("no token yet")
            elif self._due():
                self._renew_or_keep()
            return self._value

    def refused(self, where: str, status: int = 401) -> str:
        """The server at ``where`` refused the token (HTTP ``status``): a new token, or
        why there is none."""
        with self._lock:
            if not self.renewable:
                what = (
                    f"refused the token from {self.given_from}"
                    if self._value
                    else "asks for a token"
                )
                raise ConfigurationError(
                    f"{where} {what} ({status}): set {self.given_from} to a valid token, "
                    f"or {self.setting} to a command that prints one"
                )
            self._renew(f"refused ({status})")
            return self._value or ""

    def _issued(self) -> Optional[float]:
        iat = jwt_claims(self._value or "").get("iat")
        return float(iat) if isinstance(iat, (int, float)) and not isinstance(iat, bool) else None

    def _due(self) -> bool:
        expires, left = expiry(self._value or ""), self.remaining()
        if expires is None or left is None:
            return False
        made = self._issued() or self._made_at + self._skew
        return left < renewal_margin(max(expires - made, 0.0))

    def _renew_or_keep(self) -> None:
        left = self.remaining() or 0.0
        if not self.renewable:
            if left <= 0:
                raise ConfigurationError(
                    f"the token from {self.given_from} expired {-left:.0f} s ago: set "
                    f"{self.setting} to a command that prints one, so that a new one is "
                    "made before it expires"
                )
            if not self._warned:
                self._warned = True
                log.warning(
                    "the token from %s expires in %.0f s and nothing renews it: set %s",
                    self.given_from, left, self.setting,
                )  # fmt: skip
            return
        try:
            self._renew(f"{left:.0f} s left")
        except SchedulerAdapterError as exc:
            if left <= 0:
                raise
            log.warning("could not renew the token (%.0f s left; kept): %s", left, exc)

    def _renew(self, why: str) -> None:
        assert self._make is not None
        made = self._make()
        self._value, self._made_at = made, self._clock()
        issued = self._issued()  # a login node's clock may differ from this one's
        self._skew = 0.0 if issued is None else issued - self._made_at
        left = self.remaining()
        life = "no expiry" if left is None else f"{left:.0f} s of life"
        log.info("made a new token with %s (%s): %s", self.setting, why, life)


def command_token(
    names: TokenNames,
    command: Optional[str],
    executor: Executor,
    env: Optional[Mapping[str, str]] = None,
    timeout: float = 60.0,
) -> Token:
    """A ``Token`` from the variable ``names.variable``, made (again) by ``command`` (shell
    words, run as an argv through ``executor``: locally, or on the login node over SSH)."""
    argv = _command_argv(command, names.setting) if command else None

    def make() -> str:
        assert argv is not None
        # never with the old token in its environment: ``scontrol token`` authenticates
        # with a SLURM_JWT it finds there, and fails once that one is refused or expired
        unset = ["env", "-u", names.variable, *argv]
        return _made(executor, unset, shlex.join(argv), names.setting, env, timeout)

    given = os.environ.get(names.variable)
    made = make if argv else None
    return Token(
        names.header,
        given,
        made,
        given_from=names.variable,
        setting=names.setting,
        refused=names.refused,
    )


def _command_argv(command: str, setting: str) -> Sequence[str]:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ConfigurationError(f"{setting}={command!r}: {exc}") from None
    if not argv:
        raise ConfigurationError(f"{setting} is empty: name a command that prints a token")
    return argv


def _made(
    executor: Executor,
    argv: Sequence[str],
    shown: str,
    setting: str,
    env: Optional[Mapping[str, str]],
    timeout: float,
) -> str:
    where = "" if executor.is_local else f" on {executor.host}"
    reply = executor.run(argv, timeout=timeout, env=env)
    if not reply.ok:  # its stderr: the command's complaint (a token goes to stdout)
        raise ConfigurationError(
            f"{setting} ({shown}) failed{where} (exit {reply.returncode}): "
            f"{reply.stderr.strip()[:500]}; correct {setting} or run it by hand to see why"
        )
    token = token_from_output(reply.stdout)
    if not token:
        raise ConfigurationError(f"{setting} ({shown}) printed no token{where}")
    return token
