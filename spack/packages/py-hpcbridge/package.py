# hpcbridge's Spack recipe, written to spack-packages' conventions (a copy there takes its
# copyright header). tests/unit/test_packaging_consistency.py keeps it in step with
# pyproject.toml; docs/guides/spack-environment.md says which Spack releases it was tried on.

from spack.package import *  # noqa: F403 (PythonPackage on Spack 0.x and 1.x alike)
from spack.package import depends_on, license, maintainers, variant, version


class PyHpcbridge(PythonPackage):  # noqa: F405
    """Submit a batch script to Slurm or Flux (or run it locally) and follow it to the
    end, locally or over SSH, with one API and one command (hpcbridge).

    Slurm and Flux are system prerequisites: hpcbridge runs the sbatch/squeue/sacct and
    flux commands it finds on PATH, so declare the site's Slurm and flux-core as externals
    rather than building them. +flux adds flux-core for its Python bindings, which
    hpcbridge uses when they import. The Prefect and MLflow integrations are not variants:
    install them with pip (pip install prefect mlflow).
    """

    homepage = "https://pypi.org/project/hpcbridge/"
    pypi = "hpcbridge/hpcbridge-0.1.0.tar.gz"
    git = "https://github.com/hpcbridge/hpcbridge.git"

    maintainers("hpcbridge")

    license("MIT")

    version("main", branch="main")
    version("0.1.0", sha256="0d3a6b8da530502397b436921237b90e58924ec93323196b45b90bd9b980ad02")

    variant("ssh", default=False, description="SSH transport to a login node (paramiko)")
    variant("flux", default=False, description="Flux's Python bindings (from flux-core)")

    depends_on("python@3.9:", type=("build", "run"))
    depends_on("py-setuptools@61:", type="build")
    depends_on("py-packaging@20:", type=("build", "run"))

    depends_on("py-paramiko@3.0:", type=("build", "run"), when="+ssh")
    # The bindings are compiled for the Python flux-core was built with; needed at build
    # time too so that the import check after the install can see them.
    depends_on("flux-core", type=("build", "run"), when="+flux")

    import_modules = ["hpcbridge"]
