"""`det task create|fork|pause|unpause|kill` (Determined's generic tasks) on a real master and
agent: a task runs its entrypoint in its context, pause really stops its process (and its
children's, but those made with --no_pause) and keeps the task, unpause runs it again in a
new allocation, and kill --root ends the whole tree."""

from __future__ import annotations

import json
import pathlib
import re
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, cluster_fixture, wait_until
from tests.cluster import one_line_error as error

RUN = """\
import os, time
print("started", os.environ["DET_TASK_TYPE"], os.environ["DET_ALLOCATION_ID"], flush=True)
print(open("note.txt").read().strip(), flush=True)
time.sleep(600)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("generic"), slots=1)


@pytest.fixture
def task_files(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "run.py").write_text(RUN)
    (ctx / "note.txt").write_text("from the context\n")
    config = tmp_path / "task.yaml"
    config.write_text("entrypoint: python3 run.py\nresources: {slots: 0}\npreemption_timeout: 1\n")
    return config, ctx


def created(out: str) -> str:
    found = re.search(r"^Created task ([0-9a-f-]{36})$", out, re.M)
    assert found is not None, out
    return found.group(1)


def state(cluster: Cluster, task_id: str) -> str:
    ((found,),) = cluster.sql("SELECT state FROM generic_tasks WHERE id = ?", (task_id,))
    return str(found)


def wait_state(cluster: Cluster, task_id: str, wanted: str) -> None:
    wait_until(lambda: state(cluster, task_id) == wanted, 60, f"task {task_id} {wanted}")


def started_lines(cluster: Cluster, task_id: str) -> list[str]:
    out = cluster.det("task", "logs", task_id).stdout
    return [line for line in out.splitlines() if "started GENERIC" in line]


def test_pause_stops_the_process_and_unpause_runs_it_again(
    cluster: Cluster, task_files: tuple[pathlib.Path, pathlib.Path]
) -> None:
    config, ctx = task_files
    task = created(cluster.det("task", "create", str(config), "-c", str(ctx)).stdout)
    wait_until(lambda: started_lines(cluster, task), 60, "the task's first run")
    assert "from the context" in cluster.det("task", "logs", task).stdout
    shown = json.loads(cluster.det("task", "config", task, "--json").stdout)
    assert shown["entrypoint"] == "python3 run.py" and shown["preemption_timeout"] == 1

    assert cluster.det("task", "pause", task).stdout.strip() == f"Paused task {task}"
    wait_state(cluster, task, "PAUSED")
    # Its process is gone: no allocation of it is listed any more.
    assert task not in cluster.det("task", "list").stdout
    line = error(cluster, "task", "pause", task)
    assert f"task {task} is paused and cannot be paused" in line

    cluster.det("task", "unpause", task)
    wait_until(lambda: len(started_lines(cluster, task)) == 2, 60, "the task's second run")
    first, second = started_lines(cluster, task)
    assert first.split()[-1] != second.split()[-1]  # a new allocation
    assert state(cluster, task) == "RUNNING"
    assert "is running, not paused" in error(cluster, "task", "unpause", task)
    cluster.det("task", "kill", task)
    wait_state(cluster, task, "TERMINATED")
    line = error(cluster, "task", "unpause", task)
    assert "terminated, not paused" in line


def test_children_pause_with_their_parent_and_kill_root_ends_the_tree(
    cluster: Cluster, task_files: tuple[pathlib.Path, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    config, ctx = task_files
    parent = created(cluster.det("task", "create", str(config), "-c", str(ctx)).stdout)
    # The child brings no context: it runs in its parent's.
    child = created(
        cluster.det("task", "create", str(config), "-p", parent, "--inherit_context").stdout
    )
    steady = created(
        cluster.det(
            "task", "create", str(config), "-c", str(ctx), "-p", parent, "--no_pause"
        ).stdout
    )
    for t in (parent, child, steady):
        wait_until(lambda t=t: started_lines(cluster, t), 60, f"task {t} running")
    assert "from the context" in cluster.det("task", "logs", child).stdout

    cluster.det("task", "pause", parent)
    wait_state(cluster, parent, "PAUSED")
    wait_state(cluster, child, "PAUSED")
    assert state(cluster, steady) == "RUNNING"
    assert "created with no_pause" in error(cluster, "task", "pause", steady)
    cluster.det("task", "unpause", parent)
    wait_state(cluster, parent, "RUNNING")
    wait_state(cluster, child, "RUNNING")

    cluster.det("task", "kill", child, "--root")
    for t in (parent, child, steady):
        wait_state(cluster, t, "TERMINATED")


def test_fork_starts_from_another_tasks_config_and_context(
    cluster: Cluster, task_files: tuple[pathlib.Path, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    config, ctx = task_files
    original = created(cluster.det("task", "create", str(config), "-c", str(ctx)).stdout)
    forked = created(cluster.det("task", "fork", original).stdout)
    wait_until(lambda: started_lines(cluster, forked), 60, "the fork running")
    assert "from the context" in cluster.det("task", "logs", forked).stdout
    # With --fork, the new config is laid over the forked one.
    over = tmp_path / "over.yaml"
    over.write_text("description: changed\n")
    third = created(cluster.det("task", "create", str(over), "--fork", original).stdout)
    shown = json.loads(cluster.det("task", "config", third, "--json").stdout)
    assert shown["description"] == "changed" and shown["entrypoint"] == "python3 run.py"
    for t in (original, forked, third):
        cluster.det("task", "kill", t)
        wait_state(cluster, t, "TERMINATED")


def test_bad_generic_tasks_get_one_line(
    cluster: Cluster, task_files: tuple[pathlib.Path, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    config, _ = task_files
    empty = tmp_path / "empty.yaml"
    empty.write_text("{}\n")
    assert "give a task config" in error(cluster, "task", "create", str(empty))
    line = error(cluster, "task", "create", str(config), "--inherit_context")
    assert "inherit_context: needs the parent task" in line
    missing = "00000000-0000-0000-0000-000000000000"
    assert f"task {missing} not found" in error(cluster, "task", "fork", missing).lower()
    assert "project 99 not found" in error(
        cluster, "task", "create", str(config), "--project_id", "99"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("entrypoint: python3 run.py\npreemption_timeout: soon\n")
    assert "preemption_timeout: expected a number" in error(cluster, "task", "create", str(bad))
    noentry = tmp_path / "noentry.yaml"
    noentry.write_text("resources: {slots: 0}\n")
    assert "entrypoint" in error(cluster, "task", "create", str(noentry))
    line = error(cluster, "task", "kill", missing, "--root")
    assert "not a generic task" in line or "not found" in line


def test_a_paused_task_stays_paused_across_a_master_restart(
    cluster: Cluster, task_files: tuple[pathlib.Path, pathlib.Path]
) -> None:
    config, ctx = task_files
    task = created(cluster.det("task", "create", str(config), "-c", str(ctx)).stdout)
    wait_until(lambda: started_lines(cluster, task), 60, "the task's first run")
    cluster.det("task", "pause", task)
    wait_state(cluster, task, "PAUSED")
    cluster.stop_master()
    cluster.start_master()
    assert state(cluster, task) == "PAUSED"
    cluster.det("task", "unpause", task)
    wait_until(lambda: len(started_lines(cluster, task)) == 2, 90, "the run after the restart")
    cluster.det("task", "kill", task)
    wait_state(cluster, task, "TERMINATED")
