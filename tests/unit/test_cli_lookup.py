"""An id the scheduler cannot trace: exit 4 when it has no trace, 7 when it could not be asked."""

from hpcbridge import JobNotFoundError, JobState, JobStatus, SchedulerUnavailableError
from hpcbridge.cli.exits import EXIT_NOT_FOUND, EXIT_UNAVAILABLE, exit_code_for
from hpcbridge.engine.observation import Observation, out_of_reach
from hpcbridge.routing.unrecorded import not_found_error


def test_no_trace_is_not_found() -> None:
    statuses = {
        "999": Observation(JobStatus("999", JobState.UNKNOWN, reason="not in squeue or sacct"))
    }
    error = not_found_error("slurm", ["999"], statuses)
    assert isinstance(error, JobNotFoundError)
    assert exit_code_for(error) == EXIT_NOT_FOUND
    assert "not in squeue or sacct" in str(error) and "hpcbridge jobs" in str(error)


def test_a_scheduler_that_could_not_be_asked_is_unavailable_not_not_found() -> None:
    statuses = {"999": out_of_reach("999", "squeue failed: Unable to contact slurm controller")}
    error = not_found_error("slurm", ["999"], statuses)
    assert isinstance(error, SchedulerUnavailableError)
    assert exit_code_for(error) == EXIT_UNAVAILABLE
    assert "Unable to contact slurm controller" in str(error) and "doctor" in str(error)
