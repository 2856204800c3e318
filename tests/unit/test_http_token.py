"""``transports.token``: a JWT's expiry read from its payload, renewed by a command before
it ends and once on a refusal, and never shown in a log or an error."""

from __future__ import annotations

import base64
import json
import logging
from typing import Dict, List, Optional, Sequence

import pytest

from hpcbridge.errors import ConfigurationError
from hpcbridge.transports.base import CommandResult
from hpcbridge.transports.local import LocalExecutor
from hpcbridge.transports.token import (
    Token,
    TokenNames,
    command_token,
    expiry,
    jwt_claims,
    renewal_margin,
    token_from_output,
)

NAMES = TokenNames("X-TOKEN", "TEST_JWT", "TEST_TOKEN_COMMAND")


def jwt(**claims: object) -> str:
    """A JWT of ``claims`` (unsigned: the client never checks a signature)."""

    def part(value: Dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(dict(claims))}.c2lnbmF0dXJl"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Maker:
    """Makes a token of ``life`` seconds at the clock's time, and counts."""

    def __init__(self, clock: Clock, life: float = 60.0) -> None:
        self.clock, self.life = clock, life
        self.made: List[str] = []

    def __call__(self) -> str:
        made = jwt(iat=int(self.clock.now), exp=int(self.clock.now + self.life), n=len(self.made))
        self.made.append(made)
        return made


def test_the_expiry_comes_from_the_payload() -> None:
    token = jwt(exp=1_900_000_000, iat=1_899_996_400, sun="hpcbtest")
    assert jwt_claims(token)["sun"] == "hpcbtest"
    assert expiry(token) == 1_900_000_000.0
    for not_one in ("opaque-token", "a.b", "a.%%%.c", jwt(sun="x"), jwt(exp="soon")):
        assert expiry(not_one) is None


def test_the_margin_is_a_fifth_of_the_life_or_a_minute_never_over_half() -> None:
    assert renewal_margin(3600) == 720  # an hour's token: made again at 48 minutes
    assert renewal_margin(200) == 60
    assert renewal_margin(60) == 30  # a minute's token: at half its life


def test_what_a_command_prints() -> None:
    assert token_from_output("SLURM_JWT=abc.def.ghi\n") == "abc.def.ghi"
    assert token_from_output("notice: something\nabc.def.ghi\n") == "abc.def.ghi"
    assert token_from_output("\n  \n") == ""


def test_renewed_before_it_expires_and_once_on_a_refusal() -> None:
    clock = Clock(1000.0)
    maker = Maker(clock)
    token = Token("X-TOKEN", None, maker, clock=clock)
    first = token.value()
    assert maker.made == [first] and token.remaining() == 60
    clock.now += 29  # 31 s of 60 left: more than half
    assert token.value() == first
    clock.now += 2  # 29 s left: made again
    second = token.value()
    assert second != first and maker.made == [first, second]
    assert token.refused("http://server", 511) == maker.made[-1] != second
    assert len(maker.made) == 3


def test_a_given_token_without_a_command_ends_with_a_clear_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock(1000.0)
    given = jwt(iat=1000, exp=1060)
    token = Token(
        "X-TOKEN", given, None, given_from="TEST_JWT", setting="TEST_TOKEN_COMMAND", clock=clock
    )
    caplog.set_level(logging.DEBUG)
    assert token.value() == given
    clock.now = 1040
    assert token.value() == given  # 20 s left: still sent, with a warning
    assert "TEST_TOKEN_COMMAND" in caplog.text
    clock.now = 1065
    with pytest.raises(ConfigurationError, match="TEST_JWT expired 5 s ago: set TEST_TOKEN_COMM"):
        token.value()
    with pytest.raises(ConfigurationError, match=r"the token from TEST_JWT \(511\): set TEST_JWT"):
        token.refused("http://server", 511)
    assert given not in caplog.text


def test_a_failed_renewal_keeps_the_token_until_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock(1000.0)
    maker = Maker(clock)
    failing = [False]

    def make() -> str:
        if failing[0]:
            raise ConfigurationError("the command failed")
        return maker()

    token = Token("X-TOKEN", None, make, clock=clock)
    first = token.value()
    failing[0] = True
    clock.now += 45  # due, and the command fails: the old token is still good
    with caplog.at_level(logging.WARNING):
        assert token.value() == first
    assert "could not renew" in caplog.text and (first or "") not in caplog.text
    clock.now += 20  # expired, and still no new one
    with pytest.raises(ConfigurationError, match="the command failed"):
        token.value()


class Scripted(LocalExecutor):
    """Answers each argv with ``answer``; remembers what it ran and with what."""

    def __init__(self, answer: CommandResult) -> None:
        super().__init__()
        self.answer = answer
        self.ran: List[Sequence[str]] = []
        self.envs: List[Optional[Dict[str, str]]] = []

    def run(self, argv, timeout=None, env=None, cwd=None, input=None, idempotent=True):  # type: ignore[no-untyped-def]
        self.ran.append(list(argv))
        self.envs.append(dict(env) if env else None)
        return self.answer


def test_a_command_runs_as_an_argv_with_the_commands_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("TEST_JWT", raising=False)
    made = jwt(exp=9_999_999_999)
    executor = Scripted(CommandResult([], 0, f"TEST_JWT={made}\n", ""))
    command = "scontrol token 'lifespan=60' ; rm -rf /"
    token = command_token(NAMES, command, executor, {"SLURM_CONF": "/x/slurm.conf"}, 30.0)
    assert token.held is False and token.renewable  # nothing run before it is needed
    assert executor.ran == []
    with caplog.at_level(logging.DEBUG):
        assert token.value() == made
    # words, no shell; without the variable the old token came from
    typed = ["scontrol", "token", "lifespan=60", ";", "rm", "-rf", "/"]
    assert executor.ran == [["env", "-u", "TEST_JWT", *typed]]
    assert executor.envs == [{"SLURM_CONF": "/x/slurm.conf"}]
    assert made not in caplog.text
    monkeypatch.setenv("TEST_JWT", made)
    given = command_token(NAMES, None, executor, None)
    assert given.value() == made and not given.renewable and len(executor.ran) == 1


def test_a_failing_command_says_so_without_its_output() -> None:
    secret = jwt(exp=9_999_999_999)
    failed = Scripted(CommandResult([], 1, f"TEST_JWT={secret}", "scontrol: Invalid user\n"))
    with pytest.raises(ConfigurationError) as caught:
        command_token(NAMES, "scontrol token", failed).value()
    message = str(caught.value)
    assert "TEST_TOKEN_COMMAND (scontrol token) failed (exit 1): scontrol: Invalid user" in message
    assert secret not in message
    silent = Scripted(CommandResult([], 0, "\n", ""))
    with pytest.raises(ConfigurationError, match=r"\(scontrol token\) printed no token"):
        command_token(NAMES, "scontrol token", silent).value()
    for bad in ("", "scontrol 'token"):
        with pytest.raises(ConfigurationError, match="TEST_TOKEN_COMMAND"):
            command_token(NAMES, bad or " ", failed)


def test_no_token_at_all() -> None:
    token = Token("X-TOKEN", None, None, given_from="TEST_JWT", setting="TEST_TOKEN_COMMAND")
    assert token.value() is None and token.remaining() is None and not token.held
    with pytest.raises(ConfigurationError, match=r"http://server asks for a token \(401\): set"):
        token.refused("http://server")


def test_the_makers_clock_counts_not_ours() -> None:
    """A login node 10 minutes behind this machine makes tokens that look expired here:
    their life counts from their own ``iat``."""
    cluster, here = Clock(1000.0), Clock(1600.0)
    maker = Maker(cluster, life=300)
    token = Token("X-TOKEN", None, maker, clock=here)
    first = token.value()
    assert token.remaining() == 300 and len(maker.made) == 1
    cluster.now += 200
    here.now += 200
    assert token.value() == first  # 100 s left of 300: not yet due (margin 60 s)
    cluster.now += 50
    here.now += 50
    assert token.value() != first and len(maker.made) == 2
