"""Choosing the Docker runtime: the agent and `det deploy local` say what is wrong."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from tests.cluster import ROOT, free_port

# Long enough for the fixture to build the images on a machine that lacks them.
pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]


def test_agent_refuses_the_docker_runtime_without_an_engine(tmp_path: pathlib.Path) -> None:
    sock = tmp_path / "no-engine.sock"
    proc = subprocess.run(
        [sys.executable, "-m", "pydet.agent", "--runtime", "docker", "--work-dir", str(tmp_path)],
        env={"PATH": "/usr/bin:/bin", "DOCKER_HOST": f"unix://{sock}", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert f"det-agent: cannot reach the Docker engine at unix://{sock}" in proc.stderr
    assert "--runtime process" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cluster_up_refuses_a_missing_custom_image(
    docker_engine: None, tmp_path: pathlib.Path
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pydet.cli", "deploy", "local", "cluster-up", "--runtime", "docker",
         "--default-image", "pydet-nothing:0", "--data-dir", str(tmp_path),
         "--master-port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "Docker image pydet-nothing:0 is not in the local engine" in proc.stderr
    assert not (tmp_path / "cluster.json").exists()
