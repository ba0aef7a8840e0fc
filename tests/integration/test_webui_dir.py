"""The master serves the WebUI built into its package, or a development build from
``webui_dir`` (``det-master --webui-dir DIR``) for people working on the WebUI."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, running


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return int(resp.status), bytes(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture
def dev_build(tmp_path: pathlib.Path) -> pathlib.Path:
    build = tmp_path / "webui-dev"
    (build / "assets").mkdir(parents=True)
    (build / "index.html").write_text("<!doctype html><title>dev build</title>")
    (build / "assets" / "main-1.js").write_text("console.log('dev')")
    return build


@pytest.fixture
def dev_master(tmp_path: pathlib.Path, dev_build: pathlib.Path) -> Iterator[Cluster]:
    yield from running(
        Cluster(tmp_path, master_config=f"webui_dir: {dev_build}\n"),
        Cluster.start_master,
    )


def test_a_development_build_is_served_and_picked_up_when_it_changes(
    dev_master: Cluster, dev_build: pathlib.Path
) -> None:
    assert fetch(f"{dev_master.url}/experiments/1") == (
        200,
        b"<!doctype html><title>dev build</title>",
    )
    assert fetch(f"{dev_master.url}/assets/main-1.js") == (200, b"console.log('dev')")
    # A rebuild (vite build --watch) replaces the files: the next request gets the new ones.
    (dev_build / "assets" / "main-2.js").write_text("console.log('rebuilt')")
    (dev_build / "index.html").write_text("<!doctype html><title>rebuilt</title>")
    assert fetch(f"{dev_master.url}/")[1] == b"<!doctype html><title>rebuilt</title>"
    assert fetch(f"{dev_master.url}/assets/main-2.js") == (200, b"console.log('rebuilt')")
    # The API is still the API.
    assert fetch(f"{dev_master.url}/health")[0] == 200


def test_a_missing_webui_dir_stops_the_master_with_the_reason(tmp_path: pathlib.Path) -> None:
    argv = [sys.executable, "-m", "pydet.master", "--port", "0", "--data-dir", str(tmp_path)]
    proc = subprocess.run(
        [*argv, "--webui-dir", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"det-master: master config: webui_dir: {tmp_path / 'nowhere'} is not a directory "
        "(a WebUI build, e.g. from scripts/webui.sh watch DIR)"
    )
