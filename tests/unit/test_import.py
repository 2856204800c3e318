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


def test_importing_an_adapter_class_loads_no_store_or_transport():
    # the store, the transports and the drivers load when an adapter is made or opened
    for statement in (
        "from hpcbridge.schedulers.slurm.adapter import RealSlurmAdapter",
        "from hpcbridge.schedulers.flux.adapter import FluxAdapter",
    ):
        code = (
            f"import sys; {statement}; "
            "loaded = sorted(m for m in sys.modules if m.startswith('hpcbridge')); "
            "heavy = [m for m in loaded if m.startswith(('hpcbridge.store', "
            "'hpcbridge.transports', 'hpcbridge.engine.driver', 'hpcbridge.settings.config'))]; "
            "assert not heavy, heavy; assert len(loaded) <= 25, loaded"
        )
        subprocess.run([sys.executable, "-c", code], check=True)
