"""A Flux refusal for a cap on active jobs (flux-accounting's ``max_active_jobs``: "user
has max active jobs") is a ``LimitRefusedError`` - whole, or as the rest of a partial
submission (``limited``) - which a sweep holds back instead of failing; any other
refusal stays a plain ``JobSubmissionError``."""

from __future__ import annotations

import pytest

from hpcbridge.engine.driver import PartialSubmissionError
from hpcbridge.errors import JobSubmissionError, LimitRefusedError
from hpcbridge.schedulers.flux.planning import submitted

REFUSED = "flux-job: user has max active jobs"


def _send(outcomes: list) -> list:
    return submitted(outcomes, "/o/flux-{{id}}.out", "plain", "flux.job.submit")


def test_all_refused_for_the_cap_is_a_limit_refusal() -> None:
    with pytest.raises(LimitRefusedError, match="max active jobs"):
        _send([(False, REFUSED), (False, REFUSED)])


def test_the_rest_refused_for_the_cap_is_a_limited_partial_submission() -> None:
    with pytest.raises(PartialSubmissionError) as caught:
        _send([(True, "1234567"), (False, REFUSED)])
    assert caught.value.limited and len(caught.value.submitted) == 1


def test_another_refusal_is_no_limit() -> None:
    with pytest.raises(JobSubmissionError) as caught:
        _send([(False, "flux-job: unsatisfiable request")])
    assert not isinstance(caught.value, LimitRefusedError)
    with pytest.raises(PartialSubmissionError) as partial:
        _send([(True, "1234567"), (False, "flux-job: unsatisfiable request")])
    assert not partial.value.limited
