"""What ``FluxCommands`` asks an instance once and remembers: the bare dry run every
native option is compared with, and the login its accounting rows are asked for."""

from __future__ import annotations

import json
from typing import List, Optional

from hpcbridge.schedulers.flux.command_runner import ASSOCIATIONS_TTL, FluxCommands
from hpcbridge.schedulers.flux.instance import POLICY_0_88
from hpcbridge.transports.base import CommandResult
from tests.support.fake_flux import DATA, FakeFlux


def dry_run(argv: List[str], _input: Optional[str]) -> CommandResult:
    """A jobspec whose attributes hold each ``--setattr=K=V`` given."""
    attributes = {"system": {"duration": 0}}
    for word in argv:
        if word.startswith("--setattr="):
            key, _, value = word[len("--setattr=") :].partition("=")
            attributes["system"][key] = value
    return CommandResult(argv, 0, json.dumps({"version": 1, "attributes": attributes}), "")


def dry_runs(flux: FakeFlux) -> List[List[str]]:
    return [argv for argv in flux.calls if "--dry-run" in argv]


def test_the_bare_dry_run_is_asked_once_per_kind() -> None:
    flux = FakeFlux()
    flux.handlers["submit"] = flux.handlers["batch"] = dry_run
    commands = FluxCommands(flux)
    assert commands.native_attributes(POLICY_0_88, False, ["--setattr=a=1"]) == (("system.a", "1"),)
    commands.native_attributes(POLICY_0_88, False, ["--setattr=b=2", "--setattr=a=1"])
    # bare once, a once, b once: a remembered option is not built again
    assert len(dry_runs(flux)) == 3
    commands.native_attributes(POLICY_0_88, True, ["--setattr=a=1"])
    assert len(dry_runs(flux)) == 5  # a batch job's bare dry run is its own


def test_the_login_is_read_once_and_rows_are_asked_again_after_their_ttl(
    monkeypatch,
) -> None:
    flux = FakeFlux()
    rows = (DATA / "account_view_user_0.88.txt").read_text()
    flux.handlers["account"] = lambda argv, _input: CommandResult(argv, 0, rows, "")
    flux.handlers["-un"] = lambda argv, _input: CommandResult(argv, 0, "alice\n", "")  # id -un
    commands = FluxCommands(flux)
    now = [1000.0]
    monkeypatch.setattr("hpcbridge.schedulers.flux.command_runner.time.monotonic", lambda: now[0])
    first = commands.associations()
    assert first and commands.associations() == first
    now[0] += ASSOCIATIONS_TTL + 1
    assert commands.associations() == first
    asked = [argv for argv in flux.calls if argv[1:2] == ["account"]]
    logins = [argv for argv in flux.calls if argv[0] == "id"]
    assert len(asked) == 2 and len(logins) == 1
    assert asked[0][-1] == asked[1][-1] == "alice"


def test_without_a_login_accounting_is_not_asked(monkeypatch) -> None:
    flux = FakeFlux()
    original = flux.run

    def run(argv, *args, **kwargs):  # type: ignore[no-untyped-def]
        if argv[0] == "id":
            return CommandResult(list(argv), 1, "", "id: cannot find name for user ID 4242")
        return original(argv, *args, **kwargs)

    monkeypatch.setattr(flux, "run", run)
    assert FluxCommands(flux).associations() is None
    assert not [argv for argv in flux.calls if argv[1:2] == ["account"]]
