"""`det user link-with-agent-user` and a workspace's --agent-uid ...: a root agent runs each
task as its owner's (or its workspace's) agent user and group, and says so in one line when
it cannot."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import site
import sys
import tempfile
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, running
from tests.cluster import one_line_error as error

NOBODY = (65534, 65534)
CHECKOUT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not pathlib.Path("/usr/bin/python3").exists(),
    reason="runs tasks as another uid: needs a root agent and a system python3",
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # A root the task's user may enter (pytest's own is its owner's alone), and an agent
    # whose interpreter that user may run: the system python3 with this environment's
    # packages (the virtual environment's interpreter may live under an unreadable home).
    root = pathlib.Path(tempfile.mkdtemp(prefix="agent-users-"))
    root.chmod(0o755)
    # The checkout too: an editable install is found through a .pth file, which the system
    # python3 does not read from PYTHONPATH.
    packages = [p for p in site.getsitepackages() if p.startswith(sys.prefix)]
    checkout = [str(CHECKOUT / "harness"), str(CHECKOUT)]
    env = pytest.MonkeyPatch()
    env.setenv(
        "PYTHONPATH", os.pathsep.join([os.environ.get("PYTHONPATH", ""), *checkout, *packages])
    )
    c = Cluster(root)
    c.agent_python = "/usr/bin/python3"

    def start(c: Cluster) -> None:
        c.start_master()
        c.start_agent("agent-0", 1)

    try:
        yield from running(c, start)
    finally:
        env.undo()
        shutil.rmtree(root, ignore_errors=True)


def test_a_users_tasks_run_as_their_agent_user(cluster: Cluster) -> None:
    out = cluster.det(
        "user", "link-with-agent-user", "admin", "--agent-uid", "65534", "--agent-user",
        "nobody", "--agent-gid", "65534", "--agent-group", "nogroup",
    ).stdout  # fmt: skip
    assert "Linked user admin with agent user nobody (uid 65534)" in out
    ran = cluster.det("cmd", "run", "sh", "-c", 'echo "$(id -u):$(id -g) $USER"').stdout
    assert "65534:65534 nobody" in ran.splitlines()
    partial = cluster.det("user", "link-with-agent-user", "admin", "--agent-uid", "1", check=False)
    assert partial.returncode == 2 and "--agent-user" in partial.stderr


def test_a_workspaces_agent_user_wins_over_the_owners(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cluster.det(
        "workspace", "create", "ops", "--agent-uid", "1", "--agent-user", "daemon",
        "--agent-gid", "1", "--agent-group", "daemon",
    )  # fmt: skip
    cluster.det("project", "create", "ops", "jobs")
    (project,) = json.loads(cluster.det("workspace", "list-projects", "ops", "--json").stdout)
    config = tmp_path / "task.yaml"
    config.write_text("entrypoint: sh -c 'echo ran as $(id -u):$(id -g)'\nresources: {slots: 0}\n")
    task = cluster.det(
        "task", "create", str(config), "--project_id", str(project["id"]), "-f"
    ).stdout
    assert "ran as 1:1" in task, task
    line = error(cluster, "workspace", "edit", "ops", "--agent-uid", "2")
    assert "--agent-user, --agent-gid, --agent-group: the agent uid, user, gid and group" in line
    cluster.det("user", "create", "erin", "--password", "erin-secret-123")
    refused = cluster.det_as(
        "erin", "erin-secret-123", "workspace", "create", "mine", "--agent-uid", "0",
        "--agent-user", "root", "--agent-gid", "0", "--agent-group", "root",
    )  # fmt: skip
    assert refused.returncode == 1
    assert "SET_WORKSPACE_AGENT_USER_GROUP may set the agent user and group" in refused.stderr


def test_a_trial_runs_as_its_owners_agent_user(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    cluster.det(
        "user", "link-with-agent-user", "admin", "--agent-uid", "65534", "--agent-user",
        "nobody", "--agent-gid", "65534", "--agent-group", "nogroup",
    )  # fmt: skip
    config = tmp_path / "exp.yaml"
    config.write_text(
        "entrypoint: python3 -c 'import os; print(\"trial as\", os.getuid(), os.getgid())'\n"
        "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n"
    )
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    exp_id = cluster.create(config, ctx)
    cluster.wait_state(exp_id, "COMPLETED", "ERROR")
    (trial,) = cluster.trials(exp_id)
    assert "trial as 65534 65534" in cluster.logs(int(trial["id"]))
