"""The job manager's journal read with libflux's own calls (``journal_stream``), on a
real broker of the newest release with a journal (flux-core 0.68 and later): the
backlog of the active jobs, its end, then live events, only those asked for; a
signal acted on while it waits; the stream ended by its cancel."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from hpcbridge.schedulers.flux.ids import parse_job_id
from hpcbridge.schedulers.flux.journal import JournalStream
from hpcbridge.schedulers.flux.journal_events import BACKLOG_END_ID, EVENTS
from tests.support.flux import FluxInstance, release_of
from tests.support.flux_cases import native_bindings_or_skip, require_flux, start_instance

pytestmark = pytest.mark.flux


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Any, FluxInstance]]:
    flux = require_flux()
    if release_of(flux) < (0, 68):
        pytest.skip(f"{flux} has no job-manager journal (flux-core 0.68 and later)")
    module = native_bindings_or_skip(flux)
    instance = start_instance(Path(tmp_path_factory.mktemp("journal")), cores=4, flux=flux)
    try:
        yield module, instance
    finally:
        instance.stop()


def responses_until(stream: JournalStream, done: Any, timeout: float = 60) -> List[Dict]:
    """Every response until ``done(response)``."""
    taken: List[Dict] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = stream.next(deadline - time.monotonic())
        if response is not None:
            taken.append(response)
            if done(response):
                return taken
    raise AssertionError(f"not seen within {timeout} s: {taken}")


def submit(instance: FluxInstance, *command: str) -> int:
    words = instance.submit_words("submit")
    return int(parse_job_id(instance.check([*words, *command]).strip()))


def test_the_backlog_its_end_then_live_events_only_those_asked_for(
    broker: Tuple[Any, FluxInstance],
) -> None:
    module, instance = broker
    active = submit(instance, "sleep", "300")
    stream = JournalStream(module, module.Flux(instance.uri), EVENTS)
    try:
        backlog = responses_until(stream, lambda r: r["id"] == BACKLOG_END_ID)
        assert backlog[-1] == {"id": BACKLOG_END_ID, "events": []}
        ours = [r for r in backlog if r["id"] == active]
        assert ours and ours[0]["events"][0]["name"] == "submit"  # the job's events so far
        later = submit(instance, "true")
        live = responses_until(
            stream, lambda r: r["id"] == later and r["events"][0]["name"] == "clean"
        )
        names = [r["events"][0]["name"] for r in live if r["id"] == later]
        assert all(len(r["events"]) == 1 for r in live)  # live: one event a response
        assert names[0] == "submit" and names[-1] == "clean" and "finish" in names
        assert set(names) <= set(EVENTS)  # no validate, depend, priority, start, free
        status = [r["events"][0] for r in live if r["events"][0]["name"] == "finish"]
        assert status[0]["context"]["status"] == 0
    finally:
        instance.run(["cancel", str(active)])
        stream.close()


class Interrupted(Exception):
    """What the test's signal handler raises."""


def test_a_signal_is_acted_on_while_it_waits(broker: Tuple[Any, FluxInstance]) -> None:
    """A C wait does not return for a signal: its handler (Python's, as for Ctrl-C) runs
    between two slices.  SIGUSR1 with a handler of the test's own: SIGINT's disposition
    in a process is not the test's to rely on (libev resets it when a flux reactor's
    SIGINT watcher stops, and a shell's background job ignores it)."""
    module, instance = broker
    stream = JournalStream(module, module.Flux(instance.uri), EVENTS)
    responses_until(stream, lambda r: r["id"] == BACKLOG_END_ID)
    while stream.next(0.5) is not None:  # what earlier cases' jobs still send
        pass

    def interrupt(*_args: Any) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGUSR1, interrupt)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGUSR1))
    started = time.monotonic()
    try:
        timer.start()
        with pytest.raises(Interrupted):
            stream.next(60.0)  # nothing comes: only the signal ends this
        assert time.monotonic() - started < 30  # not the whole minute
    finally:
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGUSR1, previous)
        stream.close()


def test_the_stream_ends_once_cancelled(broker: Tuple[Any, FluxInstance]) -> None:
    module, instance = broker
    stream = JournalStream(module, module.Flux(instance.uri), EVENTS)
    responses_until(stream, lambda r: r["id"] == BACKLOG_END_ID)
    stream.close()
    with pytest.raises(EOFError):
        while stream.next(10.0) is not None:
            pass
