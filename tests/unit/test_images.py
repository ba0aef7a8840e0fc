"""The Docker image's build context is assembled from the installed pydet: the recipe that
ships as package data, and a source tree that pip builds into the same pydet."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import zipfile

import pytest

from pydet.cli import images
from tests.cluster import ROOT


@pytest.fixture
def context(tmp_path: pathlib.Path) -> pathlib.Path:
    if not (ROOT / "master" / "gateway" / "webui" / "index.html").is_file():
        pytest.skip("the WebUI is not built: run scripts/webui.sh build")
    cas = tmp_path / "cas"
    cas.mkdir()
    (cas / "proxy.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (cas / "notes.txt").write_text("not a certificate")
    ctx = tmp_path / "context"
    ctx.mkdir()
    images.assemble_context(ctx, cas)
    return ctx


def test_the_recipe_is_the_checkouts_dockerfile_and_project_files(context: pathlib.Path) -> None:
    for name in images.RECIPE:
        assert not (context / name).is_symlink()
        assert (context / name).read_bytes() == (ROOT / name).read_bytes()


def test_the_context_holds_the_packages_without_links_or_bytecode(context: pathlib.Path) -> None:
    tree = context / "harness"
    assert sorted(p.name for p in tree.iterdir()) == ["determined", "pydet"]
    assert not [p for p in tree.rglob("*") if p.is_symlink()]
    assert not [p for p in tree.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]
    assert (tree / "pydet" / "master" / "gateway" / "webui" / "index.html").is_file()
    assert (tree / "pydet" / "agent" / "docker_runtime.py").is_file()
    assert (tree / "determined" / "exec" / "launch.py").is_file()
    # Only the host's certificates go in, for pip inside the build.
    assert [p.name for p in (context / images.CA_DIR).iterdir()] == ["proxy.crt"]


def test_the_context_builds_the_pydet_wheel(context: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    proc = subprocess.run(
        [*pip, "-w", str(out), str(context)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out.glob("pydet-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "pydet/master/__main__.py",
        "pydet/agent/__main__.py",
        "pydet/cli/__main__.py",
        "pydet/cli/image/Dockerfile",
        "pydet/master/gateway/webui/index.html",
        "determined/__init__.py",
    } <= names


def test_settings_come_from_the_environment() -> None:
    s = images.Settings.from_env({"PYDET_DEBIAN_SUITE": "forky", "PYDET_IMAGE_CACHE": "/c"})
    assert (s.suite, s.base, s.task, s.cache) == (
        "forky",
        "pydet-base:forky",
        "pydet-task:latest",
        pathlib.Path("/c"),
    )
    assert images.Settings.from_env({}) == images.Settings()
