"""Build hpcbridge's release sdist and wheel byte for byte the same on every machine.

The Spack recipe (packages/py-hpcbridge/package.py) pins each release by the sha256 of
its sdist, so the sdist must come out identical wherever it is built:

    python spack/release_sdist.py            # the release of pyproject.toml's version
    python spack/release_sdist.py --ref HEAD # any other commit
    python -m twine check dist/*

The tree is exported with ``git archive`` (every file's mtime is the commit's time, and
nothing untracked gets in), built with ``python -m build`` with ``SOURCE_DATE_EPOCH`` set to
the commit's time (the wheel honours it), and the sdist is then written again with fixed
metadata: setuptools stamps the gzip header, the top folder and the generated PKG-INFO and
egg-info files with the build's clock (pypa/setuptools#2133).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import List, Optional

ROOT = Path(__file__).resolve().parent.parent

# The sdist's PKG-INFO and setup.cfg are written by setuptools, so a newer setuptools makes
# a different sdist of the same commit: releases are built with this one.
BUILD_BACKEND_PIN = "setuptools==84.2.1"

# The commit a release's sdist is built from until the release is tagged v<version>.
UNTAGGED_RELEASES = {"0.1.0": "88ca766c11325ed67673bde533fe2cee4ecaac8f"}


def _git(*args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def tag_exists(tag: str) -> bool:
    found = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "-q", "--verify", f"refs/tags/{tag}"],
        capture_output=True,
        check=False,
    )
    return found.returncode == 0


def release_ref(version: str) -> str:
    """The git tag v<version>, or the commit recorded for a release not yet tagged."""
    tag = f"v{version}"
    if tag_exists(tag) or version not in UNTAGGED_RELEASES:
        return tag
    return UNTAGGED_RELEASES[version]


def commit_time(ref: str) -> int:
    return int(_git("log", "-1", "--format=%ct", f"{ref}^{{commit}}"))


def export_tree(ref: str, dest: Path) -> None:
    """The files of commit `ref` under `dest`, each with the commit's time as its mtime."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", ref],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "tar_filter"):  # Python 3.12 and the 3.9-3.11 security releases
            tar.extractall(dest, filter="tar")
        else:  # pragma: no cover - older interpreters
            tar.extractall(dest)  # noqa: S202 - our own commit's files


def normalized_sdist(data: bytes, epoch: int) -> bytes:
    """The same sdist with members sorted, mtimes clamped to `epoch`, owners and gzip time fixed."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as src:
        members = sorted(src.getmembers(), key=lambda m: m.name)
        gz = gzip.GzipFile(fileobj=out, mode="wb", mtime=epoch, filename="")
        with gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as dst:
            for member in members:
                content = src.extractfile(member) if member.isfile() else None
                member.mtime = min(int(member.mtime), epoch)
                member.mode = 0o755 if member.isdir() or member.mode & 0o100 else 0o644
                member.uid = member.gid = 0
                member.uname = member.gname = ""
                member.pax_headers = {}
                dst.addfile(member, content)
    return out.getvalue()


def project_version() -> str:
    """pyproject.toml's [project] version, read without a TOML parser (Python 3.9 has none)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    if match is None:
        raise SystemExit("pyproject.toml has no version")
    return match.group(1)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_release(ref: str, out_dir: Path, *, wheel: bool = True) -> List[Path]:
    """Build the sdist (and the wheel) of commit `ref` into `out_dir`; the sdist comes first."""
    epoch = commit_time(ref)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hpcbridge-release-") as tmp:
        tree, built, pins = Path(tmp) / "tree", Path(tmp) / "dist", Path(tmp) / "pins.txt"
        tree.mkdir()
        export_tree(ref, tree)
        pins.write_text(BUILD_BACKEND_PIN + "\n", encoding="utf-8")
        env = dict(os.environ, SOURCE_DATE_EPOCH=str(epoch), PIP_CONSTRAINT=str(pins))
        kinds = ["--sdist", "--wheel"] if wheel else ["--sdist"]
        command = [sys.executable, "-m", "build", *kinds, "-o", str(built), "."]
        subprocess.run(command, cwd=tree, env=env, capture_output=True, check=True)
        sdist = next(built.glob("*.tar.gz"))
        outputs = [out_dir / sdist.name]
        outputs[0].write_bytes(normalized_sdist(sdist.read_bytes(), epoch))
        for built_wheel in built.glob("*.whl"):
            outputs.append(out_dir / built_wheel.name)
            outputs[-1].write_bytes(built_wheel.read_bytes())
        return outputs


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", help="commit or tag to build (default: the release's)")
    parser.add_argument("--out", default=str(ROOT / "dist"), help="output folder (dist/)")
    args = parser.parse_args(argv)
    if args.ref is None:
        args.ref = release_ref(project_version())
    for path in build_release(args.ref, Path(args.out)):
        print(f"{sha256_of(path)}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
