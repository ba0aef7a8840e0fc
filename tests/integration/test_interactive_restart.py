"""Notebooks, shells and commands survive a master that is SIGKILLed: the agent keeps their
processes, and the restarted master adopts them, their proxy included."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, cluster_fixture, wait_until
from tests.notebooks import run_in_kernel

pytest.importorskip("jupyterlab")
pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = cluster_fixture(tmp_path_factory.mktemp("restart"), slots=3)
    # A restarted master gives the agent time to come back before it calls tasks lost.
    yield from c


def _running(cluster: Cluster, noun: str, task_id: str) -> bool:
    listed = json.loads(cluster.det(noun, "list", "-a", "--json").stdout)
    return any(t["id"] == task_id and t["state"] == "STATE_RUNNING" for t in listed)


def test_a_notebook_a_shell_and_a_command_outlive_a_killed_master(cluster: Cluster) -> None:
    has_ssh = shutil.which("sshd", path="/usr/sbin:/usr/bin") is not None
    nb_id = cluster.det("notebook", "start", "-d").stdout.strip()
    cmd_id = cluster.det("cmd", "run", "-d", "sh", "-c", "echo before; sleep 600").stdout.strip()
    shell_id = cluster.det("shell", "start", "-d").stdout.strip() if has_ssh else ""
    wait_until(lambda: _running(cluster, "notebook", nb_id), 180, "the notebook")
    wait_until(lambda: _running(cluster, "cmd", cmd_id), 60, "the command")
    if shell_id:
        wait_until(lambda: _running(cluster, "shell", shell_id), 60, "the shell")
    token = cluster.token
    assert asyncio.run(run_in_kernel(cluster, nb_id, "x = 20; x + 1", token)) == "21"
    status, body = cluster.fetch(f"/proxy/{nb_id}/api/kernels", token)
    assert status == 200, body
    (kernel,) = json.loads(body)

    assert cluster.master is not None
    cluster.master.send_signal(signal.SIGKILL)
    cluster.master.wait(timeout=30)
    cluster.master = None
    cluster.start_master()

    # Adopted once the agent is back: still running, proxy and all, the kernel's state kept.
    wait_until(lambda: _running(cluster, "notebook", nb_id), 60, "the notebook to be adopted")
    assert asyncio.run(run_in_kernel(cluster, nb_id, "x * 2", token, kernel["id"])) == "40"
    assert _running(cluster, "cmd", cmd_id)
    assert "before" in cluster.det("cmd", "logs", cmd_id).stdout
    if shell_id:
        wait_until(lambda: _running(cluster, "shell", shell_id), 60, "the shell to be adopted")
        out = cluster.det("shell", "open", shell_id, "--", "echo", "still here").stdout
        assert out.strip() == "still here"
    tasks = json.loads(cluster.det("task", "list", "--json").stdout)
    assert {nb_id, cmd_id} <= {t["task_id"] for t in tasks.values()}

    for noun, task_id in (("notebook", nb_id), ("cmd", cmd_id), ("shell", shell_id)):
        if task_id:
            cluster.det(noun, "kill", task_id)
    wait_until(lambda: not _running(cluster, "notebook", nb_id), 60, "the kills")
