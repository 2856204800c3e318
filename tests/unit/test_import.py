import subprocess
import sys


def test_import_is_light():
    code = (
        "import sys, hpcbridge; hpcbridge.MockAdapter; hpcbridge.get_scheduler_adapter; "
        "bad = {'paramiko', 'flux', 'pyslurm'} & set(sys.modules); assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_names():
    import hpcbridge

    for name in hpcbridge.__all__:
        assert getattr(hpcbridge, name) is not None, name
    assert hpcbridge.SlurmAdapterError is hpcbridge.SchedulerAdapterError
    for error in (
        hpcbridge.JobSubmissionError,
        hpcbridge.JobNotFoundError,
        hpcbridge.JobTimeoutError,
        hpcbridge.TransportError,
        hpcbridge.ResourceError,
    ):
        assert issubclass(error, hpcbridge.SchedulerAdapterError)
    assert issubclass(hpcbridge.ResourceError, ValueError)
