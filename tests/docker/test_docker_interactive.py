"""`det notebook` and `det shell` with the docker runtime: the default task image carries
JupyterLab and OpenSSH's sshd, and both are reached through the master's proxy."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.cluster import Cluster, wait_until
from tests.docker.conftest import no_containers_left
from tests.notebooks import run_in_kernel

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]


def _running(cluster: Cluster, noun: str, task_id: str) -> bool:
    listed = json.loads(cluster.det(noun, "list", "--json").stdout)
    return any(t["id"] == task_id and t["state"] == "STATE_RUNNING" for t in listed)


def test_a_notebook_and_a_shell_run_in_the_default_task_image(
    docker_cluster: Cluster, agent_ids: list[str]
) -> None:
    agent = agent_ids[0]
    docker_cluster.start_agent(agent, runtime="docker")
    out = docker_cluster.det("notebook", "start", "--no-browser").stdout
    assert "Jupyter Notebook is running at: " in out, out
    nb_id = out.split("(id: ", 1)[1].split(",", 1)[0]
    code = "import jupyterlab, sys; sys.executable + ' ' + jupyterlab.__version__"
    shown = asyncio.run(run_in_kernel(docker_cluster, nb_id, code, docker_cluster.token))
    assert "/opt/pydet/bin/python" in shown  # the image's own Python, JupyterLab and all

    # No slot: the agent's one is the notebook's.
    shell_id = docker_cluster.det(
        "shell", "start", "-d", "--config", "resources.slots=0"
    ).stdout.strip()
    wait_until(lambda: _running(docker_cluster, "shell", shell_id), 120, "the shell's sshd")
    # ssh joins its arguments into one line for the login shell there.
    ran = docker_cluster.det(
        "shell", "open", shell_id, "--", "ls", "/usr/sbin/sshd", "&&", "echo", "$DET_TASK_TYPE"
    ).stdout.split()
    assert ran == ["/usr/sbin/sshd", "SHELL"]

    docker_cluster.det("notebook", "kill", nb_id)
    docker_cluster.det("shell", "kill", shell_id)
    wait_until(
        lambda: (
            not _running(docker_cluster, "notebook", nb_id)
            and not _running(docker_cluster, "shell", shell_id)
        ),
        60,
        "the notebook and the shell to end",
    )
    no_containers_left(agent, timeout=60)
