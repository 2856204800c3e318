"""``slurm:ID`` resolved on the job's first node, where rank 0's broker runs: Flux's own Slurm
resolver before 0.80 runs its ``srun`` on whichever node of the job Slurm takes next, and a
broker of rank > 0 has no child to read ``FLUX_URI`` from (flux-core #7178).  The commands
against a scripted executor; the real case is ``test_slurm_nodes`` (0.49 and 0.88)."""

from __future__ import annotations

from typing import List

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcbridge.errors import SchedulerUnavailableError
from hpcbridge.schedulers.flux.command_runner import FluxCommands
from hpcbridge.schedulers.flux.instance import POLICY_0_49
from hpcbridge.schedulers.flux.instance_answers import first_slurm_node
from hpcbridge.transports.base import CommandResult
from tests.support.scripted import Scripted

URI = "ssh://n3/tmp/flux-x/local-0"


def resolve(executor: Scripted, timeout: float = 5.0) -> str:
    return FluxCommands(executor, "/opt/flux/bin/flux").resolve_uri(
        "slurm:42", POLICY_0_49, timeout
    )


@pytest.mark.parametrize(
    ("hostlist", "first"),
    [
        ("n[3-4]\n", "n3"),
        ("node[003-005,7],gpu1", "node003"),
        ("gpu1,gpu2", "gpu1"),
        ("rack[2-3]-n[05-06]", "rack2-n05"),
        ("vm", "vm"),
        ("", None),
        ("  \n", None),
    ],
)
def test_the_first_node_of_a_hostlist(hostlist: str, first: str) -> None:
    assert first_slurm_node(hostlist) == first


@given(
    prefix=st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True),
    start=st.integers(0, 999),
    width=st.integers(1, 4),
    more=st.integers(0, 20),
)
def test_a_range_gives_its_first_number_zeros_kept(
    prefix: str, start: int, width: int, more: int
) -> None:
    low = str(start).zfill(width)
    high = str(start + more).zfill(width)
    assert first_slurm_node(f"{prefix}[{low}-{high}],other9") == f"{prefix}{low}"


def test_the_step_runs_on_the_first_node_without_the_callers_flux_uri() -> None:
    def answer(argv: List[str]) -> CommandResult:
        if argv[0] == "squeue":
            return CommandResult(argv, 0, "n[3-4]\n", "")
        return CommandResult(argv, 0, URI + "\n", "")

    executor = Scripted(answer)
    assert resolve(executor) == URI
    assert executor.calls == [
        ["squeue", "--noheader", "--format=%N", "--jobs=42"],
        ["env", "-u", "FLUX_URI", "srun", "--overlap", "--jobid=42", "--nodes=1", "--ntasks=1",
         "--nodelist=n3", "/opt/flux/bin/flux", "uri", "slurm:42"],
    ]  # fmt: skip


def test_a_pending_job_is_waited_for_until_it_has_nodes() -> None:
    listings = iter(["", "", "n[1-2]"])

    def answer(argv: List[str]) -> CommandResult:
        if argv[0] == "squeue":
            return CommandResult(argv, 0, next(listings), "")
        return CommandResult(argv, 0, URI + "\n", "")

    executor = Scripted(answer)
    assert resolve(executor) == URI
    assert [call[0] for call in executor.calls] == ["squeue", "squeue", "squeue", "env"]
    assert "--nodelist=n1" in executor.calls[-1]


def test_a_job_still_pending_at_the_end_of_the_budget_is_not_resolved() -> None:
    executor = Scripted(lambda argv: CommandResult(argv, 0, "", ""))
    with pytest.raises(LookupError, match="empty nodelist for Slurm job 42"):
        resolve(executor, timeout=1.0)
    assert {call[0] for call in executor.calls} == {"squeue"}  # no step in a pending job


def test_an_unknown_job_is_not_asked_again() -> None:
    said = "slurm_load_jobs error: Invalid job id specified"
    executor = Scripted(lambda argv: CommandResult(argv, 1, "", said))
    with pytest.raises(LookupError, match="Invalid job id"):
        resolve(executor)
    assert len(executor.calls) == 1


def test_missing_slurm_commands_say_so() -> None:
    executor = Scripted(lambda argv: CommandResult(argv, 127, "", "squeue: not found"))
    missing = r"squeue and srun \(for slurm:ID\) not found where commands run"
    with pytest.raises(SchedulerUnavailableError, match=missing):
        resolve(executor)
