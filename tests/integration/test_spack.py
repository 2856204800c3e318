"""The Spack recipe (spack/) with a real Spack: info, audit, every variant's spec, the
checkout's environment, and an install of the release from a local mirror.

Runs where HPCBRIDGE_TEST_SPACK names a `spack` executable, or else where `spack` is on
PATH; Spack's own settings (SPACK_PYTHON with clingo, a builtin repository it can read
offline, bootstrapping off) come from the environment and Spack's site configuration.
Nothing is added to the user's Spack configuration: every command runs in a Spack
environment under the test's temporary folder, except the concretization of
spack/spack.yaml, which writes spack/spack.lock (ignored by git).

Each `spack spec` takes one to three minutes, so the module is marked slow.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from tests.support.components import absent_reason

ROOT = Path(__file__).resolve().parents[2]
SPACK_DIR = ROOT / "spack"
RELEASE_TOOL = SPACK_DIR / "release_sdist.py"
SPACK_TIMEOUT = 1800  # seconds; a spec takes 60-180 s on two busy cores

SKIP_REASON = absent_reason(
    "spack", "Spack not found (HPCBRIDGE_TEST_SPACK names it, else `spack` on PATH)"
)


def _find_spack() -> str:
    named = os.environ.get("HPCBRIDGE_TEST_SPACK")
    if named:
        return named
    return shutil.which("spack") or ""


SPACK = _find_spack()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not SPACK, reason=SKIP_REASON)]

VARIANT_SPECS = ["py-hpcbridge", "py-hpcbridge+ssh", "py-hpcbridge+flux", "py-hpcbridge@main"]
# pip distribution -> Spack package, for the externals an offline install needs.
EXTERNAL_PYTHON_PACKAGES = {
    "pip": "py-pip",
    "setuptools": "py-setuptools",
    "wheel": "py-wheel",
    "packaging": "py-packaging",
    "paramiko": "py-paramiko",
}


def spack(*args: str, env_dir: Optional[Path] = None) -> subprocess.CompletedProcess:
    """Run spack (in the environment `env_dir` when given); fail the test on a non-zero exit."""
    command = [SPACK, *(["-e", str(env_dir)] if env_dir else []), *args]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=SPACK_TIMEOUT, check=False
    )
    assert result.returncode == 0, f"{' '.join(command)}:\n{result.stdout}\n{result.stderr}"
    return result


def _write_env(env_dir: Path, config: Dict) -> Path:
    env_dir.mkdir(parents=True, exist_ok=True)
    # JSON is YAML: spack.yaml needs no YAML library here.
    (env_dir / "spack.yaml").write_text(json.dumps({"spack": config}, indent=1), encoding="utf-8")
    return env_dir


@pytest.fixture(scope="module")
def recipe_env(tmp_path_factory) -> Path:
    """An empty Spack environment to which `spack repo add` adds this checkout's repository."""
    env_dir = _write_env(tmp_path_factory.mktemp("spack") / "recipe-env", {"specs": []})
    spack("repo", "add", str(SPACK_DIR), env_dir=env_dir)
    assert str(SPACK_DIR) in (env_dir / "spack.yaml").read_text(encoding="utf-8")
    return env_dir


def test_info(recipe_env):
    out = spack("info", "py-hpcbridge", env_dir=recipe_env).stdout
    assert "py-hpcbridge" in out and "MIT" in out


def test_audit(recipe_env):
    spack("audit", "packages", "py-hpcbridge", env_dir=recipe_env)


def test_style():
    """spack style's import, isort, black and flake8 checks (mypy checks Spack itself)."""
    recipe = SPACK_DIR / "packages" / "py-hpcbridge" / "package.py"
    env = dict(os.environ)
    # scripts/build-schedulers.sh puts the checkers beside its Spack, in style-bin/.
    style_bin = Path(SPACK).resolve().parent.parent / "style-bin"
    if style_bin.is_dir():
        env["PATH"] = f"{style_bin}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run(
        [SPACK, "style", "--skip", "mypy", str(recipe)],
        capture_output=True,
        text=True,
        timeout=SPACK_TIMEOUT,
        check=False,
        cwd=ROOT,
        env=env,
    )
    if "bootstrapping is currently disabled" in result.stderr:
        pytest.skip("spack style needs flake8, black and isort on PATH (bootstrapping is off)")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def variant_specs(recipe_env) -> Dict[str, subprocess.CompletedProcess]:
    """``spack spec`` of every variant, side by side (each is a Spack start-up and a
    solve of its own: one command of several specs would solve them together).

    Each runs in its own copy of the environment: Spack may rewrite an environment's
    spack.yaml (a temporary file renamed over it), and two doing so at once fail."""
    started = {}
    for number, spec in enumerate(VARIANT_SPECS):
        own_env = recipe_env.parent / f"spec-env-{number}"
        shutil.copytree(recipe_env, own_env, dirs_exist_ok=True)
        started[spec] = subprocess.Popen(
            [SPACK, "-e", str(own_env), "spec", spec],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    done = {}
    for spec, process in started.items():
        out, err = process.communicate(timeout=SPACK_TIMEOUT)
        done[spec] = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    return done


@pytest.mark.parametrize("spec", VARIANT_SPECS)
def test_spec(variant_specs, spec):
    result = variant_specs[spec]
    assert result.returncode == 0, f"spack spec {spec}:\n{result.stdout}\n{result.stderr}"
    root = next(line for line in result.stdout.splitlines() if "py-hpcbridge@" in line)
    assert spec.removeprefix("py-hpcbridge") in root.replace(" ", ""), root


def test_checkout_environment_concretizes():
    out = spack("concretize", "-f", env_dir=SPACK_DIR).stdout
    assert "py-hpcbridge@main" in out and "flux-core@" in out and "py-paramiko@" in out


# --------------------------------------------------------------------------- install


def _release_sdist(out_dir: Path) -> Path:
    if importlib.util.find_spec("build") is None:
        pytest.skip("python -m build is not installed (pip install build)")
    spec = importlib.util.spec_from_file_location("release_sdist", RELEASE_TOOL)
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    [sdist] = tool.build_release(tool.release_ref(tool.project_version()), out_dir, wheel=False)
    return sdist


def _source_mirror(sdist: Path, mirror: Path) -> None:
    """A Spack source mirror holding the sdist under its sha256 (Spack's digest layout)."""
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    target = mirror / "_source-cache" / "archive" / digest[:2] / f"{digest}.tar.gz"
    target.parent.mkdir(parents=True)
    shutil.copyfile(sdist, target)


def _python_packages(prefix: Path) -> Dict[str, str]:
    """pip-install the externals' distributions under `prefix`; their versions by name."""
    names = list(EXTERNAL_PYTHON_PACKAGES)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--ignore-installed"]
    result = subprocess.run(
        [*command, "--prefix", str(prefix), *names],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"pip could not install {names} for the externals:\n{result.stderr[-2000:]}")
    from importlib.metadata import distributions

    site = next(prefix.glob("lib/python*/site-packages"))
    found = {d.metadata["Name"].lower(): d.version for d in distributions(path=[str(site)])}
    return {name: found[name] for name in names}


def _externals(python_packages: Dict[str, str], prefix: Path) -> Dict:
    python_prefix = sys.base_prefix  # the interpreter itself, not a virtual environment
    packages = {
        "python": {
            "externals": [{"spec": f"python@{platform.python_version()}", "prefix": python_prefix}],
            "buildable": False,
        }
    }
    for dist, version in python_packages.items():
        name = EXTERNAL_PYTHON_PACKAGES[dist]
        packages[name] = {
            "externals": [{"spec": f"{name}@{version}", "prefix": str(prefix)}],
            "buildable": False,
        }
    return packages


@pytest.fixture(scope="module")
def installed_env(tmp_path_factory) -> Path:
    """py-hpcbridge+ssh of the release, installed from a local mirror with Python and the
    Python packages Spack cannot download here as externals."""
    work = tmp_path_factory.mktemp("spack-install")
    _source_mirror(_release_sdist(work / "dist"), work / "mirror")
    pydeps = work / "pydeps"
    python_packages = _python_packages(pydeps)
    site = next(pydeps.glob("lib/python*/site-packages"))
    env_dir = _write_env(
        work / "env",
        {
            "specs": ["py-hpcbridge@0.1.0 +ssh"],
            "repos": [str(SPACK_DIR)],
            "view": True,
            "config": {"install_tree": {"root": str(work / "opt")}},
            "mirrors": {"hpcbridge-release": f"file://{work / 'mirror'}"},
            "packages": _externals(python_packages, pydeps),
            # Spack leaves external packages out of views: their modules come from here.
            "env_vars": {"prepend_path": {"PYTHONPATH": str(site)}},
        },
    )
    spack("concretize", "-f", env_dir=env_dir)
    spack("install", env_dir=env_dir)
    return env_dir


def _in_activated_env(env_dir: Path, commands: List[str], cwd: Path) -> Tuple[str, str]:
    script = 'eval "$("$SPACK" env activate --sh -d "$ENV_DIR")" && ' + " && ".join(commands)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HPCBRIDGE_", "EXAMLOPS_"))}
    env.update(SPACK=SPACK, ENV_DIR=str(env_dir), HPCBRIDGE_STATE_DIR=str(cwd))
    result = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout, result.stderr


def test_install_release_and_submit_from_the_view(installed_env, tmp_path):
    view = installed_env / ".spack-env" / "view"
    out, progress = _in_activated_env(
        installed_env,
        [
            "command -v hpcbridge",
            'python3 -c "import hpcbridge, paramiko; print(hpcbridge.__file__)"',
            f"hpcbridge submit {shlex.quote(str(ROOT / 'examples' / 'hello.sh'))} --wait",
        ],
        cwd=tmp_path,
    )
    lines = out.splitlines()
    assert lines[0] == str(view / "bin" / "hpcbridge")
    assert lines[1].startswith(str(view / "lib")), "hpcbridge is imported from the view"
    assert re.search(r"COMPLETED\s+exit=0", progress), "submit --wait follows the job to its end"
