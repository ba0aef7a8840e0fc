"""The newest releases of the Hugging Face frameworks, not only the pinned ones, still work
with DetCallback: scripts/frameworks/check-newest.sh installs them into a throw-away venv and
runs part of the Hugging Face suite there (slow: it downloads the releases)."""

from __future__ import annotations

import subprocess

import pytest

from tests.cluster import ROOT

pytestmark = pytest.mark.slow


def test_detcallback_works_with_the_newest_releases() -> None:
    proc = subprocess.run(
        [str(ROOT / "scripts" / "frameworks" / "check-newest.sh"), "-k", "paused or bad_input"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    versions = next((line for line in proc.stdout.splitlines() if line.startswith("newest:")), "")
    assert proc.returncode == 0, f"{versions}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert versions and " passed" in proc.stdout and " failed" not in proc.stdout
