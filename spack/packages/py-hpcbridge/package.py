# Spack recipe for hpcbridge (MIT licensed, like hpcbridge itself).
# ruff: noqa: F403, F405  (Spack recipes star-import their directives)
#
# Keep in step with pyproject.toml: tests/unit/test_packaging_consistency.py parses both
# files (without Spack) and fails when the version, the Python floor, the build backend, a
# runtime dependency or an optional extra differ.

import os

from spack.package import *

# This file lives at <checkout>/spack/packages/py-hpcbridge/package.py.
_CHECKOUT = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, os.pardir)
)


class PyHpcbridge(PythonPackage):
    """Submit a batch script to Slurm or Flux (or run it locally) and follow it to the
    end, locally or over SSH, with one API and one command (``hpcbridge``).

    Variants map to the extras of ``pip install hpcbridge[...]``:

    * ``+ssh``   -- the SSH transport (py-paramiko), for submitting from a laptop or a
      container to a cluster's login node.
    * ``+flux``  -- Spack's ``flux-core``, which installs Flux's Python bindings (the
      ``flux`` module) for the Python it was built with; hpcbridge then submits through
      ``flux.job.submit``. Without them hpcbridge drives the ``flux`` command line.
      On a cluster, declare the site's flux-core as an external (see spack/spack.yaml) and
      use the same Python it was built with, or the bindings will not import.
    * ``+slurm`` -- the site's Slurm commands (``sbatch``, ``squeue``, ``sacct``), which
      hpcbridge's Slurm driver runs. Spack's builtin repository has no pyslurm recipe, and
      pyslurm must match the site's Slurm release exactly, so it is not packaged here:
      hpcbridge uses pyslurm only when it imports, and otherwise the command line. Declare
      Slurm as an external (``spack external find slurm``) rather than building it.
    * ``+prefect`` -- Prefect tasks (``hpcbridge.integrations.prefect``); py-prefect 3
      needs Python 3.10 or newer.
    * ``+mlflow`` -- MLflow run tags (``hpcbridge.integrations.mlflow``). It asks for
      py-mlflow 2.10 or newer, as pip does; Spack's builtin recipe may lag behind (it
      offered 2.0.1 when this was written), in which case +mlflow does not concretize
      until a newer py-mlflow recipe or an external mlflow is available.

    Versions are fetched with git from the checkout this repository sits in; inside
    spack/spack.yaml the checkout's working tree is built directly (``develop:``).
    """

    # No public home yet: the README of the checkout this recipe came with.
    homepage = "file://" + os.path.join(_CHECKOUT, "README.md")
    # The project's own git repository. When hpcbridge is published, replace this with
    # its public URL (and add ``commit=`` to each tagged version).
    git = "file://" + _CHECKOUT

    # The development branch of the checkout.
    version("main", branch="main")
    # The release in pyproject.toml, from the git tag v0.1.0 (until that tag exists,
    # ask for @main or use the develop: entry of spack/spack.yaml).
    version("0.1.0", tag="v0.1.0")

    variant("ssh", default=False, description="SSH transport to a login node (paramiko)")
    variant("flux", default=False, description="Flux's Python bindings (from flux-core)")
    variant("slurm", default=False, description="Slurm's commands (sbatch, squeue, sacct)")
    variant("prefect", default=False, description="Prefect tasks for pipelines")
    variant("mlflow", default=False, description="MLflow run tags for pipelines")

    # [project] requires-python
    depends_on("python@3.9:", type=("build", "run"))
    # [build-system] requires / build-backend = "setuptools.build_meta"
    depends_on("py-setuptools@61:", type="build")
    # [project] dependencies
    depends_on("py-packaging@20:", type=("build", "run"))

    # [project.optional-dependencies]
    depends_on("py-paramiko@3.0:", when="+ssh", type=("build", "run"))
    # pip's "flux" extra is the flux-python wheel; under Spack the bindings come with
    # flux-core, built against the same Python as hpcbridge (concretizer: unify).
    depends_on("flux-core", when="+flux", type="run")
    # pip's "slurm" extra is pyslurm, which Spack does not package (see the docstring).
    depends_on("slurm", when="+slurm", type="run")
    depends_on("py-prefect@3.0:", when="+prefect", type=("build", "run"))
    depends_on("py-mlflow@2.10:", when="+mlflow", type=("build", "run"))

    # The import test Spack runs after installing (`spack install --test=root`).
    import_modules = ["hpcbridge"]
