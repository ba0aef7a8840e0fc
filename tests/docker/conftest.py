"""Fixtures for the Docker suite: an engine, the default task image, and docker agents.

The suite needs a Docker engine. Where none answers, it tries to start one the way CI does
(``scripts/docker/install.sh``, as root); where that is impossible the tests are skipped
with the reason. The default task image is built when missing (minutes, once).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from tests.cluster import ROOT, Cluster, wait_until

TASK_IMAGE = "pydet-task:latest"
BASE_IMAGE = "pydet-base:trixie"


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _engine_up() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return _docker("info", timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """A Docker engine that answers, and the default task image in it."""
    if not _engine_up():
        script = ROOT / "scripts" / "docker" / "install.sh"
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            pytest.skip(
                "no Docker engine answers and none can be started here (needs root and "
                "apt-get for scripts/docker/install.sh)"
            )
        proc = subprocess.run([str(script)], capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not _engine_up():
            pytest.skip(f"no Docker engine could be started: {proc.stderr.strip()[-800:]}")
    missing = any(_docker("image", "inspect", i).returncode != 0 for i in (BASE_IMAGE, TASK_IMAGE))
    if missing or not _carries_the_task_tools(TASK_IMAGE):
        build = ROOT / "scripts" / "docker" / "build-images.sh"
        proc = subprocess.run([str(build)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            pytest.fail(f"{build} failed:\n{proc.stderr[-3000:]}")
        assert _carries_the_task_tools(TASK_IMAGE), f"{TASK_IMAGE} lacks JupyterLab or sshd"


# What the default task image carries for notebooks, TensorBoards and shells.
_TOOLS = (
    "import jupyterlab, tensorboard, os, sys; sys.exit(not os.access('/usr/sbin/sshd', os.X_OK))"
)


def _carries_the_task_tools(image: str) -> bool:
    """Whether ``image`` has JupyterLab and TensorBoard in its Python and OpenSSH's sshd: one
    built by an older recipe may not, and is built again."""
    proc = _docker(
        "run",
        "--rm",
        "--network",
        "host",
        "--entrypoint",
        "python3",
        image,
        "-c",
        _TOOLS,
        timeout=300,
    )
    return proc.returncode == 0


def containers(agent_id: str) -> list[dict[str, str]]:
    """The engine's containers (running or not) that belong to ``agent_id``."""
    proc = _docker(
        "ps", "-a", "--filter", f"label=ai.pydet.agent={agent_id}", "--format", "{{json .}}"
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def ended(cluster: Cluster, exp_id: int, want: str = "COMPLETED") -> tuple[int, str]:
    """Wait for the experiment of one trial to end in ``want``: its trial id and logs."""
    state = cluster.wait_state(exp_id, "COMPLETED", "ERROR", "CANCELED", timeout=180)
    trials = cluster.trials(exp_id)
    logs = "\n".join(cluster.logs(t["id"]) for t in trials)
    assert state == want, f"experiment {exp_id} ended {state}, not {want}; its logs:\n{logs}"
    return int(trials[0]["id"]), logs


def labels(info: dict[str, str]) -> dict[str, str]:
    """The labels of a ``docker ps --format '{{json .}}'`` row."""
    pairs = (item.partition("=") for item in info.get("Labels", "").split(",") if item)
    return {k: v for k, _, v in pairs}


def no_containers_left(*agent_ids: str, timeout: float = 20) -> None:
    wait_until(
        lambda: not any(containers(a) for a in agent_ids),
        timeout,
        f"the containers of {agent_ids} to be removed",
    )


@pytest.fixture
def agent_ids() -> list[str]:
    """Agent ids unique to this test: the engine is shared with other runs."""
    tag = uuid.uuid4().hex[:8]
    return [f"dock-{tag}-{i}" for i in range(2)]


@pytest.fixture
def docker_cluster(
    docker_engine: None, tmp_path: pathlib.Path, agent_ids: list[str]
) -> Iterator[Cluster]:
    """A master and no agents yet; tests start docker agents from ``agent_ids``."""
    c = Cluster(tmp_path)
    try:
        c.start_master()
        yield c
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.close()
        # Whatever a failed test left behind must not outlive it.
        for agent_id in agent_ids:
            for info in containers(agent_id):
                _docker("rm", "-f", info["ID"])
