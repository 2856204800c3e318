"""The native driver when a submission's answer is lost (the connection failed after the
request went out, or the broker did not answer in time): found by its key, asked by
command (``tests.support.fake_flux``), or sent once more - with fake bindings."""

from __future__ import annotations

import errno
import json
import logging
from types import SimpleNamespace
from typing import Any, Dict, List, Optional

import pytest

from hpcbridge.engine import adoption
from hpcbridge.engine.driver import SubmitBatch
from hpcbridge.engine.jobscript import PreparedJob
from hpcbridge.resources import Resources
from hpcbridge.schedulers.flux import command_runner, planning
from hpcbridge.schedulers.flux.command_runner import FluxCommands
from hpcbridge.schedulers.flux.ids import parse_job_id
from hpcbridge.schedulers.flux.instance import POLICY_0_49
from hpcbridge.schedulers.flux.instance import facts as instance_facts
from hpcbridge.schedulers.flux.jobspec import KEY_ATTRIBUTE
from hpcbridge.schedulers.flux.native_driver import BindingsConnection, NativeDriver
from tests.support.fake_flux import FakeFlux


def no_native(*_: object) -> tuple:
    raise AssertionError("no native options in these batches")


NO_QUESTIONS = planning.Questions(None, no_native, lambda: None)


class Spec:
    """The bits of ``JobspecV1`` the builder touches; ``setattr`` names kept flat."""

    def __init__(self) -> None:
        self.attributes: Dict[str, Any] = {}
        self.environment: Dict[str, str] = {}

    @classmethod
    def from_batch_command(cls, *args: Any, **kwargs: Any) -> Spec:
        return cls()

    def setattr(self, name: str, value: Any) -> None:
        self.attributes[name] = value

    def dumps(self) -> str:
        return json.dumps(self.attributes)


class Future:
    def __init__(self, job_id: Optional[str], error: int = 0) -> None:
        self.job_id, self.error = job_id, error

    def wait_for(self, timeout: float) -> Future:
        if self.error == errno.ETIMEDOUT:
            raise TimeoutError(errno.ETIMEDOUT, "Connection timed out")
        return self

    def get_id(self) -> int:
        if self.error:
            raise OSError(self.error, "Connection reset by peer")
        return parse_job_id(self.job_id or "")

    def get(self) -> Dict[str, Any]:
        return {}


class Bindings:
    """``flux`` and ``flux.job`` whose submissions go into a ``FakeFlux``'s table.

    ``fates``: per submission, "ok", "lost" (it went in, the answer did not come
    back), "timeout" (the same, the broker silent) or "never" (it did not go in and
    the connection failed)."""

    def __init__(self, table: FakeFlux, fates: List[str]) -> None:
        self.table, self.fates = table, fates
        self.sent: List[Optional[str]] = []
        self.job = SimpleNamespace(JobspecV1=Spec, submit_async=self.submit_async)

    def Flux(self, uri: Optional[str] = None) -> Any:  # noqa: N802 - the bindings' name
        return SimpleNamespace(rpc=lambda topic, payload: Future(None), close=lambda: None)

    def submit_async(self, handle: Any, text: str) -> Future:
        key = json.loads(text).get(KEY_ATTRIBUTE)
        self.sent.append(key)
        fate = self.fates.pop(0) if self.fates else "ok"
        job_id = None if fate == "never" else self.table._new_job(key)
        error = {"ok": 0, "lost": errno.ECONNRESET, "never": errno.ECONNRESET}.get(fate)
        return Future(job_id, errno.ETIMEDOUT if error is None else error)


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adoption, "LOOK_EVERY", 0.01)
    monkeypatch.setattr(command_runner, "SETTLE", 0.2)
    monkeypatch.setattr(command_runner, "ADOPTION_BUDGET", 2.0)


def submit(count: int, fates: List[str]) -> tuple:
    table = FakeFlux()
    bindings = Bindings(table, fates)
    facts = instance_facts("local:///tmp/f/local-0", "0.88.0", POLICY_0_49, "test", None)
    connection = BindingsConnection(bindings, facts.uri, rpc_timeout=1.0)
    driver = NativeDriver(connection, facts, FluxCommands(table, uri=facts.uri))
    job = PreparedJob("9c1e", "/j", "/j/.hpcbridge/9c1e.sh", "/j/x.exit", ["/j/x.sh"], "train")
    batch = SubmitBatch(job, count, Resources.from_mapping({}), (), "/j/flux-{{id}}.out")
    submitted = driver.submit_many(planning.plan_batch(batch, facts, NO_QUESTIONS, 60.0))
    return [item.job_id for item in submitted], table, bindings


@pytest.mark.parametrize("fate", ["lost", "timeout"])
def test_a_lost_answer_is_found_by_its_key_and_adopted(
    fate: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        ids, table, bindings = submit(1, [fate])
    assert bindings.sent == ["9c1e"]  # never sent again
    assert table.with_key("9c1e") == ids and len(ids) == 1
    assert "adopted job " + ids[0] in caplog.text


def test_many_adopt_those_that_went_in_and_send_only_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="hpcbridge"):
        ids, table, bindings = submit(3, ["ok", "lost", "never"])
    assert bindings.sent == ["9c1e.0", "9c1e.1", "9c1e.2", "9c1e.2"]
    assert [table.with_key(f"9c1e.{index}") for index in range(3)] == [[job] for job in ids]
    assert "no job for 1 of its keys" in caplog.text
